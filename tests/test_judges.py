"""Judges as parts (trek.judges): the registry, a judge kind declared in one file working in
grading and in tracing, the cascade, and ``undecided`` shown everywhere it is counted.

The run: four TrekBench-Mini questions answered by a scripted evaluated model on the fake server
(every answer wrong); the judges are the toy kinds of ``tests/_toy_judge.py``."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import _toy_judge  # noqa: F401  (registers the kinds toy and abstainer: the one file they live in)
import pytest
from _mini_run import agentic_run
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.judges import CascadeJudge, UnknownJudgeKind, known_kinds, make_judge, parse_spec
from trek.llm import LLMClient
from trek.roles import Role
from trek.testing.fake_openai import FakeOpenAIServer
from trek.trace import load_trace

ROOT = Path(__file__).resolve().parents[1]
MODEL = "lm"
WRONG = "Wrong Guess"
QUESTIONS = ("mini:01", "mini:03", "mini:06", "mini:19")
pytestmark = pytest.mark.slow


def script(bench) -> list[dict]:
    q = {x.id: x for x in bench.questions}
    rules: list[dict] = []
    for qid in QUESTIONS:
        qt = re.escape(q[qid].question)
        right = q[qid].answers[0]
        rules.append({"model": MODEL, "any_pattern": rf"\[TrekTrace: gold-only probe\][\s\S]*{qt}",
                      "reply": json.dumps({"answer": right, "used_urls": [], "reasoning": "r"})})
        rules.append({"model": MODEL, "any_pattern": rf"\[TrekTrace: gold-plus-noise probe\][\s\S]*{qt}",
                      "reply": json.dumps({"answer": WRONG, "used_urls": [], "reasoning": "r"})})
        rules.append({"model": MODEL, "any_pattern": rf"(?s)You have two tools.*{qt}", "reply": WRONG})
    rules.append({"error": {"status": 400, "message": "an unscripted request (a judge?) reached the server"}})
    return rules


@pytest.fixture(scope="module")
def env(mini, tmp_path_factory):
    with FakeOpenAIServer(script=script(mini)) as srv:
        yield srv, agentic_run(mini, tmp_path_factory.mktemp("judges") / "run", srv.base_url, MODEL, QUESTIONS,
                               max_rounds=1)


@pytest.fixture
def run(env, tmp_path):
    srv, rd = env
    copy = tmp_path / "run"
    shutil.copytree(rd, copy)
    return srv, copy


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for var in ("TREK_CACHE", "TREK_PAGES", "TREK_PROMPTS", "OPENAI_BASE_URL", "TREK_JUDGE_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


# -- the registry --------------------------------------------------------------------------------
def test_a_fresh_process_knows_the_built_in_and_the_named_kinds():
    code = "import trek.roles, trek.judges as j; print(','.join(j.known_kinds()))"
    env = {**os.environ, "TREK_JUDGES": str(ROOT / "tests" / "_toy_judge.py"), "PYTHONPATH": str(ROOT / "tests")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert {"exact", "oracle", "toy", "abstainer"} <= set(out.strip().split(","))
    env.pop("TREK_JUDGES")  # without the variable: the entry points alone (no module imported by name)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert set(out.strip().split(",")) == {"exact", "oracle"}


def test_an_unknown_kind_is_an_error_naming_the_known_ones(run):
    with pytest.raises(UnknownJudgeKind, match=r"no judge kind 'nope'.*exact.*toy"):
        make_judge(Role("judge", "kind:nope"), lambda r: pytest.fail("a kind became a model"))
    _, rd = run
    res = invoke("grade", rd, "--judge", "kind:nope", "--no-progress")
    assert res.exit_code == 2 and "no judge kind 'nope'" in res.output and "Traceback" not in res.output
    assert not (rd / runs.GRADES).exists()


def test_names_parse_into_kinds_models_and_cascades():
    assert parse_spec("exact") == [("kind", "exact")]
    assert parse_spec("gpt-4o") == [("model", "gpt-4o")]
    assert parse_spec("exact, model:toy") == [("kind", "exact"), ("model", "toy")]
    assert parse_spec("kind:toy,gpt-4o") == [("kind", "toy"), ("model", "gpt-4o")]
    with pytest.raises(ValueError, match="empty name"):
        parse_spec("exact,,gpt-4o")
    with pytest.raises(ValueError, match="named twice"):
        parse_spec("toy,toy")
    judge = make_judge(Role("judge", "abstainer,toy"), lambda r: pytest.fail("no model named"))
    assert isinstance(judge, CascadeJudge) and [j.model for j in judge.judges] == ["abstainer", "toy"]
    assert "toy" in known_kinds()


# -- a kind in one file, in grading and tracing ----------------------------------------------------------
def test_a_kind_declared_in_one_file_grades_and_traces(run):
    srv, rd = run
    res = invoke("grade", rd, "--judge", "toy", "--no-progress")
    assert res.exit_code == 0, res.output
    grades = runs.load_grades(rd)
    assert {(g.judge_model, g.grader, g.outcome) for g in grades.values()} == {("toy", "toy-rule", "incorrect")}
    before = srv.stats()["requests"]
    res = invoke("trace", rd, "--judge", "toy", "--no-progress", "--yes")
    assert res.exit_code == 0, res.output
    recs = load_trace(rd)
    assert len(recs) == len(QUESTIONS) and {r.status for r in recs} == {"done"}
    judged = [s for r in recs for s in r.steps if s.role != "evaluated"]
    assert judged and {s.model for s in judged} == {"toy"}
    probes = sum(s.role == "evaluated" for r in recs for s in r.steps)
    assert srv.stats()["requests"] - before == probes  # the toy judge sent nothing
    # the toy rule: gold-only right, noise wrong -> Distraction, whatever the retrieval side says
    assert all("Distraction" in r.labels for r in recs)


# -- undecided ----------------------------------------------------------------------------------------
def test_undecided_grades_are_counted_apart_and_exit_3(run):
    _, rd = run
    res = invoke("grade", rd, "--judge", "abstainer", "--no-progress")
    assert res.exit_code == 3, res.output
    assert "4 undecided" in res.output and "--judge exact,MODEL" in res.output
    assert "undecided" in res.stdout  # the accuracy table's own column (its count is checked below)
    assert all(g.outcome == "undecided" and g.correct is None for g in runs.load_grades(rd).values())
    from trek.analysis import accuracy_by_dataset

    t = accuracy_by_dataset(rd, ci=False)
    assert t.at["micro", "undecided"] == 4 and t.at["micro", "graded"] == 0 and t.at["micro", "correct"] == 0
    res = invoke("trace", rd, "--judge", "toy", "--no-progress", "--yes")
    assert res.exit_code == 3 and "4 grade(s) are undecided" in res.output


def test_undecided_trace_verdicts_leave_cases_incomplete(run):
    _, rd = run
    assert invoke("grade", rd, "--judge", "toy", "--no-progress").exit_code == 0
    res = invoke("trace", rd, "--judge", "abstainer", "--no-progress", "--yes")
    assert res.exit_code == 3, res.output
    assert "judge verdict(s) undecided" in res.output
    recs = load_trace(rd)
    assert {r.status for r in recs} == {"incomplete"}
    for r in recs:
        assert any(v.startswith("judge undecided: abstainer") for v in r.skipped.values()), r.skipped
        assert "Distraction" not in r.labels and "Randomness" not in r.labels  # C.4 never labels from it
        assert any(s.status == "undecided" and s.error for s in r.steps)


def test_a_cascade_hands_on_only_what_the_first_left_undecided(run):
    _, rd = run
    res = invoke("grade", rd, "--judge", "abstainer,toy", "--no-progress")
    assert res.exit_code == 0, res.output
    for g in runs.load_grades(rd).values():
        assert g.judge_model == "toy" and g.outcome == "incorrect"
        assert g.judge_settings["cascade"] == [{"judge": "abstainer", "outcome": "undecided"},
                                               {"judge": "toy", "outcome": "incorrect"}]
    res = invoke("trace", rd, "--judge", "abstainer,toy", "--no-progress", "--yes")
    assert res.exit_code == 0, res.output
    recs = load_trace(rd)
    assert {r.status for r in recs} == {"done"}
    judged = [s for r in recs for s in r.steps if s.role != "evaluated"]
    assert {s.model for s in judged} == {"toy"}
    assert all(s.cascade == [{"judge": "abstainer", "status": "undecided"}, {"judge": "toy", "status": "ok"}]
               for s in judged)


# -- no branch on the kind of judge --------------------------------------------------------------
#: The modules that are the exact judge (they may name it).
EXACT_MODULES = {"trek/exact.py", "trek/trace/exact.py", "trek/graders/exact.py", "trek/graders/exact_rules.py"}
KIND_NAMES = {"oracle", "exact"}


def _kind_branches(path: Path) -> list[str]:
    """``isinstance(x, ExactJudge)``, ``is_exact(...)`` and comparisons with a judge kind's name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
            if name == "is_exact" or (name == "isinstance" and len(node.args) == 2
                                      and "ExactJudge" in ast.unparse(node.args[1])):
                found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.Compare):
            # a judge kind's name held against a live judge or role (its model, its kind, its
            # class): records' own fields (a grade's grader) and other roles' kinds are not judges
            parts = [node.left, *node.comparators]
            names_kind = any(isinstance(p, ast.Constant) and p.value in KIND_NAMES for p in parts) or any(
                isinstance(p, ast.Name | ast.Attribute) and ast.unparse(p).split(".")[-1] in ("ORACLE", "EXACT")
                for p in parts)
            about_judge = any(re.search(r"judge|client|role|\bwho\b|\.model\b|\.kind\b|__class__",
                                        ast.unparse(p)) for p in parts if not isinstance(p, ast.Constant))
            if names_kind and about_judge:
                found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_branch_outside_the_exact_judge_asks_which_kind_it_holds():
    hits = []
    for path in sorted((ROOT / "trek").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel not in EXACT_MODULES:
            hits += _kind_branches(path)
    assert hits == []


def test_the_branch_check_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(judge, role, g):\n    if role.model == 'oracle':\n        return 1\n"
                   "    if judge.kind == EXACT or g.grader == 'exact':\n        return 2\n"
                   "    return isinstance(judge, ExactJudge)\n", encoding="utf-8")
    assert len(_kind_branches(bad)) == 3  # the grade's own field is a record, not a judge


# -- the dry run plays the schedule ---------------------------------------------------------------
def test_a_probe_added_by_a_schedule_entry_is_estimated(run, monkeypatch):
    from trek import templates
    from trek.trace import parts

    # the toy's registrations last for this test only (as in test_trace_pipeline)
    monkeypatch.setattr(templates, "_registry", dict(templates._registry))
    monkeypatch.setattr(parts, "_TESTS", dict(parts._TESTS))
    monkeypatch.delitem(sys.modules, "_toy_probe", raising=False)
    import _toy_probe  # noqa: F401  (registers the toy probe names_year, one module)

    from trek.llm.usage import Price, PriceTable
    from trek.trace.common import RoleModel
    from trek.trace.estimate import estimate_trace
    from trek.trace.schedule import SCHEDULE, Entry, with_entry

    _, rd = run
    assert invoke("grade", rd, "--judge", "toy", "--no-progress").exit_code == 0
    prices = PriceTable({"d": Price(1.0, 1.0), "a": Price(1.0, 1.0), MODEL: Price(1.0, 1.0)})

    def role(name, model):  # an endpoint nobody listens on: the estimate sends nothing
        return RoleModel(name, LLMClient(model, base_url="http://127.0.0.1:9/v1", progress=False, prices=prices), model)

    kw = dict(diagnostic=role("diagnostic", "d"), analysis=role("analysis", "a"), evaluated=role("evaluated", MODEL))
    plain = estimate_trace(rd, **kw)
    more = estimate_trace(rd, **kw, schedule=with_entry(SCHEDULE, Entry("names_year")))
    analysis = {e.label: e for e in plain.parts}["trek trace, analysis role"]
    analysis_more = {e.label: e for e in more.parts}["trek trace, analysis role"]
    cases = len(QUESTIONS)
    # the toy probe asks the analysis judge once a case, on every path
    assert analysis_more.calls == (analysis.calls[0] + cases, analysis.calls[1] + cases)
    assert analysis_more.input_tokens[0] > analysis.input_tokens[0]
    # the schedule's own branches: queries only when evidence was not matched, noise only after a
    # right gold-only answer; the low path of a case asks the evaluated model once, the high twice
    evaluated = {e.label: e for e in plain.parts}["trek trace, evaluated role"]
    assert evaluated.calls == (cases, 2 * cases)


def test_a_cascade_estimate_counts_only_what_reaches_the_model(run):
    from trek.grading import estimate_grading

    srv, rd = run

    def judge(spec):
        return make_judge(Role("judge", spec), lambda r: LLMClient(r.model, base_url=srv.base_url, progress=False))

    before = srv.stats()["requests"]
    assert estimate_grading(rd, judge("abstainer,judge-model")).calls == (4, 4)  # every grade handed on
    assert estimate_grading(rd, judge("toy,judge-model")).calls == (0, 0)  # the toy rule decides them all
    assert estimate_grading(rd, judge("judge-model")).calls == (4, 4)
    assert srv.stats()["requests"] == before  # an estimate sends nothing


def test_an_audit_judge_is_asked_beside_what_a_cascade_decided_alone(run):
    srv, rd = run
    res = invoke("grade", rd, "--judge", "abstainer,toy", "--audit-judge", "auditor", "--audit-judge-base-url",
                 srv.base_url, "--no-progress")
    assert res.exit_code == 0, res.output
    from trek.audit import AUDIT_GRADING

    # the toy judge decided every grade alone (the abstainer handed them all on): each is audited
    assert len((rd / AUDIT_GRADING).read_text().splitlines()) == len(QUESTIONS)
    res = invoke("grade", rd, "--judge", "judge-model", "--judge-base-url", srv.base_url, "--audit-judge", "auditor",
                 "--no-progress")
    assert res.exit_code == 2 and "decides without a model" in res.output


def test_a_cascade_in_the_trace_estimate_may_call_its_model_or_not(run):
    from trek.llm.usage import Price, PriceTable
    from trek.trace.common import RoleModel
    from trek.trace.estimate import estimate_trace

    _, rd = run
    assert invoke("grade", rd, "--judge", "toy", "--no-progress").exit_code == 0
    prices = PriceTable({"jm": Price(1.0, 1.0), MODEL: Price(1.0, 1.0)})
    model = LLMClient("jm", base_url="http://127.0.0.1:9/v1", progress=False, prices=prices)
    cascade = make_judge(Role("judge", "toy,jm"), lambda r: model)
    plain = {e.label: e for e in estimate_trace(
        rd, diagnostic=RoleModel("diagnostic", model, "jm"), analysis=RoleModel("analysis", model, "jm"),
        evaluated=RoleModel("evaluated", LLMClient(MODEL, base_url="http://127.0.0.1:9/v1", progress=False,
                                                   prices=prices), MODEL)).parts}
    both = {e.label: e for e in estimate_trace(
        rd, diagnostic=RoleModel("diagnostic", cascade, "toy,jm"), analysis=RoleModel("analysis", cascade, "toy,jm"),
        evaluated=RoleModel("evaluated", LLMClient(MODEL, base_url="http://127.0.0.1:9/v1", progress=False,
                                                   prices=prices), MODEL)).parts}
    for role in ("diagnostic", "analysis"):  # (here the diagnostic judge is never needed: gold URLs retrieved)
        label = f"trek trace, {role} role"
        assert both[label].calls == (0, plain[label].calls[1])
    assert plain["trek trace, analysis role"].calls[0] > 0  # a model judge is sure to be asked the probe verdicts


def test_every_judge_question_declares_its_exact_decision_once():  # the built-in tests and any a test added
    from trek.trace import schedule  # noqa: F401  (registers every TrekTrace test)
    from trek.trace.exact import ExactTrace
    from trek.trace.parts import registered_tests

    asked = {jq.name: jq for t in registered_tests().values() for jq in t.questions if jq.role != "evaluated"}
    assert {"key_evidence", "evidence_match", "query_adequacy", "grade", "stale_reference"} <= set(asked)
    for name, jq in asked.items():
        if jq.template.startswith("trace.toy"):  # the toy probe of another test declares none: a model answers it
            assert jq.exact is None
            continue
        assert jq.exact and callable(getattr(ExactTrace, jq.exact, None)), name


def test_the_built_in_kinds_are_the_declared_entry_points():
    import tomllib

    from trek.judges import BUILTIN, ENTRY_POINTS

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]
    assert declared[ENTRY_POINTS] == BUILTIN
