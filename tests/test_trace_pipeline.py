"""TrekTrace end to end, offline: a scripted agentic run on the bundled benchmark, graded, then
traced with scripted judges so that every label occurs (see tests/_trace_case.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _trace_case import (
    ANA,
    CASES,
    DIAG,
    DONE,
    EXPECTED,
    GRADER,
    MODEL,
    WRONG,
    FixedSearch,
    plan,
    query_for,
    run_script,
    trace_script,
)
from typer.testing import CliRunner

from trek import runs
from trek.answering.runner import run_system
from trek.cli import app
from trek.grading import grade_run
from trek.llm import LLMCache, LLMClient
from trek.pages import PageStore
from trek.testing.fake_openai import FakeOpenAIServer, load_script
from trek.trace import RoleModel, load_trace, trace_run
from trek.trace.inputs import noise_context, retrieved_collection, select_cases
from trek.trace.pipeline import evaluated_role_from_run
from trek.types import SearchCall, SearchResult, Trajectory


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for var in ("TREK_CACHE", "TREK_PAGES", "TREK_PROMPTS", "OPENAI_BASE_URL", "TREK_SEARCH_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def roles(srv, run_dir):
    cache = LLMCache(run_dir / "llm-cache.sqlite")
    diag = LLMClient(DIAG, base_url=srv.base_url, cache=cache, progress=False, max_retries=0)
    ana = LLMClient(ANA, base_url=srv.base_url, cache=cache, progress=False, max_retries=0)
    return {"diagnostic": RoleModel("diagnostic", diag, DIAG), "analysis": RoleModel("analysis", ana, ANA)}


def build_run(tmp, mini, srv):
    p = plan(mini)
    qs = [q for q in mini.questions if q.id in CASES]
    run_dir = tmp / "run"
    store = PageStore(run_dir / "pages.sqlite")
    store.add_documents(mini.documents)
    titles = {d.url: d.title for d in mini.documents}
    backend = FixedSearch({query_for(qid): c["search"] for qid, c in p.items() if c["search"]}, titles)
    client = LLMClient(MODEL, base_url=srv.base_url, cache=LLMCache(run_dir / "llm-cache.sqlite"), progress=False)
    run_system(qs, run_dir, client, backend, system="agentic", progress=False, store=store)
    store.close()
    grade_run(run_dir, LLMClient(GRADER, base_url=srv.base_url, progress=False), progress=False)
    return run_dir


@pytest.fixture(scope="module")
def server(mini):
    p = plan(mini)
    with FakeOpenAIServer(script=trace_script(mini, p) + run_script(mini, p)) as srv:
        yield srv


@pytest.fixture(scope="module")
def graded(tmp_path_factory, mini, server):
    """The graded run (not traced), built once; tests trace copies of it."""
    return build_run(tmp_path_factory.mktemp("graded"), mini, server)


@pytest.fixture
def fresh_run(graded, tmp_path):
    return Path(shutil.copytree(graded, tmp_path / "run"))


@pytest.fixture(scope="module")
def traced(tmp_path_factory, graded, server):
    srv = server
    run_dir = Path(shutil.copytree(graded, tmp_path_factory.mktemp("trace") / "run"))
    before = srv.stats()["requests"]
    report = trace_run(run_dir, **roles(srv, run_dir), check_stale=True, progress=False)
    first_calls = srv.stats()["requests"] - before
    # a second run: finished cases are kept, zero requests
    mid = srv.stats()["requests"]
    again = trace_run(run_dir, **roles(srv, run_dir), check_stale=True, progress=False)
    # and with the records removed, everything comes from the LLM cache
    (run_dir / runs.TRACE).unlink()
    cached = trace_run(run_dir, **roles(srv, run_dir), check_stale=True, progress=False)
    second_calls = srv.stats()["requests"] - mid
    return {"dir": run_dir, "report": report, "again": again, "cached": cached,
            "first_calls": first_calls, "second_calls": second_calls}


def test_every_failure_is_traced_with_the_expected_labels(traced):
    recs = {r.question_id: r for r in load_trace(traced["dir"])}
    assert list(recs) == list(EXPECTED)  # question order; the right answer (mini:08) not traced
    assert {q: r.labels for q, r in recs.items()} == EXPECTED
    assert [q for q, r in recs.items() if r.status == "done"] == DONE
    r7 = recs["mini:07"]  # its retrieval test stayed unreadable: incomplete, no label by elimination
    assert r7.status == "incomplete" and r7.skipped == {"retrieval": "judge reply unreadable"}
    assert r7.tests["gold_only"].state == r7.tests["noise"].state == r7.tests["queries"].state == "ran"
    seen = {lab for r in recs.values() for lab in r.labels}
    assert seen == {"Pre-retrieval", "Retrieval", "Interpretation", "Distraction", "Randomness"}
    sel = traced["report"].selection
    assert sel.skipped["correct"] == 1 and sel.total == len(CASES)


def test_flags_and_evidence_are_recorded(traced):
    recs = {r.question_id: r for r in load_trace(traced["dir"])}
    r1 = recs["mini:01"]
    assert r1.retrieval_basis == "url-identity" and r1.evidence_retrieved is True
    assert all(m.matched_url for m in r1.url_matches)
    assert r1.gold_urls[1] in r1.retrieved_urls  # the opened URL joined the collection
    assert not any(s.name in ("key_evidence", "evidence_match", "query_adequacy") for s in r1.steps)
    r2 = recs["mini:02"]
    assert r2.flags == "E=F Q=T G=T N=F"
    assert r2.key_evidence == "Key fact for mini:02." and r2.evidence_reason == "scripted for mini:02"
    assert r2.noise_context == noise_context(r2.retrieved_urls, r2.gold_urls)
    assert r2.noise_context[: len(r2.retrieved_urls)] == r2.retrieved_urls
    assert r2.noise_answer == WRONG and r2.gold_only_answer != WRONG
    assert r2.queries == [query_for("mini:02")]
    r3 = recs["mini:03"]
    assert r3.flags == "E=F Q=F G=F N=-" and not r3.noise_was_run
    assert not any(s.name.startswith("noise") for s in r3.steps)  # no gold-plus-noise after G=F
    assert r3.stale_reference is True and recs["mini:02"].stale_reference is False
    r4 = recs["mini:04"]
    assert r4.retrieval_basis == "evidence-match" and r4.equivalent_urls == r4.retrieved_urls[:1]
    assert r4.query_adequate is None  # not asked once the evidence is found
    r6 = recs["mini:06"]
    assert r6.retrieved_urls == [] and r6.queries == [] and r6.retrieval_basis == "no-retrieved-pages"
    assert r6.query_adequate is False and r6.noise_context == r6.gold_urls
    r7 = recs["mini:07"]
    match = next(s for s in r7.steps if s.name == "evidence_match")
    assert match.status == "unknown" and len(match.raw) == 3  # first reply + two re-asks
    assert r7.evidence_retrieved is None and r7.flags == "E=? Q=T G=T N=T"
    for r in recs.values():
        assert r.models["evaluated"].startswith(MODEL + " @ ")  # the run's own model by default
        assert {s.role for s in r.steps if s.name.startswith(("gold_only", "noise"))
                and not s.name.endswith("_grade")} <= {"evaluated"}
        assert all(s.version.startswith("trace-") for s in r.steps)


def test_the_papers_reading_of_an_unknown_judgment_is_an_option(fresh_run, server):
    report = trace_run(fresh_run, **roles(server, fresh_run), unknown="paper", progress=False)
    recs = {r.question_id: r for r in report.records}
    assert recs["mini:07"].labels == ["Retrieval"] and recs["mini:07"].status == "done"
    assert recs["mini:07"].tests["retrieval"].reason == "judge reply unreadable (unknown, C.4)"
    with pytest.raises(ValueError, match="unknown must be one of"):
        trace_run(fresh_run, **roles(server, fresh_run), unknown="guess", progress=False)


def test_second_run_makes_zero_calls(traced):
    assert traced["first_calls"] > 0
    assert traced["second_calls"] == 0
    assert traced["again"].kept == len(EXPECTED) and traced["again"].traced == 0  # incomplete is final too
    assert traced["cached"].traced == len(EXPECTED) and traced["cached"].http_calls == 0
    assert [r.labels for r in traced["cached"].records] == [r.labels for r in traced["report"].records]


def test_report_describes_counts_and_cost(traced):
    text = traced["report"].describe()
    assert "6 case(s)" in text and "per attributed case" in text
    assert "fully traced 5, incomplete 1, pending 0, failed 0" in text
    assert "retrieval: judge reply unreadable 1" in text
    assert "no price for ana, diag, lm" in text
    assert "1 unknown judgment" in text
    assert traced["report"].label_counts()["Distraction"] == 2


def test_failed_call_leaves_the_case_pending_then_resumes(fresh_run, server, mini):
    p = plan(mini)
    q2 = next(q for q in mini.questions if q.id == "mini:02")
    boom = {"model": MODEL, "any_pattern": r"\[TrekTrace: gold-plus-noise probe\][\s\S]*" + q2.question[:30],
            "error": {"status": 500, "message": "down"}}
    srv, run_dir, rules = server, fresh_run, server.rules
    srv.rules = load_script([boom, *trace_script(mini, p), *run_script(mini, p)])
    try:
        ev = evaluated_role_from_run(run_dir)
        ev.client.max_retries = 0
        report = trace_run(run_dir, **roles(srv, run_dir), evaluated=ev, progress=False)
    finally:
        srv.rules = rules  # the endpoint recovers
    recs = {x.question_id: x for x in report.records}
    assert recs["mini:02"].status == "pending" and recs["mini:02"].labels == []
    assert "noise" in recs["mini:02"].error
    assert report.pending == 1 and "pending" in report.describe()
    before = srv.stats()["requests"]
    again = trace_run(run_dir, **roles(srv, run_dir), progress=False)
    # only the pending case is traced again: its failed probe and the grade of that probe
    assert srv.stats()["requests"] - before == 2
    recs = {x.question_id: x for x in again.records}
    assert recs["mini:02"].labels == ["Retrieval", "Distraction"]
    assert again.kept == len(EXPECTED) - 1 and again.traced == 1


def test_budget_stops_new_calls(fresh_run, server, tmp_path, monkeypatch):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({m: {"input": 1.0, "output": 1.0} for m in (DIAG, ANA, MODEL)}))
    monkeypatch.setenv("TREK_PRICES", str(prices))  # a budget needs a price for every role's model
    before = server.stats()["requests"]
    report = trace_run(fresh_run, **roles(server, fresh_run), budget_usd=0.0, progress=False)
    assert report.pending == len(EXPECTED)
    assert all("budget" in r.error for r in report.records)
    assert server.stats()["requests"] == before


def test_collection_is_search_results_then_opened_urls_without_duplicates():
    t = Trajectory(
        question_id="q", model="m",
        search_calls=[SearchCall(query="a", backend="b", results=[SearchResult(url="u1"), SearchResult(url="u2")]),
                      SearchCall(query="b", backend="b", results=[SearchResult(url="u2"), SearchResult(url="U1")])],
        opened_urls=["u3", "u1"],
    )
    assert retrieved_collection(t) == ["u1", "u2", "U1", "u3"]
    # with retrieved_urls recorded (and opened URLs already in it) the result is the same
    t2 = t.model_copy(update={"retrieved_urls": ["u1", "u2", "U1", "u3"]})
    assert retrieved_collection(t2) == ["u1", "u2", "U1", "u3"]


def test_cli_traces_a_run(fresh_run, server):
    run_dir = fresh_run
    res = CliRunner().invoke(app, ["trace", str(run_dir), "--diagnostic-judge", DIAG, "--analysis-judge", ANA,
                                   "--judge-base-url", server.base_url, "--no-progress"])
    assert res.exit_code == 3, res.output  # one case is incomplete
    assert "incomplete 1" in res.output
    # its judge reply stayed unreadable: the exit 3 names what would change it, not a re-run
    stuck = next(line for line in res.output.splitlines() if "stayed unreadable after every re-ask" in line)
    assert "cannot change them" in stuck and "--unknown-judgments paper" in stuck and "--judge" in stuck
    lines = (run_dir / runs.TRACE).read_text().splitlines()
    assert [json.loads(x)["labels"] for x in lines] == list(EXPECTED.values())
    assert "per attributed case" in res.output
    assert select_cases(run_dir).skipped["correct"] == 1
    res = CliRunner().invoke(app, ["trace", str(run_dir)])
    assert res.exit_code == 2 and "--judge" in res.output


def test_tripwire_would_stop_a_probe_that_carried_reference_answers(mini, server):
    # the guard used by the end-to-end test is live: a prompt of the evaluated model that holds
    # reference answers is refused, and the refusal stops the run
    from trek.llm.client import FatalLLMError

    client = LLMClient(MODEL, base_url=server.base_url, progress=False)
    with pytest.raises(FatalLLMError, match="reference answers reached"):
        client.chat([{"role": "user", "content": "Reference answer(s): Dana Okafor"}])


def test_evaluated_role_defaults_to_the_run_model_and_effort(tmp_path):
    from trek.types import RunMeta

    runs.write_meta(tmp_path, RunMeta(run_id="r", kind="wild", model="m1", endpoint="http://127.0.0.1:9/v1",
                                      config={"system": {"system": "agentic", "effort": "high"}}))
    ev = evaluated_role_from_run(tmp_path)
    assert (ev.model, ev.endpoint, ev.params) == ("m1", "http://127.0.0.1:9/v1", {"reasoning_effort": "high"})
    other = evaluated_role_from_run(tmp_path, model="m2")
    assert other.model == "m2" and other.params == {}


def test_without_gold_pages_no_label_comes_from_a_skipped_test(fresh_run, server):
    # an empty page store: no gold page can be read (URL identity still works without pages)
    report = trace_run(fresh_run, **roles(server, fresh_run), store=PageStore(), progress=False)
    recs = {r.question_id: r for r in report.records}
    assert [(r.status, r.gold_pages_available, r.error) for r in recs.values()] == [("incomplete", False, None)] * 6
    assert recs["mini:01"].evidence_retrieved is True  # both gold URLs retrieved by identity
    assert recs["mini:02"].retrieval_basis == "gold-unavailable" and recs["mini:02"].evidence_retrieved is None
    assert all(r.gold_only_correct is None and not r.noise_was_run for r in recs.values())
    assert not any(s.name in ("key_evidence", "gold_only") for r in recs.values() for s in r.steps)
    assert all(r.skipped["gold_only"] == "no gold page" for r in recs.values())
    # no Randomness by elimination, no retrieval-side label without the retrieval test
    assert recs["mini:01"].labels == [] and recs["mini:02"].labels == [] and recs["mini:03"].labels == []
    assert recs["mini:06"].labels == ["Pre-retrieval"]  # no page retrieved, no query: both tests ran
    text = report.describe()
    assert "fully traced 0, incomplete 6" in text and "gold_only: no gold page 6" in text
    assert report.label_counts() == {}


def test_cli_exits_3_on_a_run_without_pages(fresh_run, server):
    (fresh_run / "pages.sqlite").unlink()
    res = CliRunner().invoke(app, ["trace", str(fresh_run), "--judge", DIAG, "--judge-base-url", server.base_url,
                                   "--no-progress"])
    assert res.exit_code == 3, res.output
    assert "incomplete 6" in res.output and "no gold page" in res.output


def test_cost_per_attributed_case_with_priced_models(fresh_run, server):
    from trek.llm.usage import Price, PriceTable

    prices = PriceTable({m: Price(input=1_000_000.0, output=0.0) for m in (DIAG, ANA, MODEL)})  # $1 per token
    r = roles(server, fresh_run)
    for who in r.values():
        who.client.prices = prices
    ev = evaluated_role_from_run(fresh_run)
    ev.client.prices = prices
    report = trace_run(fresh_run, **r, evaluated=ev, progress=False)
    prompt_tokens = sum(s.usage.prompt_tokens for rec in report.records for s in rec.steps)
    assert report.cost_usd == pytest.approx(prompt_tokens) and prompt_tokens > 0
    assert report.cost_per_case == pytest.approx(prompt_tokens / len(DONE))  # incomplete cases are not attributed
    assert f"${prompt_tokens / len(DONE):.4f} per attributed case" in report.describe()
    assert "no price" not in report.describe()


def test_role_clients_without_a_cache_use_the_run_cache(fresh_run, server):
    def bare():
        return {"diagnostic": RoleModel("diagnostic", LLMClient(DIAG, base_url=server.base_url, progress=False), DIAG),
                "analysis": RoleModel("analysis", LLMClient(ANA, base_url=server.base_url, progress=False), ANA)}

    trace_run(fresh_run, **bare(), progress=False)
    (fresh_run / runs.TRACE).unlink()
    before = server.stats()["requests"]
    again = trace_run(fresh_run, **bare(), progress=False)
    assert server.stats()["requests"] == before and again.traced == len(EXPECTED)


def test_dry_run_estimate_bounds_what_tracing_really_costs(fresh_run, mini):
    from _trace_case import MODEL as RUN_MODEL

    from trek.llm.usage import Price, PriceTable
    from trek.trace.estimate import estimate_trace

    p = plan(mini)
    prices = PriceTable({DIAG: Price(1.0, 2.0), ANA: Price(3.0, 4.0), RUN_MODEL: Price(5.0, 6.0)})
    with FakeOpenAIServer(script=trace_script(mini, p) + run_script(mini, p), tokenizer="o200k_base") as srv:
        cache = LLMCache(fresh_run / "llm-cache.sqlite")

        def role(name, model):
            client = LLMClient(model, base_url=srv.base_url, cache=cache, progress=False, max_retries=0, prices=prices)
            return RoleModel(name, client, model)

        kw = dict(diagnostic=role("diagnostic", DIAG), analysis=role("analysis", ANA),
                  evaluated=role("evaluated", RUN_MODEL))
        est = estimate_trace(fresh_run, check_stale=True, assume_output=500, **kw)
        before = srv.stats()["requests"]
        report = trace_run(fresh_run, check_stale=True, progress=False, **kw)
        sent = srv.stats()["requests"] - before
    assert srv.stats()["requests"] and before == 0  # the estimate itself sent nothing
    cases = len(report.records)
    assert est.items == cases and 2 * cases <= est.calls[0] <= est.calls[1] <= 8 * cases
    assert est.calls[0] <= sent <= est.calls[1]
    assert est.input_tokens[0] <= report.usage.prompt_tokens <= est.input_tokens[1]
    assert est.output_tokens[0] <= report.usage.completion_tokens <= est.output_tokens[1]
    assert est.usd_low <= report.usage.cost_usd <= est.usd_high
    again = estimate_trace(fresh_run, check_stale=True, **kw)
    assert again.calls == (0, 0) and again.cached_items == cases


def test_a_dry_run_without_prices_bounds_the_pages_without_the_tokenizer(fresh_run, mini, monkeypatch):
    """No role's model has a price: the prompts are not tokenized; their tokens are bounds from their
    length that contain the counted figures of the same estimate with prices."""
    from _trace_case import MODEL as RUN_MODEL

    import trek.trace.estimate as trace_estimate
    from trek.llm.usage import Price, PriceTable

    def kw(prices):
        def role(name, model):
            return RoleModel(name, LLMClient(model, base_url="http://127.0.0.1:9/v1", progress=False, prices=prices),
                             model)
        return dict(diagnostic=role("diagnostic", DIAG), analysis=role("analysis", ANA),
                    evaluated=role("evaluated", RUN_MODEL))

    counted = trace_estimate.estimate_trace(fresh_run, **kw(PriceTable(
        {DIAG: Price(1.0, 2.0), ANA: Price(3.0, 4.0), RUN_MODEL: Price(5.0, 6.0)})))
    monkeypatch.setattr(trace_estimate, "count_chat_tokens", lambda m: pytest.fail("the tokenizer was called"))
    bounded = trace_estimate.estimate_trace(fresh_run, **kw(PriceTable({})))
    assert bounded.calls == counted.calls and bounded.items == counted.items > 0
    assert bounded.input_tokens[0] <= counted.input_tokens[0] <= counted.input_tokens[1] <= bounded.input_tokens[1]
    assert any("bounds from their length" in n for n in bounded.describe().splitlines())


def test_judges_at_an_endpoint_that_never_answers_stop_the_trace_within_seconds(fresh_run, server, monkeypatch):
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", dead)  # where judges go when --judge-base-url is not given
    monkeypatch.setattr("trek.llm.client.DEFAULT_UNREACHABLE_AFTER", 0.3)  # not the 8 s of a real run
    start = time.monotonic()
    res = CliRunner().invoke(app, ["trace", str(fresh_run), "--judge", DIAG, "--base-url", server.base_url,
                                   "--no-progress"])
    assert time.monotonic() - start < 30
    assert res.exit_code == 2, res.output
    assert f"judge {DIAG} @ {dead}" in res.output and f"evaluated {MODEL} @ {server.base_url}" in res.output
    assert "cannot reach the" in res.output and "judge's endpoint" in res.output and dead in res.output
    assert not (fresh_run / runs.TRACE).exists() or all(
        json.loads(x)["status"] != "done" for x in (fresh_run / runs.TRACE).read_text().splitlines())


def test_a_run_without_grades_says_to_grade_it_first(fresh_run, server):
    (fresh_run / runs.GRADES).unlink()
    res = CliRunner().invoke(app, ["trace", str(fresh_run), "--judge", DIAG, "--judge-base-url", server.base_url,
                                   "--no-progress"])
    assert res.exit_code == 3, res.output
    assert "have no grade" in res.output and "trek grade" in res.output


def test_a_toy_probe_registered_in_one_module_is_traced_after_the_gold_only_probe(fresh_run, server, monkeypatch):
    import sys

    from trek import templates
    from trek.trace import parts
    from trek.trace.parts import registered_tests

    # the toy's registrations last for this test only
    monkeypatch.setattr(templates, "_registry", dict(templates._registry))
    monkeypatch.setattr(parts, "_TESTS", dict(parts._TESTS))
    monkeypatch.delitem(sys.modules, "_toy_probe", raising=False)
    import _toy_probe

    from trek.trace.schedule import SCHEDULE, Entry, with_entry

    assert registered_tests()["names_year"].version == "toy-1"
    schedule = with_entry(SCHEDULE, Entry("names_year", after="gold_only", when=(True,)), before="noise")
    rules = server.rules
    server.rules = load_script([{"model": ANA, "any_pattern": r"\[Toy probe: names a year\]",
                                 "reply": json.dumps({"names_year": False, "reason": "no digits"})}]) + rules
    try:
        report = trace_run(fresh_run, **roles(server, fresh_run), schedule=schedule, progress=False)
    finally:
        server.rules = rules
    recs = {r.question_id: r for r in report.records}
    # the toy probe ran where the gold-only answer was right, was not needed where it was wrong
    assert recs["mini:02"].tests["names_year"].state == "ran"
    assert recs["mini:03"].tests["names_year"].state == "not_needed"
    assert list(recs["mini:02"].tests) == ["retrieval", "queries", "gold_only", "names_year", "noise"]
    step = next(s for s in recs["mini:02"].steps if s.name == "names_year")
    assert step.value == {"names_year": False, "reason": "no digits"} and step.template == _toy_probe.TEMPLATE
    assert recs["mini:02"].versions["test.names_year"] == "toy-1"
    # it reads no label: the labels are those of the C.4 schedule alone
    assert {q: r.labels for q, r in recs.items()} == EXPECTED


def test_a_record_made_under_another_label_rule_version_is_traced_again(fresh_run, server):
    from dataclasses import replace

    from trek.trace.labels import C4

    first = trace_run(fresh_run, **roles(server, fresh_run), progress=False)
    assert all(r.versions["labels"] == "C.4 c4-1" for r in first.records)
    newer = replace(C4, version="c4-test")
    before = server.stats()["requests"]
    again = trace_run(fresh_run, **roles(server, fresh_run), label_rule=newer, progress=False)
    # never kept silently: every record is traced again (from the LLM cache) and says its version
    assert again.kept == 0 and again.traced == len(EXPECTED) and again.outdated == len(EXPECTED)
    assert server.stats()["requests"] == before
    assert all(r.versions["labels"] == "C.4 c4-test" for r in again.records)
    assert "6 record(s) made under other versions traced again (labels C.4 c4-1 -> C.4 c4-test)" in again.describe()
    assert {r.question_id: r.labels for r in again.records} == EXPECTED


def test_the_selection_reads_its_cases_again_by_offset_on_every_pass(fresh_run):
    from trek.trace.inputs import TraceInput

    sel = select_cases(fresh_run)
    first, second = list(sel.cases), list(sel.cases)
    assert len(first) == len(sel.cases) == len(EXPECTED) and [c.question_id for c in first] == list(EXPECTED)
    assert [(c.question_id, c.queries, c.collection, c.prediction, c.grade.outcome) for c in first] == \
        [(c.question_id, c.queries, c.collection, c.prediction, c.grade.outcome) for c in second]
    assert first[0] is not second[0]  # made again from the files, not held
    # what a case holds is what TraceInput.build makes of the whole records
    qs, answers = runs.load_questions(fresh_run), runs.load_answers(fresh_run)
    grades = runs.load_grades(fresh_run)
    for c in first:
        whole = TraceInput.build(qs[c.question_id], answers[c.question_id], grades[c.question_id])
        assert (c.question, c.queries, c.collection, c.prediction) == \
            (whole.question, whole.queries, whole.collection, whole.prediction)
    sel.audit = lambda i: i == 0
    assert [c.audit for c in sel.cases] == [True] + [False] * (len(first) - 1)
