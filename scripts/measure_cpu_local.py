#!/usr/bin/python3
"""Measures this machine for metron's `cpu-local` hardware preset.

The CPU backend of metron's executor computes with libtorch on CPU tensors and communicates with
Gloo, one process per rank. This script measures exactly those with Debian's own PyTorch (the same
libtorch and Gloo builds), so that the preset describes what the executor will see:

  peak_flops        best throughput of square torch.mm at n = 1024 and 2048, per dtype that
                    libtorch implements on CPU (fp32, bf16; fp16 matmul is not implemented)
  hbm_bandwidth     best Tensor.copy_ of 256 MiB: bytes read + written per second
  hbm_capacity      physical memory (sysconf)
  intra_node        alpha-beta of a Gloo all-reduce between 2 local processes: with n = 2 a ring
                    all-reduce costs 2(n-1)a + 2(n-1)/n S/b = 2a + S/b, so a = half the 4-byte
                    time and b = S / (t(S) - 2a) at S = 64 MiB
  inter_node        the same numbers: a local run has no second node
  compute_slowdown  how much longer torch.mm takes while the other process and a thread of this
                    one run 64 MiB all-reduces back to back: median t_with / median t_alone - 1

These are microbenchmarks of the primitives, not of a training run. Run with Debian's interpreter
(it sees python3-torch; the pyenv python3 first on PATH does not):

  sudo apt-get -o DPkg::Lock::Timeout=600 install -y python3-torch
  /usr/bin/python3 scripts/measure_cpu_local.py > models/profiles/cpu-local.json

and rebuild: the preset is compiled in from that file (models/CMakeLists.txt).
"""

import datetime
import json
import os
import platform
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

REPEATS = 5
PORT = 29517


def best_seconds(fn, repeats=REPEATS):
    fn()  # warm-up: first calls allocate and pick kernels
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def median_seconds(fn, repeats):
    """The median, for the slow-down: interference is intermittent, so a best-of would hide it."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def matmul_flops(dtype):
    best = 0.0
    for n in (1024, 2048):
        a = torch.randn(n, n).to(dtype)
        b = torch.randn(n, n).to(dtype)
        seconds = best_seconds(lambda: torch.mm(a, b))
        best = max(best, 2.0 * n**3 / seconds)
    return best


def copy_bandwidth():
    elements = 64 * 2**20  # 256 MiB of fp32
    src = torch.ones(elements)
    dst = torch.empty(elements)
    seconds = best_seconds(lambda: dst.copy_(src))
    return 2.0 * 4 * elements / seconds


def allreduce_seconds(nbytes, repeats):
    tensor = torch.ones(max(1, nbytes // 4))
    return best_seconds(lambda: dist.all_reduce(tensor), repeats)


def worker(rank, results):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{PORT}", rank=rank,
                            world_size=2)
    small = allreduce_seconds(4, 50)
    large_bytes = 64 * 2**20
    large = allreduce_seconds(large_bytes, REPEATS)

    # Compute slow-down: rank 0 times matmuls alone, then with a thread keeping 64 MiB
    # all-reduces running (rank 1 mirrors them in its main thread).
    n = 1024
    a, b = torch.randn(n, n), torch.randn(n, n)
    busy = torch.ones(large_bytes // 4)
    rounds = 20
    dist.barrier()
    if rank == 0:
        alone = median_seconds(lambda: torch.mm(a, b), rounds)
        stop = threading.Event()
        count = torch.zeros(1)

        def communicate():
            while True:
                count[0] = 1.0 if not stop.is_set() else 0.0
                dist.broadcast(count, src=0)  # tells rank 1 whether another round follows
                if count[0] == 0.0:
                    return
                dist.all_reduce(busy)

        thread = threading.Thread(target=communicate)
        thread.start()
        time.sleep(0.05)
        with_comm = median_seconds(lambda: torch.mm(a, b), rounds)
        stop.set()
        thread.join()
        results["small"] = small
        results["large"] = large
        results["large_bytes"] = large_bytes
        results["slowdown"] = max(0.0, with_comm / alone - 1.0)
    else:
        count = torch.zeros(1)
        while True:
            dist.broadcast(count, src=0)
            if count[0] == 0.0:
                break
            dist.all_reduce(busy)
    dist.destroy_process_group()


def gloo_numbers():
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(worker, args=(results,), nprocs=2, join=True)
        return dict(results)


def main():
    peaks = {"fp32": matmul_flops(torch.float32), "bf16": matmul_flops(torch.bfloat16)}
    bandwidth = copy_bandwidth()
    gloo = gloo_numbers()
    latency = gloo["small"] / 2.0
    link_bandwidth = gloo["large_bytes"] / max(gloo["large"] - 2.0 * latency, 1e-9)
    capacity = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    cores = os.cpu_count() or 1
    link = {"bandwidth": float(f"{link_bandwidth:.4g}"), "latency": float(f"{latency:.4g}")}
    hardware = {
        "name": "cpu-local",
        "gpu": {
            "name": f"{platform.machine()} CPU ({cores} cores, libtorch {torch.__version__})",
            "peak_flops": {k: float(f"{v:.4g}") for k, v in peaks.items()},
            "hbm_bandwidth": float(f"{bandwidth:.4g}"),
            "hbm_capacity": capacity,
            # The peaks above are what torch.mm reached, and the bandwidth what copy_ reached:
            # no further efficiency factor and no GPU tile/wave quantization (sm_count 0).
            "sm_count": 0,
            "gemm_efficiency": 1.0,
            "memory_efficiency": 1.0,
        },
        "gpus_per_node": cores,
        "intra_node": link,
        "inter_node": dict(link, topology="loopback"),
        "hardware_queues": 8,
        "compute_slowdown_during_comm": float(f"{gloo['slowdown']:.3g}"),
    }
    document = {
        "hardware": hardware,
        "measurement": {
            "command": "/usr/bin/python3 scripts/measure_cpu_local.py",
            "date": datetime.date.today().isoformat(),
            "machine": f"{platform.node()} {platform.processor() or platform.machine()}, "
                       f"{cores} cores",
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "gloo_allreduce_4B_s": gloo["small"],
            "gloo_allreduce_64MiB_s": gloo["large"],
        },
    }
    json.dump(document, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
