"""The Ctrl grid runner: run directories, resume, cache, pending, settings, dry run, CLI."""

import hashlib
import json
import re

import pytest
from _rag_fixtures import mini_contexts, write_contexts
from _scripts import load_script
from typer.testing import CliRunner

from trek import runs as R
from trek.cli import app
from trek.contexts import read_contexts
from trek.grading import grade_run
from trek.llm.client import FatalLLMError, LLMClient
from trek.rag import make_method
from trek.rag.context import load_ctrl_questions
from trek.rag.rerank import Rerank
from trek.rag.runner import plan_grid, run_ctrl, run_label
from trek.testing.fake_openai import FakeOpenAIServer

_demo = load_script("demo_runs")
JUDGE, demo_script = _demo.JUDGE, _demo.demo_script

MAIN = ["OO", "MND", "SAA", "SBA", "GOLD"]
QIDS = ["mini:01", "mini:02", "mini:03"]


class WordScorer:
    """A fast, offline relevance stand-in: shared lower-case words with the query."""

    name = "words"
    calls = 0

    async def ascore(self, query, texts):
        q = set(re.findall(r"\w+", query.lower()))
        return [float(len(q & set(re.findall(r"\w+", t.lower())))) for t in texts]


def script(bench, questions, fail=None):
    """Scripted model: right on the first question, stale on the others; judge accepts references."""
    rules = [r for r in demo_script(bench.questions, bench) if r.get("model") == JUDGE]
    if fail:
        rules.append({"model": "m", "any_pattern": fail, "error": {"status": 500, "message": "down"}})
    rules += [
        {"model": "m", "any_pattern": "Decide which documents to keep", "reply": '{"keep_document_ids": [1, 2, 99]}'},
        {"model": "m", "any_pattern": "Go through every document below",
         "reply": '[{"document_id": 1, "candidate_answer": "c", "relation": "answers"}]'},
    ]
    for i, q in enumerate(questions):
        reply = q.answers[0] if i == 0 else "a stale answer"
        rules.append({"model": "m", "any_pattern": "(?s)Extracted evidence:.*", "pattern": re.escape(q.question),
                      "reply": f"#Contrast: c\n#Answer: {reply}"})
        rules.append({"model": "m", "pattern": re.escape(q.question), "reply": reply})
    return rules


@pytest.fixture
def ctrl(tmp_path, mini):
    qs = [q for q in mini.questions if q.id in QIDS]
    (tmp_path / "ctx").mkdir()
    path = write_contexts(tmp_path / "ctx" / "contexts.jsonl", mini_contexts(mini, QIDS), qs)
    return path, qs


def methods():
    return {"direct": make_method("direct"), "rerank": Rerank(scorer=WordScorer()),
            "filter": make_method("filter"), "structured": make_method("structured")}


def run(path, runs, srv, **kw):
    client = LLMClient("m", base_url=srv.base_url, api_key="k", max_retries=0, cache=runs / "llm-cache.sqlite")
    records = read_contexts(path)
    return run_ctrl(records, load_ctrl_questions(path.parent / "questions.jsonl"), runs, client,
                    kw.pop("methods", None) or methods(), kw.pop("conditions", MAIN), progress=False, **kw)


def test_grid_writes_standard_runs_graded_and_a_second_run_makes_no_calls(ctrl, tmp_path, mini):
    path, qs = ctrl
    runs = tmp_path / "runs"
    with FakeOpenAIServer(script=script(mini, qs)) as srv:
        s = run(path, runs, srv)
        assert (s.total, s.ok, s.pending, s.skipped) == (17 * 3, 51, 0, 0)
        labels = sorted(p.name for p in runs.iterdir() if p.is_dir())
        assert len(labels) == 17 and run_label("m", "direct", "GOLD") in labels
        assert run_label("m", "filter", "GOLD") not in labels  # gold-only is Direct on GOLD
        for rd in s.runs:
            grade_run(rd, LLMClient(JUDGE, base_url=srv.base_url, api_key="k", cache=runs / "llm-cache.sqlite"),
                      progress=False)
        calls = srv.stats()["requests"]
        again = run(path, runs, srv)
        assert srv.stats()["requests"] == calls and again.skipped == again.total == 51
        assert again.usage.calls == 0
    df = R.frame(runs / run_label("m", "structured", "SAA"))
    assert df["correct"].tolist() == [True, False, False] and df["answer_status"].eq("ok").all()
    meta = R.read_meta(runs / run_label("m", "rerank", "SBA"))
    assert meta.kind == "ctrl" and meta.config["condition"] == "SBA" and meta.config["settings"]["sigma_days"] == 365
    assert meta.config["settings"]["combine"] == "product" and "rag.answer" in meta.prompt_versions
    assert sorted(R.discover(runs)) == labels and list(R.discover(runs))[0] == run_label("m", "direct", "OO")
    filt = R.load_answers(runs / run_label("m", "filter", "OO"))["mini:01"]
    assert filt.details["dropped_ids"] == {"out_of_range": [99]} and filt.details["kept_ids"] == [1, 2]
    assert filt.details["context_sha256"] and [m["call"] for m in filt.messages] == ["filter", "answer"]


def test_failed_calls_leave_questions_pending_and_a_rerun_finishes_only_them(ctrl, tmp_path, mini):
    path, qs = ctrl
    runs = tmp_path / "runs"
    broken = "(?s)Decide which documents to keep.*" + re.escape(qs[1].question)
    with FakeOpenAIServer(script=script(mini, qs, fail=broken)) as srv:
        s = run(path, runs, srv, methods={"filter": make_method("filter")}, conditions=["OO", "MND"])
    assert (s.ok, s.pending) == (4, 2) and "500" in s.errors[0]
    pending = R.load_answers(runs / run_label("m", "filter", "OO"))[qs[1].id]
    assert pending.status == "pending" and pending.final_answer is None
    with FakeOpenAIServer(script=script(mini, qs)) as srv:
        s = run(path, runs, srv, methods={"filter": make_method("filter")}, conditions=["OO", "MND"])
        assert (s.ok, s.pending, s.skipped) == (6, 0, 4)
        # two pending answers x (filter + answer); both keep documents 1-2, which OO and MND share
        # here, so the second answer prompt is the first one again and comes from the cache
        assert s.usage.calls == 4 and srv.stats()["requests"] == 3


def test_other_settings_in_the_same_folder_are_refused_and_changed_contexts_are_redone(ctrl, tmp_path, mini):
    path, qs = ctrl
    runs = tmp_path / "runs"
    with FakeOpenAIServer(script=script(mini, qs)) as srv:
        run(path, runs, srv, methods={"rerank": Rerank(scorer=WordScorer())}, conditions=["OO"])
        with pytest.raises(ValueError, match="other settings"):
            run(path, runs, srv, methods={"rerank": Rerank(scorer=WordScorer(), sigma_days=30)}, conditions=["OO"])
        recs = [json.loads(x) for x in path.read_text().splitlines()]
        first = next(r for r in recs if r["condition"] == "OO")
        first["rendered"] = first["rendered"].replace("[Document 1]\n", "[Document 1]\nDate: 1999-01-01\n", 1)
        first["sha256"] = hashlib.sha256(first["rendered"].encode()).hexdigest()
        path.write_text("".join(json.dumps(r) + "\n" for r in recs))
        s = run(path, runs, srv, methods={"rerank": Rerank(scorer=WordScorer())}, conditions=["OO"])
        assert (s.skipped, s.ok) == (2, 3)


def test_unknown_condition_or_missing_question_is_an_error(ctrl, tmp_path, mini):
    path, qs = ctrl
    with FakeOpenAIServer() as srv, pytest.raises(ValueError, match="no context for condition"):
        run(path, tmp_path / "r", srv, conditions=["OO:k=5"])
    with pytest.raises(ValueError, match="unknown method"):
        plan_grid("m", ["hyde"], ["OO"], tmp_path)


def test_cli_dry_run_prints_the_grid_and_the_call_count(ctrl, tmp_path):
    path, _ = ctrl
    res = CliRunner().invoke(app, ["ctrl", "run", str(path), "--model", "gpt-x", "--runs", str(tmp_path / "r"),
                                   "--dry-run", "--rerank-scorer", "wordllama"])
    assert res.exit_code == 0, res.output
    # per question: direct 1 + rerank 1 + filter 2 + structured 2 on OO, MND, SAA, SBA; direct on GOLD
    assert "17 runs, 51 answers to make, 75 model calls" in res.output
    assert "gpt-x__structured__SBA" in res.output
    bad = CliRunner().invoke(app, ["ctrl", "run", str(path), "--model", "m", "--runs", str(tmp_path / "r"),
                                   "--methods", "hyde", "--dry-run"])
    assert bad.exit_code == 2 and "unknown method" in bad.output


def test_cli_runs_grades_and_exits_3_while_pending(ctrl, tmp_path, mini, monkeypatch):
    import trek.llm.client as llm_client

    timeouts = []  # the judge's client gets --timeout like the model's

    def spy(model, **kw):
        timeouts.append((model, kw.get("timeout")))
        return LLMClient(model, **kw)

    monkeypatch.setattr(llm_client, "LLMClient", spy)  # trek.cli.ctrl_run imports it when run
    path, qs = ctrl
    runs = tmp_path / "r"
    args = ["ctrl", "run", str(path), "--model", "m", "--runs", str(runs), "--methods", "direct",
            "--conditions", "OO,GOLD", "--judge", JUDGE, "--max-retries", "0", "--no-progress"]
    with FakeOpenAIServer(script=script(mini, qs, fail=re.escape(qs[2].question))) as srv:
        res = CliRunner().invoke(app, [*args, "--base-url", srv.base_url, "--judge-base-url", srv.base_url])
    assert res.exit_code == 3, res.output
    timeouts.clear()
    with FakeOpenAIServer(script=script(mini, qs)) as srv:
        res = CliRunner().invoke(app, [*args, "--base-url", srv.base_url, "--judge-base-url", srv.base_url,
                                       "--timeout", "33"])
        assert res.exit_code == 0, res.output
    assert {m for m, _ in timeouts} == {"m", JUDGE} and {t for _, t in timeouts} == {33.0}
    df = R.frame(runs / run_label("m", "direct", "GOLD"))
    assert df["outcome"].tolist() == ["correct", "incorrect", "incorrect"]


def test_cli_prints_the_accuracy_grid_and_grades_custom_questions_generically(ctrl, tmp_path, mini):
    path, qs = ctrl
    custom = tmp_path / "custom.jsonl"  # the questions as `trek import` leaves them: dataset custom, no grader
    custom.write_text("".join(json.dumps({**q.model_dump(mode="json", exclude={"grader"}), "dataset": "custom"}) + "\n"
                              for q in qs))
    judge = [{"model": "j", "pattern": "a stale answer", "reply": "verdict: incorrect"},
             {"model": "j", "reply": "verdict: correct"}]
    args = ["ctrl", "run", str(path), "--model", "m", "--runs", str(tmp_path / "r"), "--methods", "direct,structured",
            "--conditions", "OO,GOLD", "--judge", "j", "--questions", str(custom), "--no-progress", "--yes"]
    with FakeOpenAIServer(script=[*judge, *script(mini, qs)]) as srv:
        res = CliRunner().invoke(app, [*args, "--base-url", srv.base_url, "--judge-base-url", srv.base_url])
        assert res.exit_code == 0, res.output
        wrong = CliRunner().invoke(app, [*args, "--base-url", srv.base_url, "--grader", "nope"])
        assert wrong.exit_code == 2 and "no grader named 'nope'" in wrong.output
    grades = R.load_grades(tmp_path / "r" / run_label("m", "direct", "OO"))
    assert {g.grader for g in grades.values()} == {"generic"} and len(grades) == 3
    grid = [line for line in res.stdout[res.stdout.index("method x condition"):].splitlines()[1:]
            if set(line) - {"-", " "}]  # the rule under the header left out
    assert [line.split() for line in grid] == [["method", "OO", "GOLD"], ["direct", "33.3", "33.3"],
                                               ["structured", "33.3", "-"]]
    forced = CliRunner().invoke(app, [*args, "--grader", "sealqa", "--base-url", "http://127.0.0.1:9/v1", "--dry-run"])
    assert forced.exit_code == 0, forced.output  # the grader choice of trek grade, checked before any call


def test_a_request_rejected_for_one_question_fails_it_and_the_grid_goes_on(ctrl, tmp_path, mini):
    path, qs = ctrl
    runs = tmp_path / "runs"
    too_long = {"model": "m", "pattern": re.escape(qs[0].question),
                "error": {"status": 400, "message": "This model's maximum context length is 8 tokens"}}
    with FakeOpenAIServer(script=[too_long, *script(mini, qs)]) as srv:
        s = run(path, runs, srv, methods={"direct": make_method("direct")}, conditions=["OO"])
    assert (s.ok, s.failed, s.pending) == (2, 1, 0) and "maximum context length" in s.errors[0]
    t = R.load_answers(runs / run_label("m", "direct", "OO"))[qs[0].id]
    assert t.status == "failed" and t.final_answer is None
    with FakeOpenAIServer(script=script(mini, qs)) as srv:  # retried on the next run
        s = run(path, runs, srv, methods={"direct": make_method("direct")}, conditions=["OO"])
        assert (s.ok, s.failed, s.skipped) == (3, 0, 2) and srv.stats()["requests"] == 1
    unknown_model = {"model": "m", "error": {"status": 404, "message": "model not found"}}
    with FakeOpenAIServer(script=[unknown_model]) as srv, pytest.raises(FatalLLMError):
        run(path, tmp_path / "r2", srv, methods={"direct": make_method("direct")}, conditions=["OO"])


def test_cli_prompt_overrides_reach_the_model_and_the_run_record(ctrl, tmp_path, mini):
    path, qs = ctrl
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "rag.answer.txt").write_text("OVERRIDDEN {effective_year}\n{docs_block}\nQ: {question}\n")
    rules = [{"model": "m", "pattern": "^OVERRIDDEN", "reply": "from the override"}, *script(mini, qs)]
    runs = tmp_path / "r"
    with FakeOpenAIServer(script=rules) as srv:
        res = CliRunner().invoke(app, ["ctrl", "run", str(path), "--model", "m", "--runs", str(runs), "--methods",
                                       "direct", "--conditions", "OO", "--prompts", str(prompts),
                                       "--base-url", srv.base_url, "--no-progress"])
    assert res.exit_code == 0, res.output
    rd = runs / run_label("m", "direct", "OO")
    assert R.read_meta(rd).prompt_versions["rag.answer"].startswith("rag.answer/2+override.")
    assert {t.final_answer for t in R.load_answers(rd).values()} == {"from the override"}
    (prompts / "rag.answr.txt").write_text("typo")
    res = CliRunner().invoke(app, ["ctrl", "run", str(path), "--model", "m", "--runs", str(runs), "--methods",
                                   "direct", "--conditions", "OO", "--prompts", str(prompts), "--dry-run"])
    assert res.exit_code == 2 and "rag.answr" in res.output


def test_cli_budget_stops_issuing_calls_and_leaves_answers_pending(ctrl, tmp_path, mini):
    path, qs = ctrl
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"m": {"input": 1000.0, "output": 1000.0}}))  # dollars per 1M tokens
    runs = tmp_path / "r"
    args = ["ctrl", "run", str(path), "--model", "m", "--runs", str(runs), "--methods", "direct,filter",
            "--conditions", "OO", "--prices", str(prices), "--budget", "12", "--no-progress"]
    with FakeOpenAIServer(script=script(mini, qs)) as srv:
        res = CliRunner().invoke(app, [*args, "--base-url", srv.base_url, "--max-connections", "1"])
        spent = srv.stats()["requests"]
    assert res.exit_code == 3, res.output
    assert "budget cap" in res.output and 0 < spent < 9  # 3 direct + 6 filter calls without a budget
    answers = {**R.load_answers(runs / run_label("m", "direct", "OO")), **R.load_answers(runs / run_label("m", "filter", "OO"))}
    assert any(t.status == "pending" for t in answers.values())


def test_estimate_bounds_the_tokens_the_grid_really_sends(ctrl, tmp_path, mini):
    from trek.llm.usage import Price, PriceTable
    from trek.rag.runner import estimate_grid
    from trek.types import Usage

    path, qs = ctrl
    runs = tmp_path / "runs"
    records = read_contexts(path)
    cells = plan_grid("m", list(methods()), MAIN, runs)
    prices = PriceTable({"m": Price(input=1.0, output=2.0)})
    est = estimate_grid(cells, records, methods(), "m", prices, questions={q.id: q for q in qs}, max_tokens=300)
    assert est.items == 51 and est.cached_items == 0 and est.calls == (75, 75)
    with FakeOpenAIServer(script=script(mini, qs), tokenizer="o200k_base") as srv:  # counts like OpenAI
        run(path, runs, srv)
    sent = Usage()
    for cell in cells:
        for t in R.load_answers(cell.run_dir).values():
            sent = sent + t.usage
    assert sent.calls == 75
    assert est.input_tokens[0] <= sent.prompt_tokens <= est.input_tokens[1]
    assert est.output_tokens[0] <= sent.completion_tokens <= est.output_tokens[1]
    assert 0 < est.token_usd[0] < est.token_usd[1]
    again = estimate_grid(cells, records, methods(), "m", prices, questions={q.id: q for q in qs})
    assert again.cached_items == 51 and again.calls == (0, 0) and again.token_usd == (0.0, 0.0)
