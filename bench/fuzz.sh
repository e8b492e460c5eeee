#!/usr/bin/env bash
# Builds metron's libFuzzer targets (the "fuzz" preset: clang 14, ASan + UBSan) and runs each on a
# copy of its seed corpus (fuzz/corpus/<target>/) for a fixed time, then prints per target the
# executions, executions per second and findings. Exits non-zero when any target finds a crash,
# leak, timeout or out-of-memory input, or cannot be built or run. Needs no network.
#
#   bench/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     default: 60 s, every target
#   bench/fuzz.sh 10                                   a quick look
#   bench/fuzz.sh 300 rows_text graph_json             two targets, 5 minutes each
#
# Environment:
#   METRON_FUZZ_BUILD_DIR  build folder (default build/fuzz, the preset's)
#   METRON_FUZZ_JOBS       parallel compile jobs (default: the number of cores)
#   METRON_FUZZ_MAX_LEN    largest input libFuzzer makes, bytes (default 65536)
#   METRON_FUZZ_RUNS       stop a target after this many executions if it gets there before
#                          SECONDS_PER_TARGET (default: no limit); e.g. 10000000 for the goal of
#                          10 million executions per target without a crash (one process only:
#                          libFuzzer's fork mode stops by time)
#   METRON_FUZZ_FORKS      fuzz each target with this many processes at once (libFuzzer's
#                          -fork=N, sharing one corpus; default 1): every core on one target
#
# Each run works in <build>/fuzz-run/<target>/ (corpus/ grows there, never in the repository);
# crashing inputs land in <build>/fuzz-run/<target>/artifacts/. fuzz/README.md says how to
# reproduce and minimise one, and where to keep it (fuzz/findings/<target>/).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

ALL_TARGETS=(rows_text rows_csv graph_json scenario_json model_json hardware_json
  cost_profile_json stage_costs_json trace_json result_json chakra_et cases_json
  configuration_text)

die() { printf 'fuzz.sh: error: %s\n' "$*" >&2; exit 2; }

seconds="${1:-60}"
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -gt 0 ]] || die "SECONDS_PER_TARGET must be a positive integer, got \"$seconds\""
shift $(($# > 0 ? 1 : 0))
targets=("$@")
((${#targets[@]} > 0)) || targets=("${ALL_TARGETS[@]}")
for t in "${targets[@]}"; do
  [[ " ${ALL_TARGETS[*]} " == *" $t "* ]] || die "unknown target \"$t\"; targets: ${ALL_TARGETS[*]}"
done

build_dir="${METRON_FUZZ_BUILD_DIR:-$ROOT/build/fuzz}"
jobs="${METRON_FUZZ_JOBS:-$(nproc)}"
max_len="${METRON_FUZZ_MAX_LEN:-65536}"
runs="${METRON_FUZZ_RUNS:--1}"
[[ "$runs" =~ ^-?[0-9]+$ ]] || die "METRON_FUZZ_RUNS must be an integer, got \"$runs\""
forks="${METRON_FUZZ_FORKS:-1}"
[[ "$forks" =~ ^[0-9]+$ && "$forks" -gt 0 ]] ||
  die "METRON_FUZZ_FORKS must be a positive integer, got \"$forks\""
command -v clang++-14 >/dev/null || die "clang++-14 not found (Debian: clang-14 libclang-rt-14-dev)"

start=$SECONDS
mkdir -p "$build_dir"
cmake --preset fuzz -B "$build_dir" >"$build_dir/configure.log" 2>&1 ||
  { cat "$build_dir/configure.log" >&2; die "configure failed"; }
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]/#/fuzz_}" ||
  die "build failed"
printf '==> build: %ds (%s jobs)\n' "$((SECONDS - start))" "$jobs"

dict_of() {
  case "$1" in
    rows_*) echo "$ROOT/fuzz/dict/rows.dict" ;;
    chakra_*) echo "$ROOT/fuzz/dict/chakra.dict" ;;
    configuration_*) echo "$ROOT/fuzz/dict/configuration.dict" ;;
    *) echo "$ROOT/fuzz/dict/json.dict" ;;
  esac
}

# stat NAME LOG: the last value libFuzzer printed for stat::NAME (its -print_final_stats=1 lines);
# in fork mode, which prints none, the executions and exec/s of its last "#N: ..." line.
stat() {
  if ((forks > 1)); then
    case "$1" in
      number_of_executed_units) sed -n 's/^#\([0-9]*\): .*/\1/p' "$2" | tail -n 1 ;;
      average_exec_per_sec) sed -n 's/^#[0-9]*: .* exec\/s \([0-9]*\).*/\1/p' "$2" | tail -n 1 ;;
    esac
    return
  fi
  sed -n "s/^stat::$1: *\([0-9]*\).*/\1/p" "$2" | tail -n 1
}
fork_flags=()
((forks > 1)) && fork_flags=(-fork="$forks")

failed=0
rows=()
for t in "${targets[@]}"; do
  work="$build_dir/fuzz-run/$t"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  if [[ -d "fuzz/corpus/$t" ]]; then cp -- fuzz/corpus/"$t"/* "$work/corpus/" 2>/dev/null || true; fi
  log="$work/fuzz.log"
  # The inputs kept in fuzz/findings/<target>/ crashed once: replay them first, as regressions.
  if compgen -G "fuzz/findings/$t/*" >/dev/null; then
    if ! "$build_dir/fuzz/fuzz_$t" fuzz/findings/"$t"/* >"$work/findings.log" 2>&1; then
      failed=1
      printf '%s: an input kept in fuzz/findings/%s/ fails again; see %s\n' "$t" "$t" \
        "$work/findings.log" >&2
    fi
  fi
  printf '==> %s: %ss\n' "$t" "$seconds"
  rc=0
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
    "$build_dir/fuzz/fuzz_$t" "${fork_flags[@]}" -max_total_time="$seconds" -runs="$runs" \
    -max_len="$max_len" -rss_limit_mb=2048 -timeout=20 -dict="$(dict_of "$t")" -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$work/corpus" >"$log" 2>&1 || rc=$?
  execs="$(stat number_of_executed_units "$log")"
  per_sec="$(stat average_exec_per_sec "$log")"
  findings=("$work"/artifacts/*)
  [[ -e "${findings[0]}" ]] || findings=()
  if ((rc != 0 || ${#findings[@]} > 0)); then
    failed=1
    printf '%s: libFuzzer exited %d; the end of %s:\n' "$t" "$rc" "$log" >&2
    grep -E 'ERROR|SUMMARY|metron fuzz:|terminate called|what\(\)|runtime error' "$log" |
      head -n 10 >&2 || tail -n 5 "$log" >&2
    for f in "${findings[@]}"; do printf '  reproducer: %s\n' "$f" >&2; done
  fi
  rows+=("$(printf '%-18s %12s %10s %9s' "$t" "${execs:-?}" "${per_sec:-?}" "${#findings[@]}")")
done

printf '\n%-18s %12s %10s %9s\n' target executions exec/s findings
printf '%s\n' "${rows[@]}"
printf '==> total: %ds\n' "$((SECONDS - start))"
exit "$failed"
