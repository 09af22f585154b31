#!/usr/bin/env python3
"""Executes a notebook top to bottom in a fresh kernel (nbclient) and fails on the first
cell that raises. Usage: run-notebook.py NOTEBOOK.ipynb [OUT.ipynb]"""
import sys
import time
from pathlib import Path

import nbclient
import nbformat


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path = Path(sys.argv[1])
    nb = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as e:
        print(f"run-notebook: {path}: a cell failed: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    n = sum(1 for c in nb.cells if c.cell_type == "code")
    print(f"run-notebook: {path}: {n} code cells ran in {time.perf_counter() - t0:.1f} s")
    if len(sys.argv) == 3:
        nbformat.write(nb, sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
