#pragma once
// What both metron programs run: the subcommands wired up, and the only place that catches errors
// (docs/STYLE.md, Errors §9): bad input exits with 2, a runtime failure with 1, never a stack
// trace.
//
// Note [two programs]: `metron` is two executables built from the same commands. libtorch's
// static initialisers take ~0.8 s at every start (1.1 s for `metron --version` against ~0.05 s
// without it), and only `run` and `profile` execute anything. So `metron` (main.cc) links every
// command except those two and no executor backend; when its first word is `run` or `profile` it
// replaces itself (execv, same process id, same arguments) with `metron-exec`
// (executor_main.cc), which links the CPU and CUDA backends and every command, and finds it next
// to itself in the build tree or in libexec/metron once installed (executor_handoff.h). A
// launcher (torchrun, srun, mpirun) that starts `metron run` therefore sees one process per rank,
// as before, and `metron --help` lists run and profile with the same descriptions
// (executor_commands.h).

#include <CLI/CLI.hpp>

namespace metron::cli {

/// What one program does with `run` and `profile`.
struct ExecutorCommands {
  /// Adds them, where `metron --help` lists them: the commands (metron-exec) or their
  /// descriptions alone (metron).
  void (*add)(CLI::App& app) = nullptr;
  /// Called before parsing, when set: hands the command line to metron-exec when it names them
  /// (metron). Its errors are reported like any command's.
  void (*hand_off)(int argc, char** argv) = nullptr;
};

/// Parses `argv`, runs the chosen command and returns the process's exit code.
int run_metron(int argc, char** argv, const ExecutorCommands& executor_commands);

}  // namespace metron::cli
