// Note [two programs] (cli_main.h).

#include "cli_main.h"

#include <CLI/CLI.hpp>
#include <cctype>
#include <exception>
#include <iostream>
#include <new>

#include "check_trace_command.h"
#include "compare_command.h"
#include "cost_command.h"
#include "graph_command.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/base/temporary_file_guard.h"
#include "plan_command.h"
#include "presets_command.h"
#include "schedule_command.h"
#include "simulate_command.h"
#include "validate_command.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

int report(const std::string& message, int code) {
  std::cerr << "metron: error: " << message << "\n";
  return code;
}

/// CLI11 reports `metron grpah` as "a subcommand is required"; name the word it did not know.
void reject_unknown_subcommand(CLI::App& app, const CLI::ParseError& e) {
  for (CLI::App* chosen : app.get_subcommands()) reject_unknown_subcommand(*chosen, e);
  for (const std::string& word : app.remaining()) {
    if (!word.empty() && word[0] != '-') {
      const bool has_commands = !app.get_subcommands([](CLI::App*) { return true; }).empty();
      const std::string where = app.get_parent() == nullptr ? "" : " of '" + app.get_name() + "'";
      throw CLI::ParseError(
          (has_commands ? "unknown command '" : "unexpected argument '") + word + "'" + where,
          e.get_exit_code());
    }
  }
}

}  // namespace

namespace metron::cli {

int run_metron(int argc, char** argv, const ExecutorCommands& executor_commands) {
  // Ctrl-C or a scheduler's SIGTERM during a write must not leave `.NAME.tmp.PID.N` behind
  // (Note [temporaries on signals] in base/src/temporary_file_guard.cc).
  metron::remove_temporaries_on_signals();
  CLI::App app{
      "metron plans, simulates and validates distributed training of large models.\n"
      "A training step is one task graph; metron checks it, converts it, simulates it,\n"
      "executes it and compares the two.",
      "metron"};
  app.set_version_flag("--version", "metron " METRON_VERSION);
  app.require_subcommand(1);
  app.footer(
      "\nRun 'metron <command> --help' for a command's options.\n"
      "Exit codes: 0 success, 1 runtime failure, 2 bad input.");
  add_graph_command(app);
  add_schedule_command(app);
  add_simulate_command(app);
  executor_commands.add(app);
  add_plan_command(app);
  add_presets_command(app);
  add_cost_command(app);
  add_check_trace_command(app);
  add_compare_command(app);
  add_validate_command(app);
  try {
    if (executor_commands.hand_off != nullptr) executor_commands.hand_off(argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string message = e.what();
    try {
      reject_unknown_subcommand(app, e);
    } catch (const CLI::ParseError& unknown) {
      message = unknown.what();
    }
    // Messages start lowercase (docs/STYLE.md, Errors §3); CLI11's start with a capital.
    if (!message.empty()) message[0] = static_cast<char>(std::tolower(message[0]));
    return report(message + "; run 'metron --help' for usage", kExitBadInput);
  } catch (const metron::Error& e) {
    return report(e.what(), e.is_input_error() ? kExitBadInput : kExitFailure);
  } catch (const std::bad_alloc&) {
    // Inputs are at most kMaxInputBytes each, so what exhausts memory is what the input asks
    // for (a graph or a search too large for this machine): the user's to shrink.
    return report(
        "out of memory; the input needs more memory than this machine has (each input "
        "file is at most " +
            metron::format_byte_count(metron::kMaxInputBytes) +
            "); expected a smaller graph, trace or search",
        kExitBadInput);
  } catch (const std::exception& e) {
    return report(std::string("unexpected failure: ") + e.what(), kExitFailure);
  }
  return kExitOk;
}

}  // namespace metron::cli
