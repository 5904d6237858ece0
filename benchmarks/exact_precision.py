"""Precision of the exact judge where it decides, and how much it decides (issue 49's acceptance).

    python benchmarks/exact_precision.py [--split tune|held|all] [--json] [--show wrong|undecided|all]

Reads hand-written case sets in ``benchmarks/exact_cases/`` (every expected verdict was fixed by a
person before the judge ran on it; see that folder's README):

* ``fresh_grading.jsonl`` — fresh adversarial answers in the three protocols (FreshQA,
  InfoDeepSeek, SealQA), fictional entities; ``fresh_grading_2.jsonl`` a second batch, written
  after the first batch's held-out half had been scored once, and itself scored once;
* ``previous_grading.jsonl`` — the previous audit's cases, as the exact rules' tests stated them
  before the judge could abstain;
* ``query_adequacy.jsonl`` — fresh query sets for the query-adequacy rule (paper C.2), and
  ``previous_query.jsonl`` its earlier tests' cases; ``query_adequacy_2.jsonl`` a second batch.

For each set it prints the cases, how many the judge decided (the rest are ``undecided``), the
precision among the decided ones and whether both clear the set's bar. A grading verdict agrees
when its credit agrees (correct or not, as the issue measures it); the share whose outcome agrees
exactly (SealQA's not attempted against incorrect too) is printed beside it. A case belongs to the
held-out split when the first byte of the SHA-256 of its id is divisible by 3 (a fixed rule: no case
was placed by hand). The exit code is 1 when a bar is missed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trek.graders.exact import decide
from trek.query_targets import QueryTargets, assess
from trek.types import Question

CASES = Path(__file__).resolve().parent / "exact_cases"

#: set name -> (file, kind, minimum precision among decided, minimum decided share)
SETS: dict[str, tuple[str, str, float, float]] = {
    "fresh grading": ("fresh_grading.jsonl", "grading", 0.95, 0.70),
    "fresh grading, batch 2": ("fresh_grading_2.jsonl", "grading", 0.95, 0.70),
    "previous grading": ("previous_grading.jsonl", "grading", 0.97, 0.80),
    "query adequacy": ("query_adequacy.jsonl", "query", 0.90, 0.70),
    "query adequacy, batch 2": ("query_adequacy_2.jsonl", "query", 0.90, 0.70),
    "previous query adequacy": ("previous_query.jsonl", "query", 0.97, 0.80),
}
SPLITS = ("tune", "held", "all")


def split_of(case_id: str) -> str:
    """``held`` for a held-out case, else ``tune`` (module docstring)."""
    return "held" if hashlib.sha256(case_id.encode()).digest()[0] % 3 == 0 else "tune"


def load(path: Path) -> list[dict[str, Any]]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise SystemExit(f"{path}:{n}: not a JSON line: {e}") from None
    return rows


def grade(case: dict[str, Any]) -> dict[str, Any]:
    """The exact judge's verdict on one grading case."""
    q = Question(id=case["id"], dataset=case["protocol"], question=case["question"], answers=case["answers"],
                 false_premise=bool(case.get("false_premise")))
    d = decide(q, case["response"], case.get("competing", []), protocol=case["protocol"])
    decided = d.outcome != "undecided"
    return {"id": case["id"], "kind": case.get("kind", ""), "expected": case["expected"], "got": d.outcome,
            "decided": decided, "agrees": decided and (d.outcome == "correct") == (case["expected"] == "correct"),
            "same_outcome": d.outcome == case["expected"], "why": d.explain()}


def targets(raw: dict[str, Any], case_id: str) -> QueryTargets:
    time = raw.get("time", {})
    return QueryTargets(case_id, entity=tuple(raw["entity"]), attribute=tuple(raw["attribute"]),
                        years=frozenset(time.get("years", [])), required=bool(time.get("required", False)),
                        hop1=tuple(raw.get("hop1") or ()), competing=tuple(raw.get("competing") or ()))


def query(case: dict[str, Any]) -> dict[str, Any]:
    """The query-adequacy rule's verdict on one case."""
    value, detail = assess(targets(case["targets"], case["id"]), case["queries"])
    got = value["query_adequate"]
    decided = got is not None
    return {"id": case["id"], "kind": case.get("kind", ""), "expected": case["expected"], "got": got,
            "decided": decided, "agrees": decided and got == case["expected"], "same_outcome": got == case["expected"],
            "why": value["reason"]}


@dataclass
class Score:
    """One set's counts: ``precision`` among decided verdicts, ``decided`` share of all cases."""

    name: str
    split: str
    cases: int
    decided_n: int
    agree_n: int
    same_outcome_n: int
    min_precision: float
    min_decided: float

    @property
    def precision(self) -> float | None:
        return self.agree_n / self.decided_n if self.decided_n else None

    @property
    def decided(self) -> float:
        return self.decided_n / self.cases if self.cases else 0.0

    @property
    def passes(self) -> bool:
        return self.cases > 0 and self.precision is not None and self.precision >= self.min_precision and (
            self.decided >= self.min_decided)


def score(name: str, split: str, verdicts: Iterable[dict[str, Any]], min_precision: float,
          min_decided: float) -> Score:
    vs = list(verdicts)
    return Score(name, split, len(vs), sum(v["decided"] for v in vs), sum(v["agrees"] for v in vs),
                 sum(v["same_outcome"] for v in vs if v["decided"]), min_precision, min_decided)


def run(split: str = "all", folder: Path = CASES) -> tuple[list[Score], dict[str, list[dict[str, Any]]]]:
    """Every set's score on ``split``, and the verdicts behind them."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
    scores, verdicts = [], {}
    for name, (file, kind, p, d) in SETS.items():
        cases = [c for c in load(folder / file) if split == "all" or split_of(c["id"]) == split]
        vs = [(grade if kind == "grading" else query)(c) for c in cases]
        verdicts[name] = vs
        scores.append(score(name, split, vs, p, d))
    return scores, verdicts


def _pct(x: float | None) -> str:
    return "  n/a" if x is None else f"{100 * x:5.1f} %"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", choices=SPLITS, default="all")
    ap.add_argument("--json", action="store_true", help="print the scores as JSON")
    ap.add_argument("--show", choices=("wrong", "undecided", "all"), help="also list these verdicts")
    a = ap.parse_args(argv)
    scores, verdicts = run(a.split)
    if a.json:
        print(json.dumps([{**asdict(s), "precision": s.precision, "decided": s.decided, "passes": s.passes}
                          for s in scores], indent=2))
    else:
        print(f"split: {a.split}")
        print(f"{'set':<26}{'cases':>6}{'decided':>10}{'precision':>11}{'same outcome':>14}   bar")
        for s in scores:
            same = s.same_outcome_n / s.decided_n if s.decided_n else None
            print(f"{s.name:<26}{s.cases:>6}{_pct(s.decided):>10}{_pct(s.precision):>11}{_pct(same):>14}   "
                  f"precision >= {100 * s.min_precision:.0f} %, decided >= {100 * s.min_decided:.0f} %: "
                  + ("met" if s.passes else "MISSED"))
    if a.show:
        for name, vs in verdicts.items():
            for v in vs:
                if a.show == "all" or (a.show == "wrong" and v["decided"] and not v["agrees"]) or (
                        a.show == "undecided" and not v["decided"]):
                    print(f"[{name}] {v['id']} ({v['kind']}): expected {v['expected']}, got {v['got']} — {v['why']}")
    return 0 if all(s.passes for s in scores) else 1


if __name__ == "__main__":
    sys.exit(main())
