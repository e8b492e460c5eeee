#pragma once
// Runs a piece of a test in a child process of its own, for what ends or signals the process it
// runs in (a SIGTERM handler that exits, a signal that kills): the test reads the child's wait
// status instead of being ended itself.

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace metron::testing {

/// Runs `body` in a forked child, which exits 0 when body returns; returns the child's wait
/// status (WIFEXITED / WEXITSTATUS / WIFSIGNALED / WTERMSIG read it).
template <class Body>
int status_of_child(Body body) {
  const pid_t child = ::fork();
  if (child == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return status;
}

}  // namespace metron::testing
