"""A constructed trek/mini run for the inspect tests: six Mini questions, each with the agent's
query, its final answer and the evaluated model's two probe answers, scripted on the fake OpenAI
server so that every TrekTrace label occurs under the exact judge (results per search
``RESULTS``; the exact query test reads the queries, it does not search)."""

from __future__ import annotations

import json
import re

MODEL = "openai-api/fake/fake-model"
#: results per search in the constructed log
RESULTS = 2

#: question id -> (a word of its question, the agent's query, its final answer, gold-only answer,
#: gold-plus-noise answer): built so that every TrekTrace label occurs (see test_every_label_occurs)
PLAN = {
    "mini:01": ("Brackwater Lane", "coach", "Nobody in particular", "Dana Okafor", "Tomas Reyel"),  # an annotated older coach
    "mini:02": ("Skylark e-bike", "zzzz qqqq", "Nobody in particular", "Nobody in particular", "Nobody"),
    "mini:03": ("Quellbridge Airport", "17", "Nobody in particular", "17", "17"),
    "mini:04": ("Vellacott International", "Vellacott International airline passengers 2023",  # adequate; gold ranks 5th
                "Nobody in particular", "Tarnlight Air", "Corrivale Air"),  # an annotated competitor
    "mini:05": ("Brenmoor Ferry", "Which company acquired the Brenmoor Ferry Company in", "Calloway Marine Group",
                "Calloway Marine Group", "Calloway Marine Group"),
    "mini:06": ("directly ele", "Quellbridge mayor", "4", "4", "4"),
}


def _probe(answer: str) -> str:
    return json.dumps({"answer": answer, "used_urls": [], "reasoning": "From the pages."})


def script() -> list[dict]:
    rules = []
    for word, query, final, gold_only, noise in PLAN.values():
        w = re.escape(word)
        rules += [
            {"any_pattern": rf"gold-only probe\][\s\S]*Question: [^\n]*{w}", "reply": _probe(gold_only)},
            {"any_pattern": rf"gold-plus-noise probe\][\s\S]*Question: [^\n]*{w}", "reply": _probe(noise)},
            {"tool_results": 0, "any_pattern": rf"Use the search tool[\s\S]*{w}",
             "tool_calls": [{"name": "search", "arguments": {"query": query}}]},
            {"tool_results": 1, "any_pattern": rf"Use the search tool[\s\S]*{w}", "reply": final},
        ]
    return rules
