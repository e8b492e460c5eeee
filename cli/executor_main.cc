// metron-exec: every command of metron, run and profile among them, with the executor's
// backends linked (Note [two programs] in cli_main.h). metron starts it for run and profile.

#include <CLI/CLI.hpp>

#include "cli_main.h"
#include "profile_command.h"
#include "run_command.h"

namespace {

void add_executor_commands(CLI::App& app) {
  metron::cli::add_run_command(app);
  metron::cli::add_profile_command(app);
}

}  // namespace

int main(int argc, char** argv) {
  return metron::cli::run_metron(argc, argv, {.add = add_executor_commands});
}
