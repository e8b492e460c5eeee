#!/usr/bin/env bash
# Sets up a Debian 12 machine for metron, then builds and either runs the main job or tests.
#
#   scripts/setup.sh run    install missing packages, build the release preset, run MAIN_JOB
#   scripts/setup.sh test   install missing packages, then: format check, the asan build (ASan +
#                           UBSan, CUDA host code included) and every test under it (the fuzz
#                           targets' corpora and kept findings among them), clang-tidy
#
# One build, not three: on CI's 2 cores the release build and its tests, the clang fuzz build and
# 10 s per fuzz target took about an hour of the 90 minutes. The asan build runs the same tests
# with sanitizers and compiles the CUDA code; fuzzing proper runs for hours (bench/fuzz.sh), and
# developers build the release preset (scripts/setup.sh run does) with warnings as errors.
#
# Works from any current directory. Exits non-zero on the first failing phase.
set -euo pipefail

# ---------------------------------------------------------------------------------------------
# MAIN_JOB: what `scripts/setup.sh run` runs after building: the planner on its built-in default
# request (GPT-3 175B on up to 1,024 H100s), printing the ten fastest configurations that fit.
# Paths are relative to the repository root.
MAIN_JOB=(build/release/cli/metron plan)
# ---------------------------------------------------------------------------------------------

# Debian packages metron builds with. CUDA is not among them: it is used when present. The
# executor's CPU backend needs libtorch and Gloo, and an optimised BLAS under libtorch (the
# reference BLAS it would load otherwise is ~65x slower); torchrun (python3-torch) and mpirun
# (openmpi-bin) launch ranks in its tests. The notebooks run on Debian's Jupyter (nbclient,
# ipykernel) with matplotlib and pandas.
PACKAGES=(cmake ninja-build g++ make pkg-config nlohmann-json3-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev clang-format clang-tidy zlib1g-dev git python3
  clang-14 libclang-rt-14-dev llvm-14 libprotobuf-dev protobuf-compiler python3-protobuf
  libtorch-dev libgloo-dev libopenblas0-pthread python3-torch openmpi-bin python3-nbclient
  python3-ipykernel python3-matplotlib python3-pandas)

# The files that include libtorch or Gloo headers, which clang cannot parse in C++20 (g++ can):
# they stay few (docs/STYLE.md) and out of the clang-tidy run.
TORCH_FILES=(exec/torch_compute/src/torch_compute.cc exec/gloo/src/gloo_world.cc
  exec/gloo/src/gloo_group.cc exec/model_payload/src/gpt_stage.cc)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

log() { printf '==> %s\n' "$*"; }
die() { printf 'setup.sh: error: %s\n' "$*" >&2; exit 1; }

# phase NAME COMMAND...: runs one phase and prints how long it took.
phase() {
  local name="$1"
  shift
  local start=$SECONDS
  log "$name"
  "$@"
  printf '==> %s: done in %ds\n' "$name" "$((SECONDS - start))"
}

install_packages() {
  local missing=() pkg
  for pkg in "${PACKAGES[@]}"; do
    if [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)" != "install ok installed" ]]; then
      missing+=("$pkg")
    fi
  done
  if ((${#missing[@]} == 0)); then
    log "all ${#PACKAGES[@]} Debian packages are installed"
    return
  fi
  local sudo=()
  if [[ "$(id -u)" != 0 ]]; then
    command -v sudo >/dev/null || die "missing packages (${missing[*]}) and not root, and no sudo"
    sudo=(sudo)
  fi
  log "installing: ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${missing[@]}"
}

tool() {  # tool NAME: prefers the version-14 binary that docs/STYLE.md's rules were written against
  if command -v "$1-14" >/dev/null; then echo "$1-14"; else echo "$1"; fi
}

# Source files of the project: tracked ones plus new, not-ignored ones (build folders are ignored).
project_files() {
  git ls-files -z --cached --others --exclude-standard -- "$@"
}

format_check() {
  local clang_format offenders=() file
  clang_format="$(tool clang-format)"
  while IFS= read -r -d '' file; do
    [[ -f "$file" ]] || continue
    if ! "$clang_format" --dry-run --Werror "$file" >/dev/null 2>&1; then
      offenders+=("$file")
    fi
  done < <(project_files '*.h' '*.cc' '*.cu')
  if ((${#offenders[@]} > 0)); then
    printf 'not clang-formatted (fix with: %s -i FILE):\n' "$clang_format" >&2
    printf '  %s\n' "${offenders[@]}" >&2
    return 1
  fi
}

build_preset() {  # build_preset PRESET [TARGET]
  cmake --preset "$1"
  if (($# > 1)); then
    cmake --build --preset "$1" --target "$2"
  else
    cmake --build --preset "$1"
  fi
}

test_preset() {
  ctest --preset "$1" --output-on-failure -j2
}

# clang-tidy over the project's .cc files that the asan build compiles (its compile_commands.json,
# CUDA host code included): one process per file, two at a time, each file's findings in one piece.
# Shipped code gets every check of .clang-tidy; tests/ only the naming rules, since the bugprone
# checks double a file's time and a test's bugs show when it runs (it is half the files).
TIDY_DB=build/asan
tidy_check() {
  local db="$TIDY_DB/compile_commands.json" clang_tidy files=()
  [[ -f "$db" ]] || die "$db is missing: build the asan preset first"
  clang_tidy="$(tool clang-tidy)"
  mapfile -t files < <(grep -o '"file": *"[^"]*\.cc"' "$db" | sed 's/^"file": *"//; s/"$//' |
    grep -F "$ROOT/" | grep -v -F "$ROOT/build/" |
    grep -v -F -x "${TORCH_FILES[@]/#/-e$ROOT/}" | sort -u)
  ((${#files[@]} > 0)) || die "no project .cc files in $db"
  log "clang-tidy: ${#files[@]} files"
  # shellcheck disable=SC2016  # $0 to $3 belong to the inner bash: tool, root, build, file
  if ! printf '%s\0' "${files[@]}" | xargs -0 -P 2 -n 1 bash -c '
      checks=()
      if [[ "$3" == "$1"/tests/* ]]; then checks=(--checks=-*,readability-identifier-naming); fi
      if ! out="$("$0" -p "$2" --quiet --extra-arg=-Wno-unknown-warning-option "${checks[@]}" \
          "$3" 2>&1)"
      then
        printf "%s\n" "$out" >&2
        exit 1
      fi' "$clang_tidy" "$ROOT" "$TIDY_DB"; then
    echo "clang-tidy found problems (see above)" >&2
    return 1
  fi
}

cmd_run() {
  phase "install packages" install_packages
  phase "build (release)" build_preset release metron
  log "main job: ${MAIN_JOB[*]}"
  "${MAIN_JOB[@]}"
}

cmd_test() {
  local start=$SECONDS
  phase "install packages" install_packages
  phase "format check" format_check
  phase "build (asan)" build_preset asan
  phase "tests (asan)" test_preset asan
  phase "clang-tidy" tidy_check
  log "all phases passed in $((SECONDS - start))s"
}

case "${1:-}" in
  run) cmd_run ;;
  test) cmd_test ;;
  *)
    echo "usage: scripts/setup.sh run|test" >&2
    exit 2
    ;;
esac
