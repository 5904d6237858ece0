"""Re-execute notebooks in place so that their stored outputs (which nbval compares in
``make test``) match the current code and the current demo runs.

    python scripts/refresh_notebooks.py [notebooks/NAME.ipynb ...]     (``make notebooks``)

Cells run with the notebooks' default parameters, from the notebooks folder; per-cell timing
metadata is dropped so that a refresh changes only what really changed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def refresh(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nbformat.write(nb, path)


def main(argv: list[str]) -> None:
    root = Path(__file__).resolve().parents[1]
    paths = [Path(a) for a in argv] or sorted((root / "notebooks").glob("*.ipynb"))
    for p in paths:
        print(f"refreshing {p}")
        refresh(p)


if __name__ == "__main__":
    main(sys.argv[1:])
