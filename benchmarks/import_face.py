"""What the public face costs at start-up: CPU seconds of ``trek --version`` and ``import trek``
with this checkout's ``trek/``, against another commit's when ``--before`` names one.

    python benchmarks/import_face.py --repeats 21 --before HEAD~1 --json

``import trek`` loads the public face (``trek.load``, ``Run``...) only when a name of it is first
used (a module ``__getattr__``), so neither a ``trek`` command nor ``import trek`` should pay for
pandas. Each contender is a fresh process, timed by the CPU (user + system) the operating system
reports when it exits (``os.wait4``), run interleaved in a rotating order, one of each per round;
every figure is the median over ``--repeats`` rounds:

* ``python``: ``python -c pass``, the interpreter alone (the floor);
* ``version``: ``trek --version`` (what the ``trek`` script runs: ``trek.cli.app``);
* ``import``: ``python -c "import trek"``;
* ``face``: ``import trek; trek.load`` (the first use of the face: imports pandas and the
  layers under :mod:`trek.api`), for scale;
* with ``--before REF``: ``version_before`` and ``import_before``, the same with REF's ``trek/``
  (extracted by ``git archive`` to a temporary folder put first on ``PYTHONPATH``).
Every contender starts in an empty folder (``python -c`` puts its folder first on ``sys.path``).

The figure to read is ``version`` against ``version_before``: the issue's bar is "unchanged
within noise"; the spread of each contender (its interquartile range) is printed beside it.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERSION = "import sys; from trek.cli import app; sys.argv = ['trek', '--version']; sys.exit(app())"
FILE = "import trek, sys; sys.stdout.write(trek.__file__)"


def cpu_of(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    """CPU seconds of one process run to its end; a failure is an error."""
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... failed: {err[-2000:]}")
    return usage.ru_utime + usage.ru_stime


def extract(ref: str, into: Path) -> None:
    """``ref``'s ``trek/`` folder into ``into/trek``."""
    data = subprocess.run(["git", "archive", "--format=tar", ref, "trek"], cwd=ROOT, capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(data.stdout)) as tar:
        tar.extractall(into, filter="data")


def quartiles(values: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return q[0], q[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--before", default=None, help="a git commit whose trek/ to time beside this checkout's")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    py = sys.executable
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TREK_", "PYTHON"))}
    cmds: dict[str, tuple[list[str], dict[str, str]]] = {
        "python": ([py, "-c", "pass"], env),
        "version": ([py, "-c", VERSION], env),
        "import": ([py, "-c", "import trek"], env),
        "face": ([py, "-c", "import trek; trek.load"], env),
    }
    with tempfile.TemporaryDirectory() as tmp:
        # every contender starts in an empty folder: `python -c` puts its folder first on sys.path
        work = Path(tmp) / "work"
        work.mkdir()
        if a.before:
            extract(a.before, Path(tmp) / "old")
            old = {**env, "PYTHONPATH": str(Path(tmp) / "old")}
            where = subprocess.run([py, "-c", FILE], env=old, cwd=work, capture_output=True, text=True, check=True)
            if not where.stdout.startswith(str(Path(tmp) / "old")):
                raise RuntimeError(f"--before: the old trek/ was not the one imported ({where.stdout})")
            cmds["version_before"] = ([py, "-c", VERSION], old)
            cmds["import_before"] = ([py, "-c", "import trek"], old)
        runs: dict[str, list[float]] = {k: [] for k in cmds}
        names = list(cmds)
        for r in range(a.repeats):
            for name in names[r % len(names):] + names[:r % len(names)]:  # rotate: nobody always goes first
                cmd, e = cmds[name]
                runs[name].append(cpu_of(cmd, e, work))
    med = {k: statistics.median(v) for k, v in runs.items()}
    result: dict[str, object] = {"repeats": a.repeats, "before": a.before, "load_average": round(os.getloadavg()[0], 2)}
    for k, v in runs.items():
        lo, hi = quartiles(v)
        result[f"{k}_cpu_s"] = round(med[k], 4)
        result[f"{k}_iqr_s"] = [round(lo, 4), round(hi, 4)]
    if a.before:
        result["version_after_minus_before_s"] = round(med["version"] - med["version_before"], 4)
        result["import_after_minus_before_s"] = round(med["import"] - med["import_before"], 4)
    if a.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:>30}: {v}")


if __name__ == "__main__":
    main()
