#pragma once
// The commands that execute (Note [two programs] in cli_main.h): their descriptions, shared by
// metron-exec, which runs them, and metron, which lists them in its help and hands them over.

#include <string_view>

namespace metron::cli {

inline constexpr std::string_view kRunDescription =
    "Execute one training step for real: build the task graph of a scenario (the same flags\n"
    "as 'metron simulate') with the operations each compute task runs, or read a graph file\n"
    "('metron schedule --format json' writes one), and run it on the CPU backend: one process\n"
    "per rank, a thread per stream, libtorch CPU tensors for the GEMMs and element-wise ops the\n"
    "cost model prices, Gloo for collectives and transfers. With --backend cuda each rank runs\n"
    "on a GPU of its own instead (rank r on GPU r, or on the launcher's local rank): a CUDA\n"
    "stream per stream, cuBLASLt and a streaming kernel for the operations, NCCL for\n"
    "collectives and transfers, stream-ordered allocations for the buffers; name the GPU's\n"
    "preset with --hardware (dgx-h100, ...) so that --compare predicts that GPU. Reports the\n"
    "median of the measured iterations with the same figures and JSON keys as 'metron\n"
    "simulate', and writes the same traces. Under torchrun, srun or mpirun each process runs\n"
    "one rank (rank 0 hosts metron's store on MASTER_PORT+1 and writes the outputs). Without a\n"
    "scenario it runs GPT-3 125M's layers at sequence 128 on 2 ranks (1F1B, 4 microbatches) on\n"
    "the cpu-local preset.";

inline constexpr std::string_view kProfileDescription =
    "Measure what a step is made of on the executor's backend and write a cost profile:\n"
    "every distinct compute operation of the step 'metron run' would execute (each GEMM\n"
    "shape, batched GEMM and element-wise op, as 'metron cost --ops' lists them), timed with\n"
    "the CPU backend's own libtorch payload; every distinct collective (op, group placement,\n"
    "bytes per call) and transfer size, timed with Gloo in one process per rank (each after a\n"
    "barrier; a collective takes its slowest member); and the slow-down of compute while\n"
    "communication runs. Each is the median of --repetitions after --warmup. 'metron simulate\n"
    "--profile FILE' (and run, cost) then price what it lists with the measured times and\n"
    "everything else as before. Takes the scenario flags of 'metron run', from the same\n"
    "default.\n"
    "With --sweep it measures this machine instead (square fp32 GEMMs up to 2048, fp32 adds,\n"
    "all-reduces of 4 B to 64 MiB between 2 processes, the compute slow-down) and writes\n"
    "{\"hardware\": spec, \"measurement\": {...}}: every dtype gets fp32's peak, since the CPU\n"
    "backend runs every dtype in fp32. '--hardware FILE' reads that document as it is;\n"
    "'metron profile --sweep -o models/profiles/cpu-local.json' regenerates the cpu-local\n"
    "preset (compiled in when CMake next configures).";

}  // namespace metron::cli
