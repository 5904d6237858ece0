"""End to end on the bundled benchmark: an agentic run over the local index (scripted evaluated
model on the fake server), graded and traced with ``--judge oracle``: no judge request reaches the
server (it counts them), every traced case runs every test it needs; then an audit judge answers
beside the exact one and ``trek judge audit`` compares them."""

from __future__ import annotations

import json
import re

import pytest
from _mini_run import agentic_run
from typer.testing import CliRunner

from trek import runs
from trek.audit import AUDIT_GRADING
from trek.cli import app
from trek.testing.fake_openai import FakeOpenAIServer
from trek.trace import load_trace

MODEL, AUDITOR = "lm", "auditor"
#: a wrong reply that names no value (a name the annotations lack would leave the exact judge undecided)
WRONG = "a wrong guess"
AGENTIC = "You have two tools"
#: question -> (search query or None, gold-only answer right?, noise answer right?)
PLAN = {
    "mini:01": ("Dana Okafor appointed head coach Harrowmere Rovers", True, True),
    "mini:03": ("weather in Harrowmere tomorrow", False, None),
    "mini:06": (None, True, False),
    # ranks the gold page 7th: below the 3 results the system read, within the adequacy cut-off
    "mini:19": ("Corvessa first-class letter stamp", True, True),
}
pytestmark = pytest.mark.slow


def script(bench) -> list[dict]:
    q = {x.id: x for x in bench.questions}
    rules: list[dict] = [
        # the audit judge: agrees that everything is right and adequate
        {"model": AUDITOR, "any_pattern": "evaluation: correct", "reply": "evaluation: correct"},
        {"model": AUDITOR, "any_pattern": "Gold target:", "reply": "A"},
        {"model": AUDITOR, "any_pattern": r"\[TrekTrace: answer check\]", "reply": json.dumps({"correct": True,
                                                                                              "reason": "same"})},
        {"model": AUDITOR, "any_pattern": r"\[TrekTrace: query adequacy\]",
         "reply": json.dumps({"query_adequate": True, "reason": "fine"})},
        {"model": AUDITOR, "any_pattern": r"\[TrekTrace: key evidence\]",
         "reply": json.dumps({"key_evidence": "a fact", "gold_evidence_urls": []})},
        {"model": AUDITOR, "any_pattern": r"\[TrekTrace: evidence match\]",
         "reply": json.dumps({"evidence_match": True, "retrieved_key_evidence": "x", "equivalent_urls": [],
                              "reason": "found"})},
        {"model": AUDITOR, "any_pattern": r"\[TrekTrace: stale reference check\]",
         "reply": json.dumps({"supports_reference": True, "reason": "still true"})},
    ]
    for qid, (query, g, n) in PLAN.items():
        qt = re.escape(q[qid].question)
        right = q[qid].answers[0]
        rules.append({"model": MODEL, "any_pattern": rf"\[TrekTrace: gold-only probe\][\s\S]*{qt}",
                      "reply": json.dumps({"answer": right if g else WRONG, "used_urls": [], "reasoning": "r"})})
        rules.append({"model": MODEL, "any_pattern": rf"\[TrekTrace: gold-plus-noise probe\][\s\S]*{qt}",
                      "reply": json.dumps({"answer": right if n else WRONG, "used_urls": [], "reasoning": "r"})})
        pat = rf"(?s){AGENTIC}.*{qt}"
        if query is not None:
            rules.append({"model": MODEL, "any_pattern": pat, "tool_results": 0,
                          "tool_calls": [{"name": "web_search", "arguments": {"query": query}}]})
        rules.append({"model": MODEL, "any_pattern": pat, "reply": WRONG})
    rules.append({"error": {"status": 400, "message": "an unscripted request (a judge?) reached the server"}})
    return rules


@pytest.fixture(scope="module")
def env(mini, tmp_path_factory):
    with FakeOpenAIServer(script=script(mini)) as srv:
        yield srv, agentic_run(mini, tmp_path_factory.mktemp("oracle") / "run", srv.base_url, MODEL, PLAN,
                               max_rounds=2)


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for var in ("TREK_CACHE", "TREK_PAGES", "TREK_PROMPTS", "OPENAI_BASE_URL", "TREK_JUDGE_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def invoke(*args):
    res = CliRunner().invoke(app, [str(a) for a in args])
    return res


def test_oracle_grades_and_traces_without_a_judge_request(env):
    srv, rd = env
    before = srv.stats()["requests"]
    res = invoke("grade", rd, "--judge", "oracle", "--dry-run")
    assert res.exit_code == 0 and "0 model calls, $0.00" in res.output and not (rd / runs.GRADES).exists()
    res = invoke("grade", rd, "--judge", "oracle", "--no-progress")
    assert res.exit_code == 0, res.output
    assert srv.stats()["requests"] == before  # grading made no request
    grades = runs.load_grades(rd)
    # FreshQA: incorrect; SealQA (mini:06): no answer given and none contradicted, not attempted
    assert {q: g.outcome for q, g in grades.items()} == {"mini:01": "incorrect", "mini:03": "incorrect",
                                                         "mini:06": "not_attempted", "mini:19": "incorrect"}
    assert {(g.method, g.grader, g.judge_model) for g in grades.values()} == {("exact", "exact", "oracle")}

    res = invoke("trace", rd, "--judge", "oracle", "--check-stale", "--no-progress", "--yes")
    assert res.exit_code == 0, res.output
    recs = {r.question_id: r for r in load_trace(rd)}
    probes = sum(s.role == "evaluated" for r in recs.values() for s in r.steps)
    assert srv.stats()["requests"] - before == probes  # only the evaluated model's probes were sent
    assert all(r.status == "done" for r in recs.values()), {q: r.skipped for q, r in recs.items()}
    judged = [s for r in recs.values() for s in r.steps if s.role != "evaluated"]
    assert judged and {(s.model, s.endpoint, s.status) for s in judged} == {("oracle", "exact://annotations", "ok")}
    assert recs["mini:01"].evidence_retrieved is True and recs["mini:01"].labels == ["Randomness"]
    assert recs["mini:03"].flags == "E=F Q=F G=F N=-"
    assert recs["mini:03"].labels == ["Pre-retrieval", "Interpretation"]
    assert recs["mini:06"].labels == ["Pre-retrieval", "Distraction"]
    assert recs["mini:19"].flags.startswith("E=F Q=T") and recs["mini:19"].labels == ["Retrieval"]
    adequacy = next(s for s in recs["mini:19"].steps if s.name == "query_adequacy")
    detail = json.loads(adequacy.raw[0])
    assert detail["missed"] == [] and detail["entity"]["names"] == "Corvessa"  # adequate by what it names
    assert detail["retrievable"]["best_rank"] > 3  # the diagnostic: the system read only 3 results
    assert all(r.stale_reference is False for r in recs.values())
    assert "exact" in recs["mini:01"].versions

    again = srv.stats()["requests"]
    assert invoke("trace", rd, "--judge", "oracle", "--check-stale", "--no-progress", "--yes").exit_code == 0
    assert srv.stats()["requests"] == again  # kept: nothing to redo


def test_an_audit_judge_answers_beside_the_exact_one(env):
    srv, rd = env
    invoke("grade", rd, "--judge", "oracle", "--no-progress")
    exact_grades = (rd / runs.GRADES).read_bytes()
    before = srv.stats()["requests"]
    res = invoke("grade", rd, "--judge", "oracle", "--audit-judge", AUDITOR, "--judge-base-url", srv.base_url,
                 "--no-progress")
    assert res.exit_code == 0, res.output
    assert (rd / runs.GRADES).read_bytes() == exact_grades  # the audit decides nothing
    audit = [json.loads(x) for x in (rd / AUDIT_GRADING).read_text().splitlines()]
    assert len(audit) == len(PLAN) and {a["judge_model"] for a in audit} == {AUDITOR}
    assert srv.stats()["requests"] - before == len(PLAN)

    res = invoke("trace", rd, "--judge", "oracle", "--audit-judge", AUDITOR, "--judge-base-url", srv.base_url,
                 "--check-stale", "--no-progress", "--yes")
    assert res.exit_code == 0, res.output
    recs = load_trace(rd)
    assert all(r.audit_steps for r in recs)
    for r in recs:
        exact_names = [s.name for s in r.steps if s.model == "oracle"]
        assert [s.name for s in r.audit_steps] == exact_names
        assert {s.model for s in r.audit_steps} == {AUDITOR}

    res = invoke("judge", "audit", rd)
    assert res.exit_code == 0, res.output
    assert "grading" in res.output and "gold_only" in res.output and "stale" in res.output


def test_a_run_with_questions_outside_the_annotations_is_refused(env, tmp_path):
    import shutil

    _, rd = env
    other = tmp_path / "other"
    shutil.copytree(rd, other)
    qs = list(runs.load_questions(other).values())
    runs.write_records(other, runs.QUESTIONS, [qs[0].model_copy(update={"id": qs[0].id}), *qs[1:],
                                               qs[0].model_copy(update={"id": "wild:1"})])
    t = next(iter(runs.load_answers(other).values()))
    runs.write_records(other, runs.ANSWERS, [*runs.load_answers(other).values(), t.model_copy(update={"question_id":
                                                                                                      "wild:1"})])
    res = invoke("grade", other, "--judge", "oracle", "--no-progress")
    assert res.exit_code == 2 and "'wild:1'" in res.output and "not in the annotations" in res.output


def test_ctrl_runs_graded_exactly_agree_with_the_scripted_outcomes(tmp_path, mini):
    """The scripted Ctrl model (tests/demo/demo_ctrl.py) is right on GOLD and misled by republications
    on SBA: the exact judge, from the contexts' annotations, says so without a judge request."""
    from _scripts import load_script

    from trek.rag.context import load_ctrl_questions
    from trek.report import ctrl as reports

    demo_ctrl = load_script("demo_ctrl")
    built = tmp_path / "ctrl"
    res = invoke("ctrl", "build", "--source", "mini", "--out", built, "--conditions", "SBA,GOLD", "--no-tokens")
    assert res.exit_code == 0, res.output
    raw = [json.loads(x) for x in (built / "contexts.jsonl").read_text().splitlines()]
    questions = load_ctrl_questions(built / "pools.jsonl")
    out = tmp_path / "runs"
    with demo_ctrl.scripted_server(demo_ctrl.ctrl_script(raw, questions), [q.question for q in questions.values()]) as srv:
        res = invoke("ctrl", "run", built / "contexts.jsonl", "--model", demo_ctrl.MODEL, "--base-url", srv.base_url,
                     "--runs", out, "--methods", "direct", "--conditions", "SBA,GOLD", "--judge", "oracle",
                     "--no-progress")
        assert res.exit_code == 0, res.output
        assert srv.stats()["requests"] == 2 * len(questions)  # the answers only: no judge request
    dirs = [d for d in out.iterdir() if d.is_dir()]
    assert len(dirs) == 2
    for d in dirs:
        grades = runs.load_grades(d)
        assert len(grades) == len(questions)
        assert {(g.grader, g.judge_model) for g in grades.values()} == {("exact", "oracle")}
        assert all("contexts contexts.jsonl" in g.judge_settings["annotations"] for g in grades.values())
    table = reports.ctrl_micro(reports.load_ctrl(out))
    assert (table["Gold-only"] == 100.0).all() and (table["SBA"] == 0.0).all()
