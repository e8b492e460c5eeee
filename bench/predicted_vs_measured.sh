#!/usr/bin/env bash
# Predicted against measured on the CPU backend (issue 17, "The goal, measured"). For each
# scenario of the matrix below (schedule families x sync policies x p2p modes x hardware queues
# 1/8, two ranks on cpu-local):
#   1. `metron profile` measures the scenario's operations here (compute, collectives, p2p), and
#      `metron run` executes it, alternately, RUNS times each (default 3): on a shared VM the
#      machine's speed drifts by several per cent over minutes, and alternating gives the
#      profiles and the runs the same moods;
#   2. the profiles' entries are merged by their median (each operation, collective and
#      transfer time, and each slow-down), and `metron simulate --full --profile` predicts the
#      step with those measured costs (and, for contrast, without them: the cpu-local preset);
#   3. the run with the median iteration time is the measurement.
# One row per scenario: predicted and measured iteration time and the error, and over the ranks
# the largest difference of bubble and of exposed communication, each in percentage points of
# the step. The goal: |error| <= 5 % and both differences <= 5 pp. Run on an otherwise idle
# machine.
#
#   bench/predicted_vs_measured.sh [path/to/metron] [scenario-name-filter]
#   RUNS=3 ITERATIONS=3 PROFILE_FLAGS="--repetitions 9 --slowdown-seconds 2" \
#     bench/predicted_vs_measured.sh          (the defaults)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
METRON="${1:-$ROOT/build/release/cli/metron}"
FILTER="${2:-}"
RUNS="${RUNS:-3}"
ITERATIONS="${ITERATIONS:-3}"
# More repetitions than the profile's default: on a shared VM one profile is one sample of the
# machine's mood, and its noise goes straight into the prediction.
PROFILE_FLAGS="${PROFILE_FLAGS:---repetitions 9 --slowdown-seconds 2}"
SMALL="$ROOT/tests/cli/data/flags-small-model.json"
PY=/usr/bin/python3
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# cpu-local with one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1): every stream of a rank
# dispatched in the host's issue order.
"$METRON" presets hardware --json |
  "$PY" -c 'import json,sys
for line in sys.stdin:
    h = json.loads(line)
    if h["name"] == "cpu-local":
        h["name"] = "cpu-local-q1"; h["hardware_queues"] = 1; print(json.dumps(h))' \
    >"$WORK/cpu-local-q1.json"

# `simulate` and `run` start from different built-in scenarios (simulate's policy is
# megatron-distopt with both overlaps on, run's megatron-ddp; `--sync X` now starts from X's
# defaults on both, but the model, hardware and schedule still differ): the flags are turned into
# one scenario file by `simulate --save-scenario`, and every command below reads that file.
COMMON="--seq 128 -b 1 --no-sp"
G125="--model gpt3-125m"
SCENARIOS=(
  "1f1b pp2 batched q8|$G125 --tp 1 --pp 2 --dp 1 -m 4 --schedule 1f1b --p2p batched --sync megatron-ddp --hardware cpu-local"
  "1f1b pp2 async q8|$G125 --tp 1 --pp 2 --dp 1 -m 4 --schedule 1f1b --p2p async --sync megatron-ddp --hardware cpu-local"
  "1f1b pp2 batched q1|$G125 --tp 1 --pp 2 --dp 1 -m 4 --schedule 1f1b --p2p batched --sync megatron-ddp --hardware $WORK/cpu-local-q1.json"
  "gpipe pp2 async q8|$G125 --tp 1 --pp 2 --dp 1 -m 4 --schedule gpipe --p2p async --sync megatron-ddp --hardware cpu-local"
  "zb-h1 pp2 async q8|$G125 --tp 1 --pp 2 --dp 1 -m 4 --schedule zb-h1 --p2p async --sync megatron-ddp --hardware cpu-local"
  "interleaved pp2 vp2 batched q8|$G125 --tp 1 --pp 2 --dp 1 -m 4 --schedule interleaved-1f1b --vp 2 --p2p batched --sync megatron-ddp --hardware cpu-local"
  "zb-v pp2 async q8|$G125 --tp 1 --pp 2 --dp 1 -m 4 --schedule zb-v --vp 2 --p2p async --sync megatron-ddp --hardware cpu-local"
  "small 1f1b pp2 m8 async q8|--model $SMALL --tp 1 --pp 2 --dp 1 -m 8 --schedule 1f1b --p2p async --sync megatron-ddp --hardware cpu-local"
  "dp2 ddp q8|$G125 --tp 1 --pp 1 --dp 2 -m 2 --schedule 1f1b --sync ddp --hardware cpu-local"
  "dp2 ddp q1|$G125 --tp 1 --pp 1 --dp 2 -m 2 --schedule 1f1b --sync ddp --hardware $WORK/cpu-local-q1.json"
  "dp2 megatron-distopt q8|$G125 --tp 1 --pp 1 --dp 2 -m 2 --schedule 1f1b --sync megatron-distopt --no-overlap-grad-reduce --no-overlap-param-gather --hardware cpu-local"
  "dp2 megatron-distopt overlap q8|$G125 --tp 1 --pp 1 --dp 2 -m 2 --schedule 1f1b --sync megatron-distopt --overlap-grad-reduce --overlap-param-gather --hardware cpu-local"
  "dp2 fairscale-sdp q8|$G125 --tp 1 --pp 1 --dp 2 -m 2 --schedule 1f1b --sync fairscale-sdp --hardware cpu-local"
  "dp2 zero3 q8|$G125 --tp 1 --pp 1 --dp 2 -m 2 --schedule 1f1b --sync zero3 --hardware cpu-local"
  "dp2 fsdp2 q8|$G125 --tp 1 --pp 1 --dp 2 -m 2 --schedule 1f1b --sync fsdp2 --hardware cpu-local"
  "tp2 q8|$G125 --tp 2 --pp 1 --dp 1 -m 2 --schedule 1f1b --sync megatron-ddp --hardware cpu-local"
)

printf '%-32s %10s %10s %10s %8s %8s %9s %9s\n' scenario "preset ms" "pred ms" "meas ms" \
  "preset" error "bubble pp" "exposed pp"
for entry in "${SCENARIOS[@]}"; do
  name="${entry%%|*}"
  flags="${entry#*|}"
  [[ -n "$FILTER" && "$name" != *"$FILTER"* ]] && continue
  [[ "$flags" == *--vp* ]] || flags="$flags --vp 1"
  scenario="$WORK/scenario.json"
  # shellcheck disable=SC2086  # the flags are words
  "$METRON" simulate $COMMON $flags --save-scenario "$scenario" >/dev/null
  for ((i = 0; i < RUNS; i++)); do
    # shellcheck disable=SC2086
    "$METRON" profile "$scenario" $PROFILE_FLAGS -o "$WORK/profile-$i.json" >/dev/null \
      2>"$WORK/profile.log" || { echo "$name: metron profile failed:"; cat "$WORK/profile.log"; exit 1; }
    "$METRON" run "$scenario" --iterations "$ITERATIONS" --warmup 1 \
      --json "$WORK/run-$i.json" >/dev/null 2>"$WORK/run.log" ||
      { echo "$name: metron run failed:"; cat "$WORK/run.log"; exit 1; }
  done
  "$PY" - "$WORK" "$RUNS" <<'PY'
import json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
profiles = [json.load(open(f"{work}/profile-{i}.json")) for i in range(runs)]
merged = dict(profiles[0])
for field, value in profiles[0].items():
    if isinstance(value, float):
        merged[field] = statistics.median(p[field] for p in profiles)
    elif isinstance(value, list):
        # An entry is named by every field but its time; each profile of one scenario lists
        # the same entries.
        name = lambda e: json.dumps({k: v for k, v in e.items() if k != "time_ms"}, sort_keys=True)
        times = {}
        for p in profiles:
            for e in p[field]:
                times.setdefault(name(e), []).append(e["time_ms"])
        merged[field] = [dict(e, time_ms=statistics.median(times[name(e)])) for e in value]
json.dump(merged, open(f"{work}/profile.json", "w"))
PY
  "$METRON" simulate "$scenario" --full --json "$WORK/preset.json" >/dev/null
  "$METRON" simulate "$scenario" --full --profile "$WORK/profile.json" \
    --json "$WORK/predicted.json" >/dev/null
  "$PY" - "$name" "$WORK" "$RUNS" <<'PY'
import json, sys
name, work, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
load = lambda f: json.load(open(f"{work}/{f}"))
preset, predicted = load("preset.json"), load("predicted.json")
measured = sorted((load(f"run-{i}.json") for i in range(runs)), key=lambda r: r["iteration_time_ms"])
m = measured[(runs - 1) // 2]  # the median run (lower median for an even count)
def shares(result):
    t = result["iteration_time_ms"]
    return [(100 * sum(r["bubble_ms"].values()) / t, 100 * r["comm_exposed_ms"] / t)
            for r in result["per_rank"]]
p_share, m_share = shares(predicted), shares(m)
bubble = max(abs(p[0] - q[0]) for p, q in zip(p_share, m_share))
exposed = max(abs(p[1] - q[1]) for p, q in zip(p_share, m_share))
err = lambda p: 100 * (p - m["iteration_time_ms"]) / m["iteration_time_ms"]
print(f"{name:<32} {preset['iteration_time_ms']:10.1f} {predicted['iteration_time_ms']:10.1f} "
      f"{m['iteration_time_ms']:10.1f} {err(preset['iteration_time_ms']):+7.1f}% "
      f"{err(predicted['iteration_time_ms']):+7.1f}% {bubble:9.1f} {exposed:9.1f}")
PY
done
