#!/usr/bin/env bash
# ThreadSanitizer over metron's threads: builds the planner's tests and the metron command with
# -fsanitize=thread into build/tsan and runs the planner's parallel search on several thread
# counts, in its tests and on its default request. Exits non-zero on any report.
#
#   bench/tsan.sh            build (2 jobs) and run
#
# Not part of CI: a TSan build of the libraries takes about as long as the release build, which
# the CI budget does not leave room for; run it when the parallel code changes and put the result
# in the closing note.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build/tsan"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMETRON_WERROR=ON \
  -DMETRON_BUILD_BENCH=OFF -DMETRON_ENABLE_CUDA=OFF -DMETRON_INSTALL=OFF \
  "-DCMAKE_CXX_FLAGS=-fsanitize=thread -fno-omit-frame-pointer" \
  "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread" >/dev/null
cmake --build "$BUILD" -j2 --target metron plan_tests
# halt_on_error: the first race fails the run; second_deadlock_stack for lock-order reports.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
"$BUILD/tests/plan/plan_tests" --gtest_brief=1
for threads in 2 4 8; do
  echo "==> metron plan --threads $threads"
  "$BUILD/cli/metron" plan --threads "$threads" -q --top 3 >/dev/null
  "$BUILD/cli/metron" plan --threads "$threads" -q --model gpt3-1.3b --hardware dgx-a100 \
    --gpus 16 --global-batch 64 --schedules all --sync all --top 3 >/dev/null
done
echo "tsan: no data race reported"
