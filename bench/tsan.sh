#!/usr/bin/env bash
# ThreadSanitizer over metron's threads, into build/tsan: exits non-zero on any report.
#
#   bench/tsan.sh            build (2 jobs) and run both parts
#   bench/tsan.sh plan       only the planner
#   bench/tsan.sh exec       only the executor
#
# - the planner's parallel search: its tests, and `metron plan` on 2, 4 and 8 threads;
# - the executor's threads: its core's tests (a thread per stream, hardware queues, events, host
#   waits; every rank of a step on a thread of its own with the real core and CPU backend; the
#   failure flush, the launcher, the TCP store) and the model payload's ranks on threads;
# - `metron run` for real (one process per rank, started as torchrun starts them; a thread per
#   stream, Gloo's threads) on 1F1B, interleaved, ZB-H1 with data parallelism, one hardware queue,
#   and the model payload.
#
# libtorch, Gloo and OpenBLAS come from Debian without TSan's instrumentation: TSan sees their
# locks (through the pthread calls it intercepts) but not their memory accesses, so a race inside
# them goes unseen and one between them and metron's code shows only on metron's side. libtorch is
# kept to one thread per rank (--threads 1; its intra-op pool is not ours to check).
#
# Not part of CI: a TSan build of the libraries takes about as long as the asan build, which the
# CI budget does not leave room for; run it when threaded code changes and put the result in the
# closing note.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build/tsan"
parts=("${@:-plan exec}")
# shellcheck disable=SC2206  # one word per part
parts=(${parts[*]})
targets=(metron metron_executor)
for part in "${parts[@]}"; do
  case "$part" in
    plan) targets+=(plan_tests) ;;
    exec) targets+=(exec_tests exec_model_payload_tests) ;;
    *) echo "tsan.sh: unknown part \"$part\"; expected plan or exec" >&2; exit 2 ;;
  esac
done

cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMETRON_WERROR=ON \
  -DMETRON_BUILD_BENCH=OFF -DMETRON_ENABLE_CUDA=OFF -DMETRON_INSTALL=OFF \
  "-DCMAKE_CXX_FLAGS=-fsanitize=thread -fno-omit-frame-pointer" \
  "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread" >/dev/null
cmake --build "$BUILD" -j2 --target "${targets[@]}"
# halt_on_error: the first race fails the run; second_deadlock_stack for lock-order reports.
# bench/tsan.supp: reports inside libtorch's own code, each with its reason.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$ROOT/bench/tsan.supp ${TSAN_OPTIONS:-}"
METRON="$BUILD/cli/metron"
DATA="$ROOT/tests/cli/data"

run_plan() {
  "$BUILD/tests/plan/plan_tests" --gtest_brief=1
  for threads in 2 4 8; do
    echo "==> metron plan --threads $threads"
    "$METRON" plan --threads "$threads" -q --top 3 >/dev/null
    "$METRON" plan --threads "$threads" -q --model gpt3-1.3b --hardware dgx-a100 \
      --gpus 16 --global-batch 64 --schedules all --sync all --top 3 >/dev/null
  done
}

run_exec() {
  "$BUILD/tests/exec/exec_tests" --gtest_brief=1
  # The model payload's in-process ranks (a thread each, real GPT stages); its single-stage math
  # tests have no threads of ours and are left out.
  "$BUILD/tests/exec/exec_model_payload_tests" --gtest_brief=1 --gtest_filter='*ModelRank*'
  local small=(--model "$DATA/flags-small-model.json" --threads 1 --iterations 2 --warmup 1)
  # cpu-local with one hardware queue: every stream of a rank dispatched in issue order.
  local q1="$BUILD/cpu-local-q1.json"
  "$METRON" presets hardware --json | /usr/bin/python3 -c 'import json,sys
for line in sys.stdin:
    h = json.loads(line)
    if h["name"] == "cpu-local":
        h["name"] = "cpu-local-q1"; h["hardware_queues"] = 1; print(json.dumps(h))' >"$q1"
  local runs=(
    "--hardware cpu-local --pp 2 -m 4 --schedule 1f1b"
    "--hardware cpu-local --pp 2 --vp 2 -m 4 --schedule interleaved-1f1b"
    "--hardware cpu-local --pp 2 --dp 2 -m 2 --schedule zb-h1 --sync megatron-distopt"
    "--hardware $q1 --pp 2 -m 4 --schedule 1f1b"
    "--hardware cpu-local --pp 2 -m 2 --schedule 1f1b --payload model --check"
  )
  local r ranks port rank pids status
  for r in "${runs[@]}"; do
    echo "==> metron run $r"
    # Each rank its own process, as under torchrun: the local launcher forks its ranks, and it
    # refuses to fork from a process that runs threads, which TSan's runtime always does.
    ranks=2
    [[ "$r" == *"--dp 2"* ]] && ranks=4
    port=$((20000 + RANDOM % 20000))
    pids=()
    for ((rank = 0; rank < ranks; ++rank)); do
      # shellcheck disable=SC2086  # one word per flag
      RANK=$rank WORLD_SIZE=$ranks MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        "$METRON" run "${small[@]}" $r >/dev/null &
      pids+=($!)
    done
    status=0
    for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
    ((status == 0)) || { echo "tsan.sh: metron run $r failed (exit $status)" >&2; exit 1; }
  done
}

for part in "${parts[@]}"; do "run_$part"; done
echo "tsan: no data race reported (${parts[*]})"
