// Hostile input (issue 14), as a table: each case is one metron command with the exit code and
// the shape of the message it must give.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/cli_runner.h"
