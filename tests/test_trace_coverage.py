"""TrekTrace honours what a log could observe (issue: "TrekTrace on anyone's agent"): queries the
log does not show never give Pre-retrieval, results seen only through citations make a negative
retrieval test a lower bound, redirect links skip URL identity. Imported example logs, graded and
traced against scripted judges on the fake server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trek.cli import app
from trek.testing.fake_openai import FakeOpenAIServer
from trek.trace.pipeline import load_trace

pytestmark = pytest.mark.slow

EX = Path(__file__).resolve().parents[1] / "examples"
Q = ["--questions", str(EX / "questions.csv"), "--map",
     "id=qid,question=text,answers=gold,gold_urls=sources,effective_year=year"]


def script() -> list[dict]:
    def rule(step: str, reply: dict) -> dict:
        return {"any_pattern": rf"\[TrekTrace: {step}\]", "reply": json.dumps(reply)}

    return [
        {"model": "grader-m", "reply": "verdict: incorrect"},  # every answer fails: every case is traced
        rule("answer check", {"correct": True, "reason": "Same as the reference."}),
        rule("key evidence", {"key_evidence": "The reference answer.", "gold_evidence_urls": []}),
        rule("evidence match", {"evidence_match": False, "retrieved_key_evidence": "", "equivalent_urls": [],
                                "reason": "Not in the supplied pages."}),
        rule("query adequacy", {"query_adequate": False, "reason": "Off target."}),
        rule("gold-only probe", {"answer": "x", "used_urls": [], "reasoning": "From the page."}),
        rule("gold-plus-noise probe", {"answer": "x", "used_urls": [], "reasoning": "From the page."}),
    ]


def traced(tmp_path, fmt: str, src: str) -> list:
    run = tmp_path / fmt
    r = CliRunner()
    assert r.invoke(app, ["import", fmt, str(EX / src), *Q, "--out", str(run)]).exit_code == 0
    assert r.invoke(app, ["pages", "add", str(run), str(EX / "pages.jsonl")]).exit_code == 0
    with FakeOpenAIServer(script=script()) as srv:
        res = r.invoke(app, ["grade", str(run), "--judge", "grader-m", "--grader", "generic", "--judge-base-url",
                             srv.base_url, "--no-progress"])
        assert res.exit_code == 0, res.output
        res = r.invoke(app, ["trace", str(run), "--judge", "judge-m", "--judge-base-url", srv.base_url,
                             "--model", "eval-m", "--base-url", srv.base_url, "--no-progress"])
        assert res.exit_code in (0, 3), res.output
    return load_trace(run), res.output


def test_queries_the_log_does_not_show_never_give_pre_retrieval(tmp_path):
    recs, out = traced(tmp_path, "chat-completions", "chat-completions.jsonl")
    assert recs
    for r in recs:
        assert "Pre-retrieval" not in r.labels and "Retrieval" not in r.labels
        assert r.coverage is not None and r.coverage.queries == "none"
        if r.evidence_retrieved is not True:  # the query test was needed and could not run
            assert r.tests["queries"].state == "skipped" and r.tests["queries"].reason == "queries not recorded"
            assert r.status == "incomplete"
            assert not any(s.name == "query_adequacy" for s in r.steps)  # no judge asked about unseen queries
    assert "queries none, results cited_only" in out


def test_results_seen_only_through_citations_make_a_negative_a_lower_bound(tmp_path):
    recs, out = traced(tmp_path, "chat-completions", "chat-completions.jsonl")
    bridge = next(r for r in recs if r.question_id == "lake-2")  # cites only the old plans page
    assert bridge.evidence_retrieved is False and bridge.evidence_lower_bound
    assert any("lower bound" in n for n in bridge.coverage_notes)
    assert "retrieval test is a lower bound" in out


def test_redirect_links_skip_url_identity_and_the_evidence_test_decides(tmp_path):
    recs, _ = traced(tmp_path, "gemini", "gemini.json")
    redirected = [r for r in recs if r.coverage is not None and r.coverage.url_identity == "redirects"]
    assert redirected
    for r in redirected:
        assert all(m.matched_url is None for m in r.url_matches)
        assert r.retrieval_basis != "url-identity"
        assert any("URL identity not checked" in n for n in r.coverage_notes)


def test_a_full_log_is_traced_as_before(tmp_path):
    recs, _ = traced(tmp_path, "inspect-ai", "inspect-ai.eval")
    assert all(r.coverage is None or r.coverage.queries != "none" for r in recs)
    assert any(r.status == "done" for r in recs)


def test_tables_count_the_lower_bound_cases(tmp_path):
    from trek.report.trace import label_shares

    recs, _ = traced(tmp_path, "openai-responses", "openai-responses.jsonl")
    bounded = [r for r in recs if r.status == "done" and r.evidence_lower_bound]
    assert bounded  # a Responses log without action.sources shows results only through citations
    table = label_shares({"responses": tmp_path / "openai-responses"})
    assert table.loc[("responses", "all"), "lower_bound"] == len(bounded)
