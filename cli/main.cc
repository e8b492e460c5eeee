// metron: every command, with run and profile handed to metron-exec (Note [two programs] in
// cli_main.h), so that the other commands start without libtorch.

#include "cli_main.h"
#include "executor_handoff.h"

int main(int argc, char** argv) {
  return metron::cli::run_metron(argc, argv,
                                 {.add = metron::cli::add_executor_command_summaries,
                                  .hand_off = metron::cli::hand_off_executor_commands});
}
