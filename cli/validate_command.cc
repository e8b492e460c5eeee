#include "validate_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/validation/published_case.h"
#include "metron/validation/validation.h"
#include "output_files.h"
#include "progress_bar.h"

namespace metron::cli {
namespace {

using validation::CaseOutcome;
using validation::GroupSummary;
using validation::PublishedCase;
using validation::PublishedQuantity;

struct ValidateOptions {
  std::string cases_file;
  std::vector<std::string> only;
  std::string json;
  bool details = false;
  bool quiet = false;
};

std::string with_unit(PublishedQuantity quantity, double value) {
  switch (quantity) {
    case PublishedQuantity::kTflopsPerGpu:
      return fmt::format("{:.1f} TF/s", value);
    case PublishedQuantity::kMfu:
      return fmt::format("{:.1f}% MFU", value * 100);
    case PublishedQuantity::kIterationTime:
      return fmt::format("{:.3f} s", value);
    case PublishedQuantity::kTokensPerGpu:
      return fmt::format("{:.0f} tok/s", value);
  }
  return "?";
}

/// Each distinct line of `field` once, with the cases that have it ("every case" when all do):
/// a group's cases mostly share their assumptions, and a line per case would bury the table.
void print_notes(std::ostream& out, const std::vector<const CaseOutcome*>& members,
                 std::vector<std::string> PublishedCase::*field, const std::string& label) {
  std::vector<std::pair<std::string, std::vector<std::string>>> lines;  // line -> case ids
  for (const CaseOutcome* o : members) {
    for (const std::string& line : o->published_case->*field) {
      auto it =
          std::ranges::find(lines, line, &std::pair<std::string, std::vector<std::string>>::first);
      if (it == lines.end()) it = lines.insert(lines.end(), {line, {}});
      it->second.push_back(o->published_case->id);
    }
  }
  for (const auto& [line, ids] : lines) {
    const std::string who =
        ids.size() == members.size() ? "every case" : fmt::format("{}", fmt::join(ids, ", "));
    out << fmt::format("    {} ({}): {}\n", label, who, line);
  }
}

void print_group(std::ostream& out, const GroupSummary& summary,
                 const std::vector<const CaseOutcome*>& members, bool details) {
  std::vector<std::string> refs;
  for (const CaseOutcome* o : members) {
    const auto& source = o->published_case->source;
    const std::string ref = source.title + ", " + source.ref;
    if (std::ranges::find(refs, ref) == refs.end()) refs.push_back(ref);
  }
  out << summary.group << "\n";
  for (const std::string& ref : refs) out << "  " << ref << "\n";
  out << fmt::format("  {:<36}{:>14}{:>14}{:>9}{:>8}{:>9}{:>17}\n", "case", "published",
                     "predicted", "error", "bubble", "exposed", "memory GiB/GPU");
  bool overflow = false;
  for (const CaseOutcome* o : members) {
    const PublishedCase& c = *o->published_case;
    if (!o->predicted) {
      out << fmt::format("  {:<36}{:>14}  {}\n", c.id,
                         with_unit(c.published.quantity, c.published.value), o->failure);
      continue;
    }
    const bool fits = o->peak_memory_bytes <= static_cast<double>(o->hbm_capacity);
    overflow = overflow || !fits;
    out << fmt::format("  {:<36}{:>14}{:>14}{:>+8.1f}%{:>7.1f}%{:>8.1f}%{:>10.1f} /{:>5.1f}{}\n",
                       c.id, with_unit(c.published.quantity, c.published.value),
                       with_unit(c.published.quantity, *o->predicted), o->error * 100,
                       o->bubble_fraction * 100, o->exposed_comm_fraction * 100,
                       o->peak_memory_bytes / (1ULL << 30),
                       static_cast<double>(o->hbm_capacity) / (1ULL << 30), fits ? "" : " !");
  }
  if (overflow) out << "    ! the prediction does not fit in the GPU's memory\n";
  print_notes(out, members, &PublishedCase::assumed, "assumed");
  print_notes(out, members, &PublishedCase::not_modelled, "not modelled");
  if (details) print_notes(out, members, &PublishedCase::settings_from, "settings from");
  out << fmt::format(
      "  mean |error| {:.1f}% (bias {:+.1f}%) over {} case{}{}\n\n", summary.mean_abs_error * 100,
      summary.mean_error * 100, summary.cases, summary.cases == 1 ? "" : "s",
      summary.failed > 0 ? fmt::format(", {} without a prediction", summary.failed) : "");
}

void print_report(std::ostream& out, const std::vector<CaseOutcome>& outcomes,
                  const std::vector<GroupSummary>& groups, bool details) {
  for (const GroupSummary& g : groups) {
    if (g.group == "all") continue;
    std::vector<const CaseOutcome*> members;
    for (const CaseOutcome& o : outcomes) {
      if (o.published_case->group == g.group) members.push_back(&o);
    }
    print_group(out, g, members, details);
  }
  out << fmt::format("{:<48}{:>7}{:>14}{:>9}{:>9}\n", "summary", "cases", "mean |error|", "bias",
                     "failed");
  for (const GroupSummary& g : groups) {
    out << fmt::format("  {:<46}{:>7}{:>13.1f}%{:>+8.1f}%{:>9}\n", g.group, g.cases,
                       g.mean_abs_error * 100, g.mean_error * 100, g.failed);
  }
}

bool selected(const PublishedCase& c, const std::vector<std::string>& only) {
  if (only.empty()) return true;
  return std::ranges::any_of(only, [&](const std::string& s) {
    return c.id.find(s) != std::string::npos || c.group.find(s) != std::string::npos;
  });
}

void run_validate(const ValidateOptions& o) {
  check_outputs({{"--json", o.json}});
  const std::vector<PublishedCase> from_file =
      o.cases_file.empty() ? std::vector<PublishedCase>{}
                           : validation::cases_from_json(read_file(o.cases_file), o.cases_file);
  const std::vector<PublishedCase>& all =
      o.cases_file.empty() ? validation::shipped_cases() : from_file;
  std::vector<const PublishedCase*> chosen;
  for (const PublishedCase& c : all) {
    if (selected(c, o.only)) chosen.push_back(&c);
  }
  if (chosen.empty()) {
    throw InvalidConfig(
        fmt::format("--only {}: expected a text that a case id or group contains; "
                    "none of the {} cases matches",
                    fmt::join(o.only, ","), all.size()));
  }
  std::vector<CaseOutcome> outcomes;
  {
    ProgressBar bar(std::cerr, !o.quiet && ProgressBar::stderr_is_terminal());
    for (const PublishedCase* c : chosen) {
      bar.update("simulating published runs", static_cast<std::int64_t>(outcomes.size()),
                 static_cast<std::int64_t>(chosen.size()));
      outcomes.push_back(validation::validate_case(*c));
    }
  }
  const std::vector<GroupSummary> groups = validation::summarize(outcomes);
  if (!o.json.empty()) {
    write_file_atomically(o.json, validation::validation_json(outcomes, groups));
  }
  if (o.json != "-") {
    std::cout << fmt::format("{} published run{} from {}\n\n", outcomes.size(),
                             outcomes.size() == 1 ? "" : "s",
                             o.cases_file.empty() ? validation::kShippedCasesName : o.cases_file);
    print_report(std::cout, outcomes, groups, o.details);
  }
}

}  // namespace

void add_validate_command(CLI::App& app) {
  auto o = std::make_shared<ValidateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Check metron's predictions against published training runs. Each case is the run as its\n"
      "source describes it (model, GPUs, parallel sizes, batch, schedule, data-parallel sync),\n"
      "simulated as 'metron simulate' does; the prediction is turned into the quantity the\n"
      "source printed (TFLOP/s per GPU by the source's own FLOPs formula, MFU or iteration time)\n"
      "and compared. Prints per case the published figure, the prediction, the error, the\n"
      "simulated bubble, exposed communication and peak memory, what was assumed where the\n"
      "source is silent and what metron does not model; per source and over all cases the mean\n"
      "|error| and its sign. A case metron cannot express or simulate is listed with the reason.\n"
      "Without a file it checks the runs shipped with metron (Narayanan et al. SC'21 Tables 1-2,\n"
      "Megatron-LM's H100 weak-scaling table, NeMo 24.07's DGX-H100 FP8 table). The cases are for\n"
      "checking: no cost-model constant is fitted to them.");
  cmd->add_option("cases", o->cases_file,
                  "a cases JSON (format: validation/include/metron/validation/published_case.h)\n"
                  "instead of the shipped runs");
  cmd->add_option("--only", o->only,
                  "check only the cases whose id or group contains one of these texts")
      ->delimiter(',');
  cmd->add_option("--json", o->json,
                  "also write every case and group summary as JSON here ('-': "
                  "standard output, instead of the tables)");
  cmd->add_flag("--details", o->details, "also print where each published setting comes from");
  cmd->add_flag("-q,--quiet", o->quiet, "no progress on standard error");
  cmd->callback([o] { run_validate(*o); });
}

}  // namespace metron::cli
