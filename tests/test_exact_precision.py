"""benchmarks/exact_precision.py counts on its own case sets: the exact judge's precision where it
decides and the share it decides, against issue 49's bars (these tests fail when a bar is missed)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("exact_precision", ROOT / "benchmarks" / "exact_precision.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["exact_precision"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def scores(bench):
    return {s.name: s for s in bench.run("all")[0]}


@pytest.mark.parametrize("name", ["fresh grading", "previous grading", "query adequacy", "previous query adequacy"])
def test_every_set_clears_its_bar(scores, name):
    s = scores[name]
    assert s.cases >= 20
    assert s.passes, (f"{name}: precision {s.precision}, decided {s.decided} (bar {s.min_precision}, "
                      f"{s.min_decided})")


def test_the_counting_is_what_it_says(bench, tmp_path):
    rows = [
        {"id": "a", "protocol": "freshqa", "question": "Who coaches the Lantern Rovers?", "answers": ["Ada Vale"],
         "competing": ["Bo Reed"], "response": "Ada Vale", "expected": "correct"},  # decided, agrees
        {"id": "b", "protocol": "freshqa", "question": "Who coaches the Lantern Rovers?", "answers": ["Ada Vale"],
         "competing": ["Bo Reed"], "response": "Bo Reed", "expected": "correct"},  # decided, disagrees
        {"id": "c", "protocol": "freshqa", "question": "Who coaches the Lantern Rovers?", "answers": ["Ada Vale"],
         "competing": ["Bo Reed"], "response": "Ossian Gray", "expected": "incorrect"},  # undecided
        {"id": "d", "protocol": "sealqa", "question": "Who coaches the Lantern Rovers?", "answers": ["Ada Vale"],
         "competing": ["Bo Reed"], "response": "I don't know.", "expected": "incorrect"},  # credit agrees, C vs B
    ]
    vs = [bench.grade(r) for r in rows]
    assert [v["decided"] for v in vs] == [True, True, False, True]
    s = bench.score("x", "all", vs, 0.95, 0.70)
    assert (s.cases, s.decided_n, s.agree_n, s.same_outcome_n) == (4, 3, 2, 1)
    assert s.precision == pytest.approx(2 / 3) and s.decided == 0.75 and not s.passes
    q = bench.query({"id": "q", "targets": {"entity": ["Lantern Rovers"], "attribute": ["coach"],
                                            "time": {"years": [2024]}}, "queries": ["Lantern Rovers coach"],
                     "expected": True})
    assert q["decided"] and q["agrees"]


def test_the_split_is_fixed_by_the_id_and_both_halves_are_used(bench):
    ids = [json.loads(x)["id"] for x in (ROOT / "benchmarks" / "exact_cases" / "fresh_grading.jsonl").read_text()
           .splitlines() if x.strip()]
    splits = [bench.split_of(i) for i in ids]
    assert splits == [bench.split_of(i) for i in ids] and {"tune", "held"} == set(splits)
    tune, held = bench.run("tune")[0], bench.run("held")[0]
    assert [a.cases + b.cases for a, b in zip(tune, held, strict=True)] == [s.cases for s in bench.run("all")[0]]


def test_one_command_prints_every_set_and_exits_by_the_bars():
    import subprocess

    out = subprocess.run([sys.executable, "benchmarks/exact_precision.py", "--json"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    rows = json.loads(out.stdout)
    assert {r["name"] for r in rows} == {"fresh grading", "fresh grading, batch 2", "previous grading",
                                         "query adequacy", "query adequacy, batch 2", "previous query adequacy"}
    assert out.returncode == (0 if all(r["passes"] for r in rows) else 1)
    assert all(0 <= r["decided"] <= 1 and (r["precision"] is None or 0 <= r["precision"] <= 1) for r in rows)
