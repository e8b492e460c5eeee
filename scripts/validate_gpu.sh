#!/usr/bin/env bash
# The GPU validation run of issue 19, for a node with an NVIDIA GPU: builds the release preset
# (the CUDA parts need nvcc, the toolkit and NCCL), runs the GPU tests, measures the GPU
# (bench/cuda_profile: the GEMM efficiency curve and achievable HBM bandwidth, next to the
# datasheet figures metron's preset uses) and runs the validation matrix (bench/gpu_validate:
# steps that fit one GPU, predicted with the analytical preset, predicted with costs measured on
# this GPU, and measured on the CUDA backend, side by side).
#
#   scripts/validate_gpu.sh [OUT_DIR]        default OUT_DIR: gpu-validation/
#
# Writes OUT_DIR/gpu_tests.log, OUT_DIR/profile.json and OUT_DIR/validate.json (and prints the
# table). One GPU is enough; runs of several GPUs go through `metron run --backend cuda`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-gpu-validation}"
die() { printf 'validate_gpu.sh: error: %s\n' "$*" >&2; exit 2; }

command -v nvidia-smi >/dev/null || die "nvidia-smi not found: expected a machine with an NVIDIA GPU"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader ||
  die "nvidia-smi sees no GPU"
cd "$ROOT"
cmake --preset release >/dev/null
cmake --build --preset release --target gpu_tests cuda_profile gpu_validate ||
  die "build failed (is CUDA with NCCL installed? configure prints 'metron: CUDA backend ...')"
[[ -x build/release/bench/gpu_validate ]] ||
  die "the CUDA parts were not built: configure found no CUDA toolkit with NCCL"
mkdir -p "$OUT"
echo "==> GPU tests"
build/release/tests/gpu/gpu_tests 2>&1 | tee "$OUT/gpu_tests.log" | grep -E '^\[  (PASSED|FAILED|SKIPPED)'
echo "==> GPU profile (GEMM curve, HBM bandwidth)"
build/release/bench/cuda_profile -o "$OUT/profile.json"
echo "==> predicted (preset), predicted (measured profile) and measured"
build/release/bench/gpu_validate -o "$OUT/validate.json"
