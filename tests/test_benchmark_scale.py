"""The README's large-run command (*Large runs: benchmarks/scale.py*) runs, on small N, and its
figures say what the README claims of every N: one compaction per record file and the records
written twice in all."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def readme_command() -> list[str]:
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    section = text.split("## Large runs: `benchmarks/scale.py`", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    line = [ln for ln in block.strip().splitlines() if not ln.startswith("#")][0].split("#", 1)[0]
    return shlex.split(line)


def test_the_readme_scale_command_runs_and_writes_each_record_file_twice(tmp_path):
    cmd = readme_command()
    assert cmd[0].endswith("python") and cmd[1] == "benchmarks/scale.py"
    # the README's sizes take an hour; the same command on small N (later flags win)
    out = subprocess.run([sys.executable, *cmd[1:], "--sizes", "40,80", "--stages", "executor,llm,closed,grade",
                          "--work", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = re.findall(r"N=\s*(\d+) (\w+)\s.*rewritten/N ([\d.]+)\s+written/size ([\d.]+)", out.stdout)
    assert {(n, stage) for n, stage, _, _ in rows} == {(n, s) for n in ("40", "80")
                                                       for s in ("executor", "llm", "answer", "closed", "grade")}
    assert all(float(r) == 1.0 and abs(float(w) - 2.0) < 0.05 for _, _, r, w in rows)
    assert "ratios N=80 over N=40:" in out.stdout and "bytes written" in out.stdout
    assert re.search(r"acceptance \(issue 44\): peak RSS at N=80 / at N=40 <= 1.3: worst [\d.]+ \(\w+\) (ok|OVER)",
                     out.stdout)


def test_the_ctrlrun_stage_answers_grades_and_counts_the_grid_of_two_conditions(tmp_path):
    # trek ctrl run on two conditions: two answer files and two grade files, each compacted once
    out = subprocess.run([sys.executable, "benchmarks/scale.py", "--sizes", "30,60", "--stages", "ctrlrun",
                          "--latency", "0", "--work", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = re.findall(r"N=\s*(\d+) (\w+)\s.*rewritten/N ([\d.]+)\s+written/size ([\d.]+)", out.stdout)
    assert [(n, stage) for n, stage, _, _ in rows] == [("30", "ctrlrun"), ("60", "ctrlrun")]
    assert all(float(r) == 4.0 and abs(float(w) - 2.0) < 0.05 for _, _, r, w in rows)
    assert "ratios N=60 over N=30:" in out.stdout
