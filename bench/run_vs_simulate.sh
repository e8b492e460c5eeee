#!/usr/bin/env bash
# Simulated vs measured iteration time on the CPU backend (issue 16's table; no calibration: the
# cpu-local preset as it is). For each scenario: `metron simulate --full` and `metron run`, then
# one row: predicted ms, measured median ms, error. Run on an otherwise idle machine.
#
#   bench/run_vs_simulate.sh [path/to/metron]      (default build/release/cli/metron)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
METRON="${1:-$ROOT/build/release/cli/metron}"
SMALL="$ROOT/tests/cli/data/flags-small-model.json"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# Every flag explicit: `simulate` and `run` start from different defaults.
COMMON="--hardware cpu-local --seq 128 -b 1 --no-sp"
SCENARIOS=(
  "gpt3-125m 1f1b pp2|--model gpt3-125m --tp 1 --pp 2 --dp 1 --vp 1 -m 4 --schedule 1f1b --sync megatron-ddp"
  "gpt3-125m gpipe pp2|--model gpt3-125m --tp 1 --pp 2 --dp 1 --vp 1 -m 4 --schedule gpipe --sync megatron-ddp"
  "gpt3-125m zb-h1 pp2|--model gpt3-125m --tp 1 --pp 2 --dp 1 --vp 1 -m 4 --schedule zb-h1 --sync megatron-ddp"
  "gpt3-125m interleaved pp2 vp2|--model gpt3-125m --tp 1 --pp 2 --dp 1 --vp 2 -m 4 --schedule interleaved-1f1b --sync megatron-ddp"
  "gpt3-125m dp2 ddp|--model gpt3-125m --tp 1 --pp 1 --dp 2 --vp 1 -m 2 --schedule 1f1b --sync ddp"
  "gpt3-125m tp2|--model gpt3-125m --tp 2 --pp 1 --dp 1 --vp 1 -m 2 --schedule 1f1b --sync megatron-ddp"
  "small pp2 m8|--model $SMALL --tp 1 --pp 2 --dp 1 --vp 1 -m 8 --schedule 1f1b --sync megatron-ddp"
)

printf '%-34s %12s %12s %9s\n' scenario "simulated ms" "measured ms" error
for entry in "${SCENARIOS[@]}"; do
  name="${entry%%|*}"
  flags="${entry#*|}"
  # shellcheck disable=SC2086  # the flags are words
  "$METRON" simulate $COMMON $flags --full --json "$WORK/sim.json" >/dev/null
  # shellcheck disable=SC2086
  "$METRON" run $COMMON $flags --iterations 5 --warmup 1 --json "$WORK/run.json" >/dev/null 2>&1
  /usr/bin/python3 - "$name" "$WORK/sim.json" "$WORK/run.json" <<'PY'
import json, sys
name, sim, run = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
p, m = sim["iteration_time_ms"], run["iteration_time_ms"]
print(f"{name:<34} {p:12.1f} {m:12.1f} {100 * (p - m) / m:+8.1f}%")
PY
done
