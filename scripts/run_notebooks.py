#!/usr/bin/python3
"""Executes the notebooks in notebooks/ and fails on the first cell that raises.

    scripts/run_notebooks.py [--metron BINARY] [--quick] [--write [--images DIR]] [NOTEBOOK...]

--metron   the metron binary the notebooks run (exported as $METRON; default: theirs)
--quick    the small configurations CI runs (METRON_NOTEBOOK_QUICK=1), seconds each
--write    save each executed notebook with its outputs in place (what is committed);
           without it nothing is written
--images   with --write, also save each figure as DIR/<notebook>_<k>.png (the README's tour
           shows them)
Exits 0 when every notebook ran, 1 when one failed (naming it and the cell), 77 when Debian's
Jupyter packages (python3-nbclient, python3-ipykernel) are missing, so CTest can skip visibly.
Runs under Debian's interpreter: the kernel is /usr/bin/python3 too (its kernel spec), whatever
python3 comes first on PATH.
"""

import argparse
import atexit
import base64
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = 77


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--metron", help="the metron binary the notebooks run")
    parser.add_argument("--quick", action="store_true", help="CI's small configurations")
    parser.add_argument("--write", action="store_true", help="save the outputs in place")
    parser.add_argument("--images", type=Path, help="with --write: save the figures here too")
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args()
    try:
        import nbformat
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError
    except ImportError as e:
        print(f"run_notebooks: skipped: {e} (apt-get install python3-nbclient python3-ipykernel "
              "python3-matplotlib python3-pandas)", file=sys.stderr)
        return SKIP
    if args.metron:
        os.environ["METRON"] = str(Path(args.metron).resolve())
    if args.quick:
        os.environ["METRON_NOTEBOOK_QUICK"] = "1"
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # the kernel's debugger's start-up note
    # Kernel connection files, IPython's profile and matplotlib's font cache in a scratch folder:
    # CI's home may be read-only, and a run must not depend on what an earlier one left there.
    scratch = tempfile.mkdtemp(prefix="metron-notebooks-")
    atexit.register(shutil.rmtree, scratch, True)
    for name in ("JUPYTER_RUNTIME_DIR", "IPYTHONDIR", "MPLCONFIGDIR"):
        os.environ.setdefault(name, os.path.join(scratch, name.lower()))
    notebooks = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    for path in notebooks:
        print(f"run_notebooks: {path.name} ...", file=sys.stderr, flush=True)
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, timeout=900, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}})
        try:
            client.execute()
        except CellExecutionError as e:
            print(f"run_notebooks: {path}: a cell failed:\n{e}", file=sys.stderr)
            return 1
        if args.write:
            tmp = path.with_name(f".{path.name}.tmp")
            nbformat.write(nb, tmp)
            tmp.replace(path)
            if args.images:
                save_figures(nb, args.images, path.stem)
    print(f"run_notebooks: {len(notebooks)} notebooks ran", file=sys.stderr)
    return 0


def save_figures(nb, folder, stem):
    """Each PNG output of `nb` as folder/stem_k.png, k from 1 in cell order."""
    folder.mkdir(parents=True, exist_ok=True)
    k = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if png is not None:
                k += 1
                (folder / f"{stem}_{k}.png").write_bytes(base64.b64decode(png))


if __name__ == "__main__":
    sys.exit(main())
