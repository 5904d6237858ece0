"""Trace the offline demo runs with scripted judges: ``build_demo_trace(runs_dir)``.

    python tests/demo/demo_trace.py [build/demo-runs]

Every graded run under ``runs_dir`` (the demo runs of ``demo_runs.py``) is traced in place by the
real TrekTrace pipeline (:func:`trek.trace.trace_run`) over HTTP against
:class:`~trek.testing.fake_openai.FakeOpenAIServer`. Only the judges and the evaluated model's
probe answers are scripted, as a fixed function of the question's position (not of any measured
behaviour), so that the demo shows every label: the numbers are **demo data, never a result**.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from trek import runs
from trek.datasets import mini
from trek.llm import LLMCache, LLMClient
from trek.testing.fake_openai import FakeOpenAIServer
from trek.trace import RoleModel, trace_run

__all__ = ["DIAGNOSTIC", "ANALYSIS", "demo_trace_script", "build_demo_trace"]

DIAGNOSTIC = "demo-diagnostic-judge"
ANALYSIS = "demo-analysis-judge"


def _stale_answer(bench: mini.MiniBenchmark, qid: str) -> str:
    docs = [d for d in bench.documents_for(qid, "outdated") if d.supports_answer]
    return docs[-1].supports_answer if docs else "an older answer"


def demo_trace_script(bench: mini.MiniBenchmark, model: str) -> list[dict[str, Any]]:
    """Fake-server rules for the scripted judges and probe answers (first match wins)."""
    rules: list[dict[str, Any]] = []
    for i, q in enumerate(bench.questions):
        qt = re.escape(q.question)
        right, stale = q.answers[0], _stale_answer(bench, q.id)

        def rule(who: str, step: str, reply: dict[str, Any], extra: str = "", qt: str = qt) -> dict[str, Any]:
            return {"model": who, "any_pattern": rf"\[TrekTrace: {step}\][\s\S]*{qt}{extra}",
                    "reply": json.dumps(reply)}

        rules += [
            rule(ANALYSIS, "answer check", {"correct": True, "reason": "Same answer as the reference."},
                 rf"[\s\S]*Candidate answer: {re.escape(right)}\n"),
            rule(ANALYSIS, "answer check", {"correct": False, "reason": "A different answer from the reference."}),
            rule(DIAGNOSTIC, "key evidence", {"key_evidence": f"The gold pages give {right} for this question.",
                                               "gold_evidence_urls": q.gold_urls[:1]}),
            rule(DIAGNOSTIC, "evidence match", {
                "evidence_match": i % 4 == 0,
                "retrieved_key_evidence": f"A retrieved page also gives {right}." if i % 4 == 0 else "",
                "equivalent_urls": [], "reason": "Scripted demo judgment."}),
            rule(ANALYSIS, "query adequacy", {"query_adequate": (i // 2) % 2 == 0,
                                              "reason": "Scripted demo judgment of the queries."}),
            rule(DIAGNOSTIC, "stale reference check", {"supports_reference": i % 6 != 5,
                                                        "reason": "Scripted demo judgment."}),
            rule(model, "gold-only probe", {"answer": right if i % 5 != 3 else stale, "used_urls": q.gold_urls[:1],
                                            "reasoning": "Scripted demo answer."}),
            rule(model, "gold-plus-noise probe", {"answer": right if i % 2 == 0 else stale, "used_urls": [],
                                                  "reasoning": "Scripted demo answer."}),
        ]
    return rules


def build_demo_trace(runs_dir: Path, *, progress: bool = False) -> dict[str, Path]:
    """Trace every graded run under ``runs_dir`` in place; returns ``{label: run directory}``."""
    bench = mini.load()
    found = runs.discover(runs_dir, require=runs.GRADES)
    out: dict[str, Path] = {}
    for label, run_dir in found.items():
        meta = runs.read_meta(run_dir)
        model = (meta.model if meta else None) or "demo-lm"
        with FakeOpenAIServer(script=demo_trace_script(bench, model)) as srv:
            cache = LLMCache(run_dir / "llm-cache.sqlite")

            def role(name: str, m: str, srv: FakeOpenAIServer = srv, cache: LLMCache = cache) -> RoleModel:
                return RoleModel(name, LLMClient(m, base_url=srv.base_url, api_key="demo", cache=cache,
                                                 progress=False), m)

            report = trace_run(run_dir, diagnostic=role("diagnostic", DIAGNOSTIC),
                               analysis=role("analysis", ANALYSIS), evaluated=role("evaluated", model),
                               check_stale=True, progress=progress)
            cache.close()
        if report.pending:
            raise RuntimeError(f"demo trace {label}: {report.pending} case(s) pending")
        out[label] = run_dir
    return out


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("build/demo-runs")
    for label, d in build_demo_trace(target).items():
        recs = [json.loads(x) for x in (d / runs.TRACE).read_text().splitlines()]
        print(f"{label}: {len(recs)} traced case(s) -> {d / runs.TRACE}")
