"""Shortcut audit: how far content-blind heuristics get on each condition (beyond the paper).

The paper argues (section 4.1) that outdated-only benchmarks reward "pick the latest document".
This module measures it from the documents' labels alone, never their text:

``latest``              the answer of the latest displayed date
``majority``            the most frequent answer among the documents
``latest_real_domain``  the latest displayed date among documents whose displayed URL is not on a
                        fictitious domain (hidden URLs cannot be excluded, so under SBA it equals
                        ``latest``)

A document's answer is correct when it is a gold document or its ``answer`` matches a reference
answer. Undated documents are ignored by the date heuristics; a distractor without an answer label
(e.g. LongSeal's outdated pages) counts as its own distinct wrong answer. Ties are scored by their
expected accuracy under a uniform random tie-break (share of tied candidates that are correct), so
the figures are ceilings of a deterministic heuristic, not lucky draws. A context where a date
heuristic has no dated document scores 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from trek.ctrl.common import is_fictitious, normalize_answer, same_answer

__all__ = ["HEURISTICS", "heuristic_scores", "audit"]

HEURISTICS = ("latest", "majority", "latest_real_domain")


def _label(doc: dict[str, Any], refs: Sequence[str]) -> tuple[str, bool]:
    if doc["role"] == "gold" or same_answer(doc.get("answer"), list(refs)):
        return "<reference>", True
    ans = normalize_answer(doc.get("answer"))
    return (ans or f"<unlabelled:{doc['doc_id']}>"), False


def _latest(docs: list[dict[str, Any]], refs: Sequence[str]) -> float:
    dated = [d for d in docs if d.get("date")]
    if not dated:
        return 0.0
    top = max(d["date"] for d in dated)
    tied = [_label(d, refs)[1] for d in dated if d["date"] == top]
    return sum(tied) / len(tied)


def heuristic_scores(documents: Sequence[dict[str, Any]], references: Sequence[str]) -> dict[str, float]:
    """The expected accuracy (0..1) of each heuristic on one context's documents."""
    docs = list(documents)
    votes = Counter(_label(d, references)[0] for d in docs)
    majority = 0.0
    if votes:
        best = max(votes.values())
        winners = [a for a, n in votes.items() if n == best]
        majority = winners.count("<reference>") / len(winners)
    real = [d for d in docs if not is_fictitious(d.get("url"))]
    return {
        "latest": _latest(docs, references),
        "majority": majority,
        "latest_real_domain": _latest(real, references),
    }


def audit(contexts: Iterable[Any], answers: dict[str, Sequence[str]]) -> pd.DataFrame:
    """One row per context and heuristic: ``question_id, dataset, condition, heuristic, score``.

    ``contexts`` are records from ``contexts.jsonl`` (dicts or :class:`trek.contexts.Context`);
    ``answers`` maps question id to its reference answers.
    """
    rows = []
    for c in contexts:
        rec = c if isinstance(c, dict) else c.model_dump()
        qid = rec["question_id"]
        if qid not in answers:
            raise KeyError(f"no reference answers for question {qid!r}")
        for h, s in heuristic_scores(rec["documents"], answers[qid]).items():
            rows.append({"question_id": qid, "dataset": rec["dataset"], "condition": rec["condition"],
                         "heuristic": h, "score": s})
    return pd.DataFrame(rows, columns=["question_id", "dataset", "condition", "heuristic", "score"])
