"""Re-execute notebooks in place so that their stored outputs (which nbval compares in
``make test``) match the current code and the current recorded runs.

    python scripts/refresh_notebooks.py [notebooks/NAME.ipynb ...] [--logs DIR]     (``make notebooks``)

Cells run with the notebooks' default parameters, from the notebooks folder; per-cell timing
metadata is dropped so that a refresh changes only what really changed. Like ``make paper``, it
prints one line per notebook (name, seconds, ``ok``) and a closing line: each kernel's own log
(its warnings, such as running over TCP without encryption) goes to ``DIR/<notebook>.log``
(default ``build/notebooks``) and is printed only when the notebook fails, with the error; the
notebook file is then left as it was.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from trek.paper import stderr_to

ROOT = Path(__file__).resolve().parents[1]


def refresh(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    from trek.paper import ipc_kernel_manager  # Unix sockets: no port to collide with another kernel

    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}},
                   kernel_manager_class=ipc_kernel_manager()).execute()
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nbformat.write(nb, path)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="scripts/refresh_notebooks.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook in notebooks/")
    ap.add_argument("--logs", type=Path, default=ROOT / "build" / "notebooks", help="folder of the kernels' logs")
    a = ap.parse_args(argv)
    paths = a.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    a.logs.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    for p in paths:
        log, t0 = a.logs / f"{p.stem}.log", time.monotonic()
        try:
            with stderr_to(log):
                refresh(p)
        except Exception as e:  # the notebook failed: say so, with the kernel's log and the error
            print(f"{p.stem:<28} {time.monotonic() - t0:6.1f} s  FAILED", flush=True)
            text = log.read_text(errors="replace").strip() if log.exists() else ""
            if text:
                print(f"--- kernel log ({log}) ---\n{text}", file=sys.stderr)
            print(f"{p.stem}: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        print(f"{p.stem:<28} {time.monotonic() - t0:6.1f} s  ok", flush=True)
    logs = a.logs.resolve()
    shown = logs.relative_to(ROOT) if logs.is_relative_to(ROOT) else logs
    print(f"make notebooks: {len(paths)} notebooks refreshed in place in {time.monotonic() - start:.0f} s "
          f"(kernel logs in {shown})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
