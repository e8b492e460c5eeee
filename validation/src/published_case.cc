#include "metron/validation/published_case.h"

#include <cmath>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>

#include "metron/base/error.h"
#include "metron/base/json_parse.h"
#include "shipped_cases.h"

namespace metron::validation {
namespace {

using Json = nlohmann::ordered_json;

/// Reads one case; every error names the case ("cases[3] (id): key: what").
class CaseReader {
 public:
  CaseReader(std::string where, const std::string& source)
      : where_(std::move(where)), source_(source) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw ParseError(source_, 0, 0, where_ + ": " + key + (key.empty() ? "" : ": ") + what);
  }

  void name_case(const std::string& id) { where_ += " (" + id + ")"; }

  void require_known(const Json& object, const std::string& path,
                     std::initializer_list<std::string_view> known) const {
    for (const auto& [key, value] : object.items()) {
      bool found = false;
      for (const std::string_view k : known) found = found || k == key;
      if (!found) fail(path.empty() ? key : path + "." + key, "unknown key");
    }
  }

  [[nodiscard]] const Json& object_at(const Json& parent, const std::string& key,
                                      const std::string& path) const {
    const auto it = parent.find(key);
    if (it == parent.end()) fail(path, "missing; expected an object");
    if (!it->is_object()) fail(path, "expected an object, got " + it->dump().substr(0, 40));
    return *it;
  }

  [[nodiscard]] std::string text(const Json& parent, const std::string& key,
                                 const std::string& path, bool required = true) const {
    const auto it = parent.find(key);
    if (it == parent.end()) {
      if (required) fail(path, "missing; expected a non-empty string");
      return {};
    }
    if (!it->is_string() || it->get<std::string>().empty()) {
      fail(path, "expected a non-empty string, got " + it->dump().substr(0, 40));
    }
    return it->get<std::string>();
  }

  [[nodiscard]] double positive(const Json& parent, const std::string& key,
                                const std::string& path) const {
    const auto it = parent.find(key);
    if (it == parent.end()) fail(path, "missing; expected a positive number");
    if (!it->is_number() || !(it->get<double>() > 0) || !std::isfinite(it->get<double>())) {
      fail(path, "expected a positive number, got " + it->dump().substr(0, 40));
    }
    return it->get<double>();
  }

  [[nodiscard]] std::vector<std::string> texts(const Json& parent, const std::string& key) const {
    std::vector<std::string> out;
    const auto it = parent.find(key);
    if (it == parent.end()) return out;
    if (!it->is_array()) fail(key, "expected a list of strings");
    for (const Json& item : *it) {
      if (!item.is_string())
        fail(key, "expected a list of strings, got " + item.dump().substr(0, 40));
      out.push_back(item.get<std::string>());
    }
    return out;
  }

  [[nodiscard]] const std::string& where() const { return where_; }

 private:
  std::string where_;
  const std::string& source_;
};

PublishedFigure read_figure(const CaseReader& r, const Json& p) {
  r.require_known(p, "published", {"quantity", "value", "flops", "peak_tflops"});
  PublishedFigure f;
  const std::string quantity = r.text(p, "quantity", "published.quantity");
  bool known = false;
  for (const PublishedQuantity q :
       {PublishedQuantity::kTflopsPerGpu, PublishedQuantity::kMfu,
        PublishedQuantity::kIterationTime, PublishedQuantity::kTokensPerGpu}) {
    if (to_string(q) == quantity) {
      f.quantity = q;
      known = true;
    }
  }
  if (!known) {
    r.fail("published.quantity",
           "expected tflops_per_gpu, mfu, iteration_time_s or tokens_per_s_per_gpu, got \"" +
               quantity + "\"");
  }
  f.value = r.positive(p, "value", "published.value");
  if (f.quantity == PublishedQuantity::kMfu && f.value > 1) {
    r.fail("published.value", "an MFU is a fraction in (0, 1]");
  }
  if (f.quantity == PublishedQuantity::kTflopsPerGpu || f.quantity == PublishedQuantity::kMfu) {
    const std::string flops = r.text(p, "flops", "published.flops");
    f.flops = parse_flops_formula(flops);
    if (!f.flops) {
      r.fail("published.flops",
             "expected narayanan-eq3 or megatron-model-flops, got \"" + flops + "\"");
    }
  }
  if (p.contains("peak_tflops"))
    f.peak_tflops = r.positive(p, "peak_tflops", "published.peak_tflops");
  return f;
}

PublishedCase read_case(const Json& c, std::size_t index, const std::string& source) {
  CaseReader r("cases[" + std::to_string(index) + "]", source);
  if (!c.is_object()) r.fail("", "expected an object");
  PublishedCase out;
  out.id = r.text(c, "id", "id");
  r.name_case(out.id);
  r.require_known(c, "",
                  {"id", "group", "source", "published", "scenario", "unsupported", "settings_from",
                   "assumed", "not_modelled"});
  out.group = r.text(c, "group", "group");
  const Json& s = r.object_at(c, "source", "source");
  r.require_known(s, "source", {"title", "ref", "url"});
  out.source = {.title = r.text(s, "title", "source.title"),
                .ref = r.text(s, "ref", "source.ref"),
                .url = r.text(s, "url", "source.url", /*required=*/false)};
  out.published = read_figure(r, r.object_at(c, "published", "published"));
  out.settings_from = r.texts(c, "settings_from");
  out.assumed = r.texts(c, "assumed");
  out.not_modelled = r.texts(c, "not_modelled");
  const bool has_scenario = c.contains("scenario");
  const bool has_reason = c.contains("unsupported");
  if (has_scenario == has_reason) {
    r.fail("", "expected either \"scenario\" or \"unsupported\" (why metron cannot express it)");
  }
  if (has_reason) {
    out.unsupported = r.text(c, "unsupported", "unsupported");
    return out;
  }
  out.scenario = scenario::scenario_from_json(c.at("scenario").dump(),
                                              source + ": " + r.where() + ": scenario");
  if (!out.scenario->model && out.published.quantity != PublishedQuantity::kIterationTime) {
    r.fail("scenario.model", "missing; the published FLOPs formula or token count needs the model");
  }
  return out;
}

}  // namespace

std::string_view to_string(PublishedQuantity quantity) noexcept {
  switch (quantity) {
    case PublishedQuantity::kTflopsPerGpu:
      return "tflops_per_gpu";
    case PublishedQuantity::kMfu:
      return "mfu";
    case PublishedQuantity::kIterationTime:
      return "iteration_time_s";
    case PublishedQuantity::kTokensPerGpu:
      return "tokens_per_s_per_gpu";
  }
  return "?";
}

std::vector<PublishedCase> cases_from_json(std::string_view text, const std::string& source) {
  const Json root = parse_json_document<Json>(text, source);
  if (!root.is_object()) throw ParseError(source, 0, 0, "expected an object with \"cases\"");
  for (const auto& [key, value] : root.items()) {
    if (key != "about" && key != "cases") throw ParseError(source, 0, 0, key + ": unknown key");
  }
  const auto cases = root.find("cases");
  if (cases == root.end() || !cases->is_array()) {
    throw ParseError(source, 0, 0, "cases: expected a list of cases");
  }
  std::vector<PublishedCase> out;
  std::set<std::string> ids;
  for (std::size_t i = 0; i < cases->size(); ++i) {
    out.push_back(read_case((*cases)[i], i, source));
    if (!ids.insert(out.back().id).second) {
      throw ParseError(source, 0, 0,
                       "cases[" + std::to_string(i) + "]: id: \"" + out.back().id +
                           "\" is used twice; expected a distinct id per case");
    }
  }
  return out;
}

const std::vector<PublishedCase>& shipped_cases() {
  static const std::vector<PublishedCase> kCases =
      cases_from_json(detail::shipped_cases_json(), std::string(kShippedCasesName));
  return kCases;
}

}  // namespace metron::validation
