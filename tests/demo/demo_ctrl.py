"""The offline Ctrl demo: contexts from TrekBench-Mini, every baseline on every condition, graded.

    python tests/demo/demo_ctrl.py [--out build/demo-ctrl]

:func:`build_demo_ctrl` builds the Ctrl contexts from the bundled demo benchmark with the real
builder (fabrications from the scripted demo in ``tests/demo/demo_ctrl_build.py``), runs Direct, Rerank, Filter and Structured on the five
conditions and every ablation with the real runner, and grades every run with each dataset's
grader, all against :class:`~trek.testing.fake_openai.FakeOpenAIServer`. Only the model and the
judge are scripted, and the script is a fixed rule, not a measured behaviour:

* answering, the "model" gives the answer of the **latest-dated document among the first 6 it is
  shown** (undated documents are ignored; "unknown" when nothing is dated): the shortcut the
  paper's OO condition rewards, so the demo shows it failing under republication, relevance and
  swapped metadata, plus a crude position and length effect for the ablations;
* filtering, it drops the off-topic (relevance) documents and those shown on one of the five
  fictitious domains (so it cannot spot a republication once URLs are hidden);
* extracting evidence, it reports the answer of the latest-dated document that is not off topic,
  and the contrast step picks it.

The judge accepts exactly the reference answers (``demo_script`` in ``tests/demo/demo_runs.py``).
The numbers are **demo data, never a result**. Layout::

    OUT/contexts/{pools,contexts}.jsonl, build.json     the Ctrl build
    OUT/runs/demo-lm__<method>__<condition>/            one graded run per (method, condition)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

MODEL = "demo-lm"
READS = 6  # answering, the scripted model reads only this many documents of a context (at most 9)

_ANSWER_END = "=== END OF DOCUMENTS ==="
_FILTER_MARK = "Decide which documents to keep"
_EXTRACT_MARK = "Go through every document below"


def _doc_pattern(date: str, text: str, length: int) -> str:
    """A rendered document: its date line, an optional URL line, the first ``length`` characters
    of its text."""
    return re.escape(f"Date: {date}\n") + r"(?:Source URL: [^\n]*\n)?" + re.escape(text[:length])


def _distinct_prefixes(texts: list[str], least: int = 80) -> list[int]:
    """For each text, a prefix length that tells it from every other text of the list (a
    fabrication starts like the gold document it was made from)."""
    out = []
    for i, t in enumerate(texts):
        common = max((len(os.path.commonprefix([t, u])) for j, u in enumerate(texts) if j != i and u != t),
                     default=0)
        out.append(max(least, common + 40))
    return out


def _signature(ctx: Any) -> str:
    """A regex for one exact rendered context: each document's header and first 80 characters
    after it (date, URL when shown, start of text), in order."""
    from trek.contexts import Renderer

    r, parts = Renderer(), []
    for i, d in enumerate(ctx.documents, start=1):
        head = f"[Document {i}]\n"
        parts.append(re.escape((r.frame(i, d)[0] + d.text)[: len(head) + 80]))
    return "(?s:.*?)".join(parts)


def ctrl_script(contexts: list[dict[str, Any]], questions: dict[str, Any]) -> list[dict[str, Any]]:
    """Fake-server rules for the scripted Ctrl model (first match wins; see the module doc)."""
    from trek.contexts import Context
    from trek.ctrl.common import is_fictitious

    rules: list[dict[str, Any]] = []
    dated: dict[str, dict[tuple[str, str], tuple[str, str]]] = {}  # (date, text) -> (answer, role)
    answers: dict[str, set[str]] = {}
    for raw in contexts:
        rec = Context.model_validate(raw)
        q = questions[rec.question_id]
        # filter: drop off-topic (relevance) documents and documents shown on a fictitious domain
        keep = [i for i, d in enumerate(raw["documents"], start=1)
                if d["role"] != "relevance" and not is_fictitious(d.get("url"))]
        rules.append({"model": MODEL, "any_pattern": rf"{re.escape(_FILTER_MARK)}(?s:.*?){_signature(rec)}"
                      rf"(?s:.*)\nEffective year: [^\n]*\nQuestion: {re.escape(q.question)}",
                      "reply": json.dumps({"keep_document_ids": keep})})
        for d in rec.documents:
            if d.date and d.answer:
                dated.setdefault(q.id, {})[(d.date, d.text)] = (d.answer, d.role)
                answers.setdefault(q.id, set()).add(d.answer)
    for qid, by_text in dated.items():
        qtext = re.escape(questions[qid].question)
        texts = list(dict.fromkeys(t for _, t in by_text))
        length = dict(zip(texts, _distinct_prefixes(texts), strict=True))
        docs = {(date, _doc_pattern(date, t, length[t])): v for (date, t), v in by_text.items()}
        # every pattern starts with a literal, so rules of other questions fail after a quick scan
        for (_, pat), (ans, role) in sorted(docs.items(), key=lambda kv: kv[0][0], reverse=True):
            if role != "relevance":  # extraction sees through off-topic documents, not through dates
                record = [{"document_id": 1, "key_evidence": "latest dated document", "candidate_answer": ans,
                           "relation": "answers", "reason": "it is the latest dated"}]
                rules.append({"model": MODEL, "any_pattern": rf"Question: {qtext}\nTime frame: [^\n]*\n(?s:.*){pat}",
                              "reply": json.dumps(record)})
            # answering, it reads only the first READS documents (headed [Document 1] .. [Document READS])
            rules.append({"model": MODEL, "any_pattern": rf"\[Document [1-{READS}]\]\n{pat}(?s:.*)"
                          rf"{re.escape(_ANSWER_END)}\s*Effective year: [^\n]*\nQuestion: {qtext}", "reply": ans})
        for ans in sorted(answers[qid]):
            rules.append({"model": MODEL, "any_pattern": rf"Question: {qtext}\s*Extracted evidence:(?s:.*)"
                          + re.escape('"candidate_answer": ' + json.dumps(ans, ensure_ascii=False)),
                          "reply": f"#Contrast: the latest dated candidate wins.\n#Answer: {ans}"})
    rules.append({"model": MODEL, "any_pattern": re.escape(_FILTER_MARK), "reply": '{"keep_document_ids": []}'})
    rules.append({"model": MODEL, "any_pattern": re.escape(_EXTRACT_MARK), "reply": "[]"})
    rules.append({"model": MODEL, "any_pattern": "Extracted evidence:", "reply": "#Contrast: none.\n#Answer: unknown"})
    rules.append({"model": MODEL, "reply": "unknown"})
    return rules


def scripted_server(script: list[dict[str, Any]], questions: list[str]) -> Any:
    """The fake server with its rules grouped by the question text their patterns contain: a
    request is tried against the shared rules and those of the question it quotes, in script
    order, so it gets the same first match as a plain scan of every rule, without scanning the
    rules of the other questions (thousands of long regexes on the full Mini)."""
    from trek.testing.fake_openai import FakeOpenAIServer

    class Indexed(FakeOpenAIServer):
        def __init__(self, **kw: Any) -> None:
            super().__init__(**kw)
            keys = {q: re.escape(q) for q in questions}
            groups: dict[str | None, list[Any]] = {q: [] for q in questions}
            shared = []
            for rule in self.rules:
                src = "".join(p.pattern for p in (rule.pattern, rule.any_pattern) if p is not None)
                owner = next((q for q, k in keys.items() if k in src), None)
                (groups[owner] if owner is not None else shared).append(rule)
            order = {id(r): i for i, r in enumerate(self.rules)}
            self._groups = {q: sorted(shared + g, key=lambda r: order[id(r)]) for q, g in groups.items()}
            self._shared = shared

        def _pick_rule(self, model: str, texts: Any, tool_results: int, body: Any = None) -> Any:
            joined = "\n".join(texts)
            rules = next((g for q, g in self._groups.items() if q in joined), self._shared)
            for rule in rules:
                found = rule.groups(model, texts, tool_results, body)
                if found is not None:
                    return rule, found
            return None, {}

    return Indexed(script=script)


def build_demo_ctrl(out: Path, *, progress: bool = False) -> None:
    """Build, run and grade the Ctrl demo into ``out`` (rebuilt from scratch; a few seconds)."""
    from trek.contexts import read_contexts
    from trek.ctrl.pools import from_mini
    from trek.datasets import mini
    from trek.grading import grade_run
    from trek.llm import LLMCache, LLMClient
    from trek.rag import make_method
    from trek.rag.context import load_ctrl_questions
    from trek.rag.runner import run_ctrl
    from trek.types import iter_json_lines

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from demo_ctrl_build import build_with_demo_fabrications
    from demo_runs import JUDGE, demo_script  # the Wild demo's scripted judge

    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    ctx_dir, runs = out / "contexts", out / "runs"
    result = build_with_demo_fabrications(from_mini(), ctx_dir, source="mini")
    records = read_contexts(result.contexts_path)
    raw = [obj for _, obj in iter_json_lines(result.contexts_path)]
    questions = load_ctrl_questions(result.pools_path)
    conditions = list(dict.fromkeys(r.condition for r in records))
    bench = mini.load()
    judge_rules = [r for r in demo_script(bench.questions, bench) if r.get("model") == JUDGE]
    methods = {m: make_method(m) for m in ("direct", "rerank", "filter", "structured")}
    script = judge_rules + ctrl_script(raw, questions)
    with scripted_server(script, [q.question for q in questions.values()]) as srv:
        cache = LLMCache(runs / "llm-cache.sqlite")
        client = LLMClient(MODEL, base_url=srv.base_url, api_key="demo", cache=cache, progress=False)
        summary = run_ctrl(records, questions, runs, client, methods, conditions, progress=progress,
                           run_config={"demo": True, "contexts": "build/demo-ctrl/contexts/contexts.jsonl"})
        if summary.pending:
            raise RuntimeError(f"Ctrl demo: {summary.pending} answers pending: {summary.errors[:3]}")
        for rd in summary.runs:
            judge = LLMClient(JUDGE, base_url=srv.base_url, api_key="demo", cache=cache, progress=False)
            grade_run(rd, judge, progress=False)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="tests/demo/demo_ctrl.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="build/demo-ctrl", help="output folder [default: build/demo-ctrl]")
    a = ap.parse_args(argv)
    from trek.report.ctrl import ctrl_micro, load_ctrl

    out = Path(a.out)
    build_demo_ctrl(out)
    print(f"Ctrl demo runs written to {out / 'runs'}:")
    print(ctrl_micro(load_ctrl(out.resolve() / "runs")).to_string())


if __name__ == "__main__":
    main()
