"""``make timings`` (scripts/timings.py): measuring a command, formatting the report, rewriting the
regions between the markers. Measured on stand-in commands (``true``, a short Python), never on
``make test`` itself."""

from __future__ import annotations

import datetime as dt
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def T():
    spec = importlib.util.spec_from_file_location("timings", ROOT / "scripts" / "timings.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["timings"] = mod  # dataclasses look the module up by name
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop("timings", None)


FACTS = {"cores": "2 cores", "memory": "7.8 GiB RAM", "python": "Python 3.11.2", "system": "Linux x86_64"}
DAY = dt.date(2026, 12, 4)


def m(T, label="make check", wall=127.0, cpu=110.4, code=0, summary="2,237 passed, 110 deselected", what="ruff"):
    return T.Measurement(label, wall, cpu, code, summary, 0.21, 1.93, what)


def test_durations_read_as_the_tables_write_them(T):
    assert T.duration(0.04) == "0.0 s" and T.duration(37.64) == "37.6 s"
    assert T.duration(127.4) == "2 min 7 s" and T.duration(539) == "8 min 59 s"
    assert T.duration(3600 + 4 * 60 + 10) == "1 h 4 min"


def test_a_stand_in_command_is_measured(T, tmp_path):
    quick = T.measure(["true"], "true", cwd=tmp_path, log=tmp_path / "logs" / "true.log")
    assert quick.returncode == 0 and 0 <= quick.wall < 30 and quick.cpu >= 0 and quick.summary == ""
    assert (tmp_path / "logs" / "true.log").read_text() == ""
    # CPU of the children: a child that spins for a moment shows its CPU time; its summary line is read
    spin = "import time\nt=time.process_time()\nwhile time.process_time()-t<0.3: pass\n" \
           "print('===== 12 passed, 1 skipped in 0.31s =====')\nraise SystemExit(1)"
    busy = T.measure([sys.executable, "-c", spin], "make check", cwd=tmp_path)
    assert busy.returncode == 1 and busy.cpu >= 0.25 and busy.wall >= 0.25
    assert busy.summary == "12 passed, 1 skipped"
    assert "failed (exit 1)" in T.row(busy)


def test_summaries_of_pytest_and_make_paper(T):
    out = "collected\n...\n===== 2237 passed, 3 skipped, 110 deselected in 127.01s (0:02:07) =====\n"
    assert T.summary_of(out) == "2,237 passed, 3 skipped, 110 deselected"
    assert T.summary_of("fig2 1.0 s ok\nmake paper: 18 notebooks wrote 60 files to figures/\n") == \
        "18 notebooks wrote 60 files"
    assert T.summary_of("nothing to see") == ""


def test_the_row_and_the_region(T):
    r = T.row(m(T))
    assert r == ("| `make check` | 2 min 7 s wall, 1 min 50 s CPU (load average 0.2 before, 1.9 after) | "
                 "ruff: 2,237 passed, 110 deselected |")
    text = T.region([m(T)], FACTS, kept=["| `make runs` | 5.7 s | replay |"], when=DAY)
    lines = text.splitlines()
    assert lines[0].startswith("Measured by `make timings` (`scripts/timings.py`) on 2026-12-04")
    assert "2 cores, 7.8 GiB RAM, Python 3.11.2, Linux x86_64" in lines[0]
    assert lines[2:] == [*T.HEADER, r, "| `make runs` | 5.7 s | replay |"]


DOC = """# Title

Some words.

<!-- timings:start -->
| command | wall time | what it does |
|---|---|---|
| `make check` | 9 min | old figure |
| `make runs` (warm replay) | 5.7 s | kept as it is |
| `make test` | 1 h | old figure |
<!-- timings:end -->

After.
"""


def test_rewriting_replaces_only_the_region_and_keeps_rows_not_measured(T):
    new = T.rewrite(DOC, [m(T), m(T, "make test", 539.0, 446.0, summary="2,440 passed")], FACTS, DAY)
    assert new.startswith("# Title\n\nSome words.\n\n<!-- timings:start -->\nMeasured by")
    assert new.endswith("<!-- timings:end -->\n\nAfter.\n")
    inside = new.split("<!-- timings:start -->")[1].split("<!-- timings:end -->")[0]
    assert "old figure" not in inside and "| `make runs` (warm replay) | 5.7 s | kept as it is |" in inside
    assert inside.index("`make check`") < inside.index("`make test`") < inside.index("`make runs`")
    assert T.rewrite(new, [m(T), m(T, "make test", 539.0, 446.0, summary="2,440 passed")], FACTS, DAY) == new
    assert T.rewrite("no markers here\n", [m(T)], FACTS, DAY) == "no markers here\n"
    with pytest.raises(ValueError, match="pair up"):
        T.rewrite("<!-- timings:start -->\n", [m(T)], FACTS, DAY)


def test_every_region_of_a_file_and_every_file_with_markers(T, tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(DOC + "\n" + DOC)
    (tmp_path / "docs" / "a.md").write_text(DOC)
    (tmp_path / "docs" / "b.md").write_text("no region\n")
    assert T.documents(tmp_path) == [tmp_path / "README.md", tmp_path / "docs" / "a.md"]
    new = T.rewrite((tmp_path / "README.md").read_text(), [m(T)], FACTS, DAY)
    assert new.count("Measured by") == 2 and "old figure" in new  # make test was not measured: its row stays


def test_the_makefile_has_the_target_and_the_readme_the_markers(T):
    make = (ROOT / "Makefile").read_text()
    assert "\ntimings: $(TEST_STAMP)\n\t$(BIN)/python scripts/timings.py\n" in make
    assert T.documents(ROOT)[0] == ROOT / "README.md"


def test_the_machine_is_stated(T):
    facts = T.machine()
    assert facts["cores"].endswith("cores") and "GiB RAM" in facts["memory"] and facts["python"].startswith("Python 3")
