#!/usr/bin/python3
"""Local check (not run in CI): Holistic Trace Analysis on metron's per-rank traces.

Runs HTA's TraceAnalysis unchanged on a directory of per-rank Kineto-shaped files (Note [kineto
trace layout] in timelines/include/metron/timelines/kineto_trace.h; docs/TRACES.md §2.8) and
prints its temporal breakdown, idle-time breakdown, comm/compute overlap, kernel breakdown, queue
length summary and, per rank, the critical path of ProfilerStep#0. When the directory also holds
metron_figures.txt (written by timelines_tests' WritesTracesForTheLocalHtaCheck), compares HTA's
figures with metron's own and exits 1 on a mismatch.

Usage (Debian's interpreter; HTA needs pandas, numpy, plotly, networkx, psutil, yaml):
    METRON_HTA_TRACE_DIR=/tmp/traces build/<dir>/tests/timelines/timelines_tests \\
        --gtest_filter='*LocalHta*'
    /usr/bin/python3 scripts/hta_check.py /tmp/traces /path/to/HolisticTraceAnalysis
"""

import json
import os
import sys


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    trace_dir, hta_root = args
    # HTA rounds ns-resolution traces to whole µs (ts up, end down: every kernel loses up to
    # 2 µs), which moves its figures off metron's by about a µs per kernel; --hta-rounding keeps
    # HTA's default, otherwise it is turned off so that the figures can agree exactly.
    rounding = "--hta-rounding" in sys.argv
    if not rounding:
        os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    sys.path.insert(0, hta_root)
    from hta.trace_analysis import TraceAnalysis  # noqa: E402 (the checkout is given at run time)

    import pandas as pd  # noqa: E402

    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 20)
    analysis = TraceAnalysis(trace_dir=trace_dir)
    ranks = sorted(analysis.t.traces.keys())
    print("ranks:", ranks)

    temporal = analysis.get_temporal_breakdown(visualize=False)
    print("\n== temporal breakdown\n", temporal)
    idle = analysis.get_idle_time_breakdown(visualize=False)
    print("\n== idle time breakdown\n", idle[0] if isinstance(idle, tuple) else idle)
    overlap = analysis.get_comm_comp_overlap(visualize=False)
    print("\n== comm/comp overlap\n", overlap)
    kernels = analysis.get_gpu_kernel_breakdown(visualize=False)
    print("\n== kernel type breakdown\n", kernels[0])
    queue = analysis.get_queue_length_summary(ranks=ranks)
    print("\n== queue length summary\n", queue)
    for rank in ranks:
        graph, ok = analysis.critical_path_analysis(
            rank=rank, annotation="ProfilerStep", instance_id=0)
        summary = graph.summary() if ok else None
        print(f"\n== critical path rank {rank}: ok={ok}\n", summary)

    figures_path = os.path.join(trace_dir, "metron_figures.txt")
    if not os.path.exists(figures_path):
        return 0
    with open(figures_path, encoding="utf-8") as f:
        figures = json.load(f)
    failed = False
    # HTA's non-compute time is the kernel union less compute, i.e. exposed communication.
    print(f"\n== HTA vs metron (µs; HTA ns rounding {'on' if rounding else 'off'})")
    for rank in ranks:
        mine = figures[str(rank)]
        row = temporal[temporal["rank"] == rank].iloc[0]
        over = overlap[overlap["rank"] == rank].iloc[0]["comp_comm_overlap_pctg"]
        comm = mine["comm_total_ns"]
        hidden = 100.0 * (comm - mine["comm_exposed_ns"]) / comm if comm else 0.0
        pairs = [
            ("compute", row["compute_time(us)"], mine["compute_busy_ns"] / 1000, 0.0015),
            ("exposed comm", row["non_compute_time(us)"], mine["comm_exposed_ns"] / 1000, 0.0015),
            # HTA rounds the percentage to 2 decimals.
            ("comm/comp overlap %", over, hidden, 0.006),
        ]
        for name, theirs, ours, tolerance in pairs:
            same = abs(theirs - ours) <= tolerance
            # With HTA's rounding each kernel loses up to 2 µs: shown, not failed.
            failed |= not same and not rounding
            verdict = "ok" if same else ("rounded" if rounding else "DIFFERS")
            print(f"rank {rank} {name}: HTA {theirs:.3f} metron {ours:.3f} {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
