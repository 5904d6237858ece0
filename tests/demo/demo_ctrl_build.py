"""An offline fabrication demo: TrekBench-Mini fabrications made through the scripted fake server.

A script, not part of the package (it drives :mod:`trek.testing`); ``tests/demo/demo_ctrl.py`` uses it.

:func:`demo_script` writes, from the demo benchmark's own labels, the replies a fabrication model
would give: the locate step returns the first sentence of a gold document that names the reference
answer, the edit step replaces that answer in the sentence with an answer an outdated (else
relevance) document supports, and the verifier accepts. The fabrications then go through the real
pipeline: HTTP to the fake server on loopback, the code checks (unique span, change, answer,
``wordllama`` similarity) and the retry loop. The result is **demo data**: it shows the format
and the diffs of Table 2, not what a real model writes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

from trek.ctrl.common import same_answer
from trek.ctrl.pools import Pool

__all__ = ["demo_script", "build_with_demo_fabrications"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _span(text: str, answers: Sequence[str]) -> tuple[str, str] | None:
    for sentence in _SENTENCE.split(text):
        for a in sorted(answers, key=len, reverse=True):
            if a and a in sentence and text.count(sentence) == 1:
                return sentence.strip(), a
    return None


def _wrong_answers(pool: Pool) -> list[str]:
    out: list[str] = []
    for d in pool.role("outdated") + pool.role("relevance"):
        a = d.supports_answer
        if a and not same_answer(a, pool.question.answers) and not same_answer(a, out):
            out.append(a)
    return out


def demo_script(pools: Sequence[Pool], target: int = 5) -> list[dict[str, Any]]:
    """Fake-server rules that fabricate from each pool's labels (see the module docstring)."""
    rules: list[dict[str, Any]] = []
    for p in pools:
        q = p.question
        wrong = _wrong_answers(p)
        golds = p.gold
        for slot in range(1, target + 1):
            gold = golds[(slot - 1) % len(golds)]
            found = _span(gold.text, q.answers)
            if found is None or slot > len(wrong):
                continue
            sentence, answer = found
            rules.append({"pattern": r"Copy, character for character[\s\S]*" + re.escape(gold.text[:60]),
                          "reply": json.dumps({"span": sentence})})
            edit = {"wrong_answer": wrong[slot - 1],
                    "replacements": [{"find": sentence, "replace": sentence.replace(answer, wrong[slot - 1])}]}
            rules.append({"pattern": r"Rewrite the passage[\s\S]*Question: " + re.escape(q.question)
                          + rf"\n[\s\S]*Variant: {slot} of",
                          "reply": json.dumps(edit)})
    rules.append({"pattern": "Check an edited passage",
                  "reply": json.dumps({"supports_declared_answer": True, "internally_consistent": True,
                                       "reason": "scripted demo verifier"})})
    return rules


def build_with_demo_fabrications(pools: Sequence[Pool], out: str | os.PathLike[str], **kw: Any):
    """:func:`trek.ctrl.build.build` with fabrications from the scripted fake server (offline)."""
    from trek.ctrl.build import build
    from trek.ctrl.fabrication import FabricationSettings
    from trek.llm.client import LLMClient
    from trek.testing.fake_openai import FakeOpenAIServer

    with FakeOpenAIServer(script=demo_script(pools)) as srv:
        client = LLMClient("scripted-demo", base_url=srv.base_url, api_key="sk-demo", progress=False,
                           max_retries=0)
        settings = kw.pop("fabrication_settings", None) or FabricationSettings(max_attempts=1)
        return build(pools, out, client=client, fabrication_settings=settings,
                     **{"source": "mini (scripted demo)", "fabricator": "model", **kw})
