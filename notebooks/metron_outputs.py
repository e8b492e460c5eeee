"""What the notebooks share: running metron and reading what it writes (results, traces).

The notebooks analyse metron's outputs only (JSON results, Chrome traces); they never import
its build internals. The binary is $METRON when set, else the first build of this checkout
that has one (release, then asan), else `metron` on PATH. METRON_NOTEBOOK_QUICK=1 (what CI
sets) asks each notebook for its small configuration, so a run takes seconds.
"""

import atexit
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from matplotlib.patches import Patch

ROOT = Path(__file__).resolve().parent.parent
QUICK = os.environ.get("METRON_NOTEBOOK_QUICK") == "1"


def binary():
    """The metron executable the notebooks run."""
    if os.environ.get("METRON"):
        return os.environ["METRON"]
    for build in ("release", "asan"):
        candidate = ROOT / "build" / build / "cli" / "metron"
        if candidate.exists():
            return str(candidate)
    found = shutil.which("metron")
    if found is None:
        raise RuntimeError("no metron binary: build it (scripts/setup.sh run) or set METRON")
    return found


def workdir():
    """A fresh folder for one notebook's files, removed when the kernel exits."""
    folder = tempfile.mkdtemp(prefix="metron-notebook-")
    atexit.register(shutil.rmtree, folder, True)
    return Path(folder)


def metron(*args):
    """Runs `metron ARGS...` and returns its standard output; raises with its stderr on failure."""
    argv = [binary(), *(str(a) for a in args)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def trace_slices(path):
    """The complete events ("X") of a Chrome trace, with each rank's name, as dicts."""
    doc = read_json(path)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    slices = [e for e in events if e.get("ph") == "X"]
    for e in slices:
        e["process"] = names.get(e["pid"], str(e["pid"]))
    return slices


def task_kind(event):
    """What a slice is: F, B, I, W or OPT for compute ("F0 mb=0 chunk=0" -> "F"), the
    collective's or transfer's name for communication ("all-reduce", "send", "recv")."""
    if event.get("cat") == "comm":
        return event.get("args", {}).get("Collective name", event["name"].split(" ")[0])
    head = event["name"].split(" ")[0]
    return head.rstrip("0123456789") or head


# One colour per task kind in every timeline the notebooks draw.
KIND_COLOURS = {"F": "#4c72b0", "B": "#dd8452", "I": "#c44e52", "W": "#55a868",
                "OPT": "#8172b3", "comm": "#999999"}


def draw_timeline(ax, slices, title):
    """Ranks as rows, compute coloured by kind, communication grey (rows: processes)."""
    rows = sorted({(e["pid"], e["process"]) for e in slices})
    row_of = {pid: i for i, (pid, _) in enumerate(rows)}
    for e in slices:
        if e.get("cat") == "compute":
            kind = task_kind(e)
            colour, height = KIND_COLOURS.get(kind, "#937860"), 0.8
        elif e.get("cat") == "comm":
            colour, height = KIND_COLOURS["comm"], 0.3
        else:
            continue
        y = row_of[e["pid"]]
        ax.broken_barh([(e["ts"] / 1e3, e["dur"] / 1e3)], (y - height / 2, height),
                       facecolors=colour, edgecolor="white", linewidth=0.3)
    ax.set_yticks(range(len(rows)), [name for _, name in rows])
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title(title)
    handles = [Patch(color=c, label=k) for k, c in KIND_COLOURS.items()]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")


def union_length(intervals):
    """Total length covered by (start, end) intervals."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def temporal_breakdown(path):
    """Holistic Trace Analysis's temporal breakdown of one per-rank (Kineto-style) trace, in ms:
    idle (no kernel on the GPU), compute (some computation kernel running) and non-compute
    (only communication or memory kernels: NCCL's and copies), over the profiler step."""
    events = read_json(path)["traceEvents"]
    step = next(e for e in events if e.get("cat") == "user_annotation")
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy")]

    def span(e):
        return e["ts"], e["ts"] + e["dur"]

    busy = union_length([span(e) for e in kernels])
    compute = union_length([span(e) for e in kernels
                            if e["cat"] == "kernel" and not e["name"].startswith("nccl")])
    return {"idle": (step["dur"] - busy) / 1e3, "compute": compute / 1e3,
            "non-compute": (busy - compute) / 1e3}

