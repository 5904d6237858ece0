"""Scripted judges for the example logs of ``examples/`` (the Responses example's model and two
judges), shared by the trace-export and trace-server tests: the Harbor Bridge answer is wrong, the
others right, and its trace gives Retrieval and Distraction."""

from __future__ import annotations

import json

EVALUATED = "gpt-5-mini-2025-08-07"  # the model the Responses example names


def script() -> list[dict]:
    def rule(model: str, step: str, reply: dict, extra: str = "") -> dict:
        return {"model": model, "any_pattern": rf"\[TrekTrace: {step}\]{extra}", "reply": json.dumps(reply)}

    return [
        {"model": "gpt-4.1-mini", "pattern": r"(?s)Harbor Bridge.*Answer to grade: The Harbor Bridge has four",
         "reply": "It names four lanes; the reference says six.\nverdict: incorrect"},
        {"model": "gpt-4.1-mini", "reply": "verdict: correct"},
        rule("gpt-5.4", "answer check", {"correct": True, "reason": "Same as the reference."},
             r"[\s\S]*Candidate answer: six\n"),
        rule("gpt-5.4", "answer check", {"correct": False, "reason": "Not the reference."}),
        rule("gpt-5.4", "key evidence", {"key_evidence": "The bridge opened with six lanes.",
                                          "gold_evidence_urls": ["https://harbor-city.example/bridge-opening"]}),
        rule("gpt-5.4", "evidence match", {"evidence_match": False, "retrieved_key_evidence": "",
                                            "equivalent_urls": [], "reason": "The plans page gives four lanes."}),
        rule("gpt-5.4", "query adequacy", {"query_adequate": True, "reason": "It asks for the lane count."}),
        rule(EVALUATED, "gold-only probe", {"answer": "six", "used_urls": [], "reasoning": "The page says six."}),
        rule(EVALUATED, "gold-plus-noise probe", {"answer": "four", "used_urls": [], "reasoning": "Old plans."}),
    ]
