#!/usr/bin/env bash
# The GPU validation run of issue 19, for a node with an NVIDIA GPU: builds the gpu-node preset
# (the CUDA parts need nvcc, the toolkit and NCCL; no libtorch), runs the GPU tests (and, with
# two GPUs or more, the multi-GPU ones), measures the GPU
# (bench/cuda_profile: the GEMM efficiency curve and achievable HBM bandwidth, next to the
# datasheet figures metron's preset uses) and runs the validation matrix (bench/gpu_validate:
# steps that fit one GPU, predicted with the analytical preset, predicted with costs measured on
# this GPU, and measured on the CUDA backend, side by side), and finally runs one step through
# `metron run --backend cuda --compare` as a user would, on every GPU of the node (one pipeline
# stage each).
#
#   scripts/validate_gpu.sh [OUT_DIR]        default OUT_DIR: gpu-validation/
#
# Writes OUT_DIR/gpu_tests.log, OUT_DIR/profile.json, OUT_DIR/validate.json and OUT_DIR/run.json
# (and prints the tables). One GPU is enough.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-gpu-validation}"
die() { printf 'validate_gpu.sh: error: %s\n' "$*" >&2; exit 2; }

command -v nvidia-smi >/dev/null || die "nvidia-smi not found: expected a machine with an NVIDIA GPU"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader ||
  die "nvidia-smi sees no GPU"
cd "$ROOT"
B=build/gpu-node
cmake --preset gpu-node >/dev/null ||
  die "configure failed (is CUDA with NCCL installed? configure prints 'metron: CUDA backend ...')"
cmake --build --preset gpu-node --target metron metron_executor gpu_tests gpu_multi_tests \
  cuda_profile gpu_validate || die "build failed"
[[ -x $B/bench/gpu_validate ]] ||
  die "the CUDA parts were not built: configure found no CUDA toolkit with NCCL"
GPUS=$(nvidia-smi -L | grep -c '^GPU')
mkdir -p "$OUT"
echo "==> GPU tests"
$B/tests/gpu/gpu_tests 2>&1 | tee "$OUT/gpu_tests.log" | grep -E '^\[  (PASSED|FAILED|SKIPPED)'
if ((GPUS >= 2)); then
  echo "==> multi-GPU tests ($GPUS GPUs)"
  $B/tests/gpu/gpu_multi_tests 2>&1 | tee "$OUT/gpu_multi_tests.log" |
    grep -E '^\[  (PASSED|FAILED|SKIPPED)'
fi
echo "==> GPU profile (GEMM curve, HBM bandwidth)"
$B/bench/cuda_profile -o "$OUT/profile.json"
echo "==> predicted (preset), predicted (measured profile) and measured"
$B/bench/gpu_validate -o "$OUT/validate.json"
# GPT-3 1.3B's 24 layers split evenly: as many pipeline stages as GPUs, or the most that divide.
PP=$GPUS
while ((24 % PP)); do PP=$((PP - 1)); done
echo "==> metron run --backend cuda --compare: GPT-3 1.3B, a pipeline stage on each of $PP GPUs"
$B/cli/metron run --backend cuda --model gpt3-1.3b --hardware dgx-h100 --tp 1 --pp "$PP" \
  --dp 1 -b 1 -m $((4 * PP)) --seq 2048 --compare --json "$OUT/run.json"
