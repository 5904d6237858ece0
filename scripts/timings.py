"""``make timings``: measure ``make check``, ``make test`` and ``make paper`` and write the figures
into the documentation.

Each target runs once, in this checkout, one after the other. For each the script records the wall
time, the CPU time of the processes it started (user + system of every waited-for descendant, from
``resource.getrusage(RUSAGE_CHILDREN)`` before and after), its exit code, the one-line summary it
printed (pytest's ``N passed ...``, ``make paper: N notebooks wrote M files``) and the load average
just before and just after it. The machine is stated once: cores, memory, Python, system.

The figures replace, in README.md and every ``docs/*.md`` that has them, the table between the
markers ``<!-- timings:start -->`` and ``<!-- timings:end -->``: a line naming the machine, then a
table whose rows of the measured commands are rewritten; other rows of that table (commands this
script does not run, e.g. ``make runs``) are kept as they are, after them. A target's output goes
to ``build/timings/<target>.log``.

    python scripts/timings.py                    # check, test and paper, then rewrite the files
    python scripts/timings.py --targets paper    # only make paper (the other rows are kept)
    python scripts/timings.py --dry-run          # measure, print the region, write no file
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import platform
import re
import resource
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- timings:start -->", "<!-- timings:end -->"
HEADER = ["| command | wall time | what it does |", "|---|---|---|"]

#: What each measured target does, in the table's last column (its summary line follows).
WHAT = {
    "check": "ruff and the tests not marked slow",
    "test": "ruff, every test (the slow ones, the real Phoenix and MLflow servers included) and nbval over "
            "the notebooks",
    "paper": "every notebook on the recorded runs in `data/runs/`, `JOBS` at a time (default: the number of "
             "cores)",
}
TARGETS = tuple(WHAT)


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One command, run once: ``label`` (the table's first cell, e.g. ``make check``), wall and
    CPU seconds (CPU: user + system of the processes it started), exit code, the summary line it
    printed (or ``""``) and the 1-minute load average before and after."""

    label: str
    wall: float
    cpu: float
    returncode: int
    summary: str
    load_before: float
    load_after: float
    what: str = ""


def duration(seconds: float) -> str:
    """``37.6 s``, ``2 min 7 s``, ``1 h 4 min``: a duration as the tables write it."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    s = round(seconds)
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {round((s % 3600) / 60)} min"


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:  # no load average on this system
        return float("nan")


_PYTEST = re.compile(r"^=+ (\d[\d,]* (?:passed|failed|error)[^=]*?) in [\d.]+s(?: \([^)]*\))? =+$", re.M)
_PAPER = re.compile(r"^make paper: (\d+ notebooks wrote \d+ files)", re.M)


def summary_of(output: str) -> str:
    """The summary line of a target's output: pytest's last ``N passed, ...`` (the figures with
    thousands separators) or ``make paper``'s ``N notebooks wrote M files``; ``""`` when none."""
    found = _PYTEST.findall(output)
    if found:
        return re.sub(r"\d{4,}", lambda m: f"{int(m.group()):,}", found[-1].strip())
    found = _PAPER.findall(output)
    return found[-1] if found else ""


def measure(argv: Sequence[str], label: str, *, what: str = "", cwd: Path = ROOT, log: Path | None = None,
            echo: bool = False) -> Measurement:
    """Run ``argv`` once in ``cwd`` and measure it (see :class:`Measurement`); its output goes to
    ``log`` (and to this process's standard output with ``echo``)."""
    load_before, cpu_before, t0 = _load(), _children_cpu(), time.monotonic()
    # as typed at a shell: not as a sub-make of `make timings` (no inherited jobserver or flags)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    proc = subprocess.Popen(list(argv), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", env=env)
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if echo:
            sys.stdout.write(line)
            sys.stdout.flush()
    code = proc.wait()
    wall, cpu = time.monotonic() - t0, _children_cpu() - cpu_before
    output = "".join(lines)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(output, encoding="utf-8")
    return Measurement(label, wall, cpu, code, summary_of(output), load_before, _load(), what)


def machine() -> dict[str, str]:
    """The machine in words: cores, memory, Python, system."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        memory = f"{ram:.1f} GiB RAM"
    except (ValueError, OSError, AttributeError):
        memory = "RAM unknown"
    return {"cores": f"{os.cpu_count() or '?'} cores", "memory": memory,
            "python": f"Python {platform.python_version()}", "system": f"{platform.system()} {platform.machine()}"}


def _load_text(x: float) -> str:
    return "unknown" if x != x else f"{x:.1f}"


def row(m: Measurement) -> str:
    """The table row of one measurement."""
    timing = f"{duration(m.wall)} wall, {duration(m.cpu)} CPU (load average {_load_text(m.load_before)} before, " \
             f"{_load_text(m.load_after)} after)"
    if m.returncode:
        timing += f", **failed (exit {m.returncode})**"
    what = m.what + (f": {m.summary}" if m.summary else "")
    return f"| `{m.label}` | {timing} | {what} |"


def region(measured: Sequence[Measurement], facts: dict[str, str], kept: Iterable[str] = (),
           when: dt.date | None = None) -> str:
    """The text between the markers: the machine line, the header, a row per measurement, then the
    ``kept`` rows (of commands not measured this time)."""
    when = when or dt.date.today()
    intro = (f"Measured by `make timings` (`scripts/timings.py`) on {when.isoformat()}, one run each, in a checkout "
             f"whose `.venv` exists: {', '.join(facts.values())}. CPU is the time of the processes each command "
             "started.")
    return "\n".join([intro, "", *HEADER, *(row(m) for m in measured), *kept])


def _label_of(line: str) -> str | None:
    """The command of a table row (``make check`` of ``| `make check` | ...``), else ``None``."""
    m = re.match(r"^\|\s*`([^`]+)`", line)
    return m.group(1) if m else None


def kept_rows(current: str, measured: Iterable[str]) -> list[str]:
    """The rows of the region ``current`` whose command is not among ``measured``."""
    skip = set(measured)
    return [line for line in current.splitlines() if line.startswith("|") and _label_of(line) is not None
            and _label_of(line) not in skip]


def rewrite(text: str, measured: Sequence[Measurement], facts: dict[str, str], when: dt.date | None = None) -> str:
    """``text`` with every region between the markers rewritten; ``text`` itself when it has none.
    Each region keeps its own rows of the commands not measured. A start without an end (or the
    other way round) is an error."""
    if text.count(START) != text.count(END):
        raise ValueError(f"{START} and {END} do not pair up")
    out, rest = [], text
    while START in rest:
        before, after = rest.split(START, 1)
        if END not in after:
            raise ValueError(f"{START} without {END}")
        current, rest = after.split(END, 1)
        kept = kept_rows(current, [m.label for m in measured])
        out += [before, START, "\n", region(measured, facts, kept, when), "\n", END]
    return "".join(out) + rest


def documents(root: Path = ROOT) -> list[Path]:
    """README.md and every docs/*.md that holds the markers."""
    candidates = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    return [p for p in candidates if p.exists() and START in p.read_text(encoding="utf-8")]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", default=",".join(TARGETS), help="make targets to measure, in order "
                    f"(default: {','.join(TARGETS)})")
    ap.add_argument("--dry-run", action="store_true", help="print the region; write no documentation file")
    ap.add_argument("--quiet", action="store_true", help="do not echo the targets' output")
    a = ap.parse_args(argv)
    make = os.environ.get("MAKE", "make")
    measured = []
    for target in [t.strip() for t in a.targets.split(",") if t.strip()]:
        print(f"timings: make {target} ...", flush=True)
        m = measure([make, "--no-print-directory", target], f"make {target}", what=WHAT.get(target, ""),
                    log=ROOT / "build" / "timings" / f"{target}.log", echo=not a.quiet)
        print(f"timings: {row(m)}", flush=True)
        measured.append(m)
    facts = machine()
    if a.dry_run:
        print(region(measured, facts))
    else:
        for path in documents():
            text = path.read_text(encoding="utf-8")
            new = rewrite(text, measured, facts)
            if new != text:
                path.write_text(new, encoding="utf-8")
                print(f"timings: rewrote {path.relative_to(ROOT)}")
    return max((m.returncode for m in measured), default=0)


if __name__ == "__main__":
    raise SystemExit(main())
