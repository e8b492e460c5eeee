#!/usr/bin/env bash
# Runs two metron binaries over the same set of cases and checks that their outputs are
# byte-identical: the check a refactoring that must not change behaviour is held to.
#
#   scripts/compare_outputs.sh OLD_METRON NEW_METRON [WORKDIR]
#
# The cases cover every pipeline schedule family (metron schedule, with and without p2p and
# data-parallel sync, as text and as the lowered graph's JSON), every data-parallel sync policy
# (metron simulate --json --trace, steady state and warm-up) and the planner (metron plan
# --json --csv, on one thread: the run statistics count differently with more threads). Each
# case's stdout, stderr, exit code and files are compared, with the planner's wall time masked;
# the script prints one line per case and exits 1 when any differs. WORKDIR (default: a fresh temporary folder) keeps both outputs.
set -euo pipefail

if (($# < 2)); then
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
OLD="$(realpath "$1")"
NEW="$(realpath "$2")"
WORK="${3:-$(mktemp -d)}"
mkdir -p "$WORK"

# One case per line: a name, then the metron arguments. {out} stands for the case's output
# folder, which differs between the two runs and is compared file by file.
CASES=(
  # Every schedule family, as per-rank orders and as lowered graphs.
  "schedule-none|schedule --schedule none --pp 1 -m 4"
  "schedule-gpipe|schedule --schedule gpipe --pp 4 -m 8 --with-comms"
  "schedule-1f1b|schedule --schedule 1f1b --pp 4 -m 8 --with-comms --p2p batched --format json"
  "schedule-interleaved|schedule --schedule interleaved-1f1b --pp 4 --vp 2 -m 8 --format grid"
  "schedule-interleaved-json|schedule --schedule interleaved-1f1b --pp 4 --vp 3 -m 12 --group-size 6 --with-comms --p2p batched --format json"
  "schedule-interleaved-legacy|schedule --schedule interleaved-1f1b-legacy --pp 2 --vp 2 -m 4 --with-comms --format csv"
  "schedule-looped-bfs|schedule --schedule looped-bfs --pp 2 --vp 2 -m 4 --with-comms --p2p async"
  "schedule-zb-h1|schedule --schedule zb-h1 --pp 4 -m 8 --with-comms --format json"
  "schedule-zb-h2|schedule --schedule zb-h2 --pp 4 -m 8 --format grid"
  "schedule-zb-v|schedule --schedule zb-v --pp 4 -m 8 --with-comms --format json"
  "schedule-zb-auto|schedule --schedule zb-auto --pp 4 -m 8 --memory-limit 6"
  "schedule-dualpipe|schedule --schedule dualpipe --pp 4 -m 8 --with-comms --format json"
  "schedule-dualpipe-v|schedule --schedule dualpipe-v --pp 4 -m 8 --with-comms"
  "schedule-forward-only|schedule --schedule 1f1b --pp 4 -m 8 --forward-only --with-comms"
  "schedule-layers|schedule --schedule 1f1b --pp 4 -m 4 --layers-per-stage 3,5,5,3 --with-comms --format json"
  "schedule-encdec|schedule --schedule 1f1b --pp 4 -m 4 --encoder-decoder-split 2 --with-comms --format json"
  "schedule-sync-distopt|schedule --schedule 1f1b --pp 2 -m 4 --with-comms --sync megatron-distopt --overlap-grad-reduce --overlap-param-gather --model llama2-7b --dp 8 --format json"
  "schedule-sync-zero3|schedule --schedule zb-v --pp 2 -m 4 --with-comms --sync zero3 --model gpt3-1.3b --dp 4 --format json"
  # Every sync policy through the simulator, over several schedule families.
  "simulate-default|simulate --json {out}/result.json --trace {out}/trace.json"
  "simulate-ddp|simulate --model gpt3-1.3b --hardware dgx-a100 --tp 2 --pp 2 --dp 4 --global-batch 64 -b 2 --schedule 1f1b --sync ddp --json {out}/result.json --trace {out}/trace.json"
  "simulate-megatron-ddp|simulate --model gpt3-2.7b --hardware dgx-h100 --tp 2 --pp 4 --dp 2 --vp 2 --global-batch 64 -b 1 --schedule interleaved-1f1b --sync megatron-ddp --overlap-grad-reduce --json {out}/result.json --trace {out}/trace.json"
  "simulate-distopt|simulate --model llama2-7b --hardware dgx-h100 --tp 4 --pp 2 --dp 4 --vp 2 --global-batch 128 -b 1 --schedule interleaved-1f1b --sync megatron-distopt --overlap-grad-reduce --overlap-param-gather --sp --json {out}/result.json --trace {out}/trace.json"
  "simulate-distopt-warmup|simulate --model llama2-7b --hardware dgx-h100 --tp 4 --pp 2 --dp 4 --global-batch 64 -b 1 --schedule 1f1b --sync megatron-distopt --dist-opt-instances 2 --warmup --json {out}/result.json --trace {out}/trace.json"
  "simulate-fairscale|simulate --model gpt3-760m --hardware dgx-a100 --tp 1 --pp 2 --dp 4 --global-batch 32 -b 2 --schedule gpipe --sync fairscale-sdp --broadcast-fp16 --json {out}/result.json --trace {out}/trace.json"
  "simulate-zero1|simulate --model gpt3-1.3b --hardware dgx-a100 --tp 1 --pp 1 --dp 8 --global-batch 64 -b 4 --schedule none --sync zero1 --json {out}/result.json --trace {out}/trace.json"
  "simulate-zero2|simulate --model gpt3-1.3b --hardware dgx-h100 --tp 1 --pp 2 --dp 4 --global-batch 64 -b 2 --schedule zb-h1 --sync zero2 --json {out}/result.json --trace {out}/trace.json"
  "simulate-zero3|simulate --model gpt3-2.7b --hardware dgx-h100 --tp 1 --pp 2 --dp 4 --global-batch 64 -b 2 --schedule zb-v --sync zero3 --json {out}/result.json --trace {out}/trace.json"
  "simulate-fsdp1|simulate --model llama2-7b --hardware dgx-h100 --tp 1 --pp 1 --dp 16 --global-batch 64 -b 2 --schedule none --sync fsdp1 --fsdp-sharding hybrid-shard --hsdp-shard-size 8 --json {out}/result.json --trace {out}/trace.json"
  "simulate-fsdp2|simulate --model llama2-7b --hardware dgx-h100 --tp 2 --pp 2 --dp 4 --global-batch 64 -b 1 --schedule 1f1b --sync fsdp2 --no-reshard-after-forward --json {out}/result.json --trace {out}/trace.json"
  "simulate-dualpipe|simulate --model gpt3-2.7b --hardware dgx-h100 --tp 2 --pp 4 --dp 2 --global-batch 64 -b 1 --schedule dualpipe --sync megatron-distopt --json {out}/result.json --trace {out}/trace.json"
  "simulate-zb-auto-full|simulate --model gpt3-1.3b --hardware dgx-a100 --tp 1 --pp 4 --dp 2 --global-batch 32 -b 1 --schedule zb-auto --memory-limit 6 --sync ddp --full --json {out}/result.json --trace {out}/trace.json"
  "simulate-looped-bfs-cp|simulate --model llama3-8b --hardware dgx-h100 --tp 2 --cp 2 --pp 2 --dp 2 --vp 2 --global-batch 32 -b 1 --schedule looped-bfs --recompute selective --json {out}/result.json --trace {out}/trace.json"
  # The planner, on its default request and on a small one over every schedule and policy.
  "plan-default|plan --threads 1 --json {out}/plan.json --csv {out}/plan.csv"
  "plan-all|plan --threads 1 --model gpt3-1.3b --hardware dgx-a100 --gpus 16 --global-batch 64 --schedules all --sync all --top 20 --json {out}/plan.json --csv {out}/plan.csv"
)

# run_case BINARY SIDE NAME ARGS: runs one case into $WORK/SIDE/NAME.
run_case() {
  local bin="$1" side="$2" name="$3" args="$4" out rc
  out="$WORK/$side/$name"
  rm -rf "$out"
  mkdir -p "$out"
  args="${args//\{out\}/$out}"
  # shellcheck disable=SC2086  # the case's arguments are words
  (cd "$out" && "$bin" $args >stdout 2>stderr) && rc=0 || rc=$?
  echo "$rc" >"$out/exit-code"
  # Paths inside messages name the side's folder; make them comparable. The planner reports
  # its own wall time ("in 0.55 s", "seconds"): the one value masked.
  sed -i -e "s#$out#{out}#g" -e 's/ in [0-9.]* s on / in T s on /' "$out/stdout" "$out/stderr"
  if [[ -f "$out/plan.json" ]]; then
    sed -i 's/"seconds":[0-9.e+-]*/"seconds":T/' "$out/plan.json"
  fi
}

failed=0
for entry in "${CASES[@]}"; do
  name="${entry%%|*}"
  args="${entry#*|}"
  run_case "$OLD" old "$name" "$args"
  run_case "$NEW" new "$name" "$args"
  files=$(cd "$WORK/old/$name" && find . -type f | sort | tr '\n' ' ')
  if diff -r "$WORK/old/$name" "$WORK/new/$name" >/dev/null; then
    printf 'same       %-28s exit %s, %s\n' "$name" "$(cat "$WORK/old/$name/exit-code")" "$files"
  else
    printf 'DIFFERENT  %-28s (diff -r %s %s)\n' "$name" "$WORK/old/$name" "$WORK/new/$name"
    failed=$((failed + 1))
  fi
done
echo "${#CASES[@]} cases, $failed different; outputs in $WORK"
((failed == 0))
