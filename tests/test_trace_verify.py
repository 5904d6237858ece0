"""``trek trace verify``: the searches on their own, then a scripted run built from Mini in which
one planted page distracts the gold-plus-noise probe (evaluated model on the fake server, the exact
judge in both judge roles)."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re

import pytest
from _mini_run import agentic_run
from typer.testing import CliRunner

from trek import runs
from trek.annotations import from_mini
from trek.cli import app
from trek.pages import PageStore
from trek.query_targets import adequate_queries, assess
from trek.search import make_backend
from trek.testing.fake_openai import FakeOpenAIServer
from trek.trace import load_trace
from trek.trace.verify import VerifyRecord, bisect_one, ddmin, load_verify


# -- the searches --------------------------------------------------------------------------------
def oracle(culprits, asked):
    """A test that flips when the subset holds every page of one of ``culprits`` (sets)."""
    async def flips(subset):
        asked.append(tuple(subset))
        return any(c <= set(subset) for c in culprits)
    return flips


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 16])
def test_bisect_finds_one_page_in_ceil_log2_n_asks(n):
    for page in range(n):
        asked = []
        found, seen = asyncio.run(bisect_one(range(n), oracle([{page}], asked)))
        assert found == (page,)
        assert len(asked) <= math.ceil(math.log2(n)) if n > 1 else asked == []
        assert seen == (not asked or asked[-1] == found or page in asked[-1] and len(asked[-1]) == 1)


@pytest.mark.parametrize("n", [2, 4, 7, 10])
def test_ddmin_finds_a_1_minimal_set_when_two_pages_flip_only_together(n):
    for a, b in itertools.combinations(range(n), 2):
        asked = []
        found = asyncio.run(ddmin(range(n), oracle([{a, b}], asked)))
        assert set(found) == {a, b}
        # 1-minimal: removing any one page stops the flip
        for x in found:
            assert not asyncio.run(oracle([{a, b}], [])(tuple(y for y in found if y != x)))


def test_ddmin_takes_an_unreadable_answer_as_no_flip():
    async def flips(subset):
        return None if len(subset) < 3 else True

    assert len(asyncio.run(ddmin(range(6), flips))) == 3


def test_bisect_ends_on_a_page_that_does_not_flip_alone_when_two_are_needed():
    found, seen = asyncio.run(bisect_one(range(4), oracle([{0, 3}], [])))
    assert not seen and not asyncio.run(oracle([{0, 3}], [])(found))


def test_the_exact_judges_repaired_queries_are_adequate_by_its_own_rule():
    ann = from_mini()
    assert ann.targets
    for qid, targets in ann.targets.items():
        value, detail = assess(targets, adequate_queries(targets))
        assert value["query_adequate"] is True, (qid, detail)


# -- a scripted run with a planted distractor ----------------------------------------------------
MODEL = "lm"
WRONG = "a wrong guess"
AGENTIC = "You have two tools"
#: question -> (the system opens the planted page?, a page opened after it or None, how its noise probe answers)
PLAN = {
    "mini:01": (True, None, "planted"),
    "mini:02": (True, "https://www.harrowmere-courier.com/sport/2024/12/rovers-under-21s-abara", "planted"),
    "mini:09": (True, None, "planted"),
    "mini:10": (True, None, "planted"),
    "mini:14": (True, "https://www.harrowmere-courier.com/sport/2024/12/rovers-under-21s-abara", "planted"),
    "mini:16": (True, None, "planted"),
    "mini:18": (False, None, "wrong"),    # Distraction whatever the pages: no page distracts it
    "mini:20": (False, None, "right"),    # Randomness: nothing to search
}


def planted_url(mini):
    """A page of a question outside the plan (the exact judge knows it; it supports nothing asked here)."""
    return next(d.url for d in mini.documents if d.question_id == "mini:13" and d.role != "gold" and d.url)


def script(mini, planted):
    q = {x.id: x for x in mini.questions}
    rules = []
    for qid, (opens, extra, noise) in PLAN.items():
        qt, right = re.escape(q[qid].question), q[qid].answers[0]

        def answer(ok, right=right):
            return json.dumps({"answer": right if ok else WRONG, "used_urls": [], "reasoning": "r"})
        rules.append({"model": MODEL, "any_pattern": rf"\[TrekTrace: gold-only probe\][\s\S]*{qt}", "reply": answer(True)})
        probe = rf"\[TrekTrace: gold-plus-noise probe\][\s\S]*{qt}"
        if noise == "planted":
            rules.append({"model": MODEL, "any_pattern": rf"{probe}[\s\S]*URL: {re.escape(planted)}\n",
                          "reply": answer(False)})
        rules.append({"model": MODEL, "any_pattern": probe, "reply": answer(noise == "right" or noise == "planted")})
        pat = rf"(?s){AGENTIC}.*{qt}"
        rules.append({"model": MODEL, "any_pattern": pat, "tool_results": 0,
                      "tool_calls": [{"name": "web_search", "arguments": {"query": q[qid].question}}]})
        for i, url in enumerate([planted if opens else None, extra], start=1):
            if url:
                rules.append({"model": MODEL, "any_pattern": pat, "tool_results": i,
                              "tool_calls": [{"name": "open_url", "arguments": {"url": url}}]})
        rules.append({"model": MODEL, "any_pattern": pat, "reply": WRONG})
    rules.append({"error": {"status": 400, "message": "an unscripted request reached the server"}})
    return rules


@pytest.fixture(scope="module")
def planted_run(mini, tmp_path_factory):
    planted = planted_url(mini)
    with FakeOpenAIServer(script=script(mini, planted)) as srv:
        rd = agentic_run(mini, tmp_path_factory.mktemp("verify") / "run", srv.base_url, MODEL, PLAN, max_rounds=4,
                         results_per_search=6)
        yield srv, rd, planted


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for var in ("TREK_CACHE", "TREK_PAGES", "TREK_PROMPTS", "OPENAI_BASE_URL", "TREK_JUDGE_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


#: The run's ``trek trace verify --dry-run`` output (printed before verify ran), by run folder.
DRY: dict = {}


@pytest.fixture(scope="module")
def verified(planted_run):
    srv, rd, planted = planted_run
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", "sk-test")
    try:
        assert invoke("grade", rd, "--judge", "exact", "--no-progress").exit_code == 0
        res = invoke("trace", rd, "--judge", "exact", "--no-progress", "--yes")
        assert res.exit_code in (0, 3), res.output
        before = srv.stats()
        dry = invoke("trace", "verify", rd, "--judge", "exact", "--no-progress", "--dry-run")
        assert dry.exit_code == 0 and srv.stats()["requests"] == before["requests"], dry.output
        assert not (rd / runs.VERIFY).exists()
        res = invoke("trace", "verify", rd, "--judge", "exact", "--no-progress")
        after = srv.stats()
    finally:
        mp.undo()
    DRY[rd] = dry.output
    return srv, rd, planted, res, before, after


@pytest.mark.slow  # builds, grades, traces and verifies a run (about 12 s)
def test_every_distraction_case_with_the_planted_page_finds_exactly_it(verified, mini):
    srv, rd, planted, res, _, _ = verified
    assert res.exit_code == 0, res.output
    trace = {r.question_id: r for r in load_trace(rd)}
    recs = {r.question_id: r for r in load_verify(rd) if r.experiment == "distractor_search"}
    distraction = {q for q, r in trace.items() if "Distraction" in r.labels}
    assert set(recs) == distraction
    with_planted = {q for q in distraction if planted in (trace[q].noise_context or [])}
    assert with_planted == {q for q, p in PLAN.items() if p[2] == "planted"}, "the run does not plant as planned"
    for q in with_planted:
        r = recs[q]
        assert r.verdict == "confirmed", (q, r.reason)
        assert [p.url for p in r.minimal_set] == [planted]
        assert r.noise_pages == sum(u not in trace[q].gold_urls for u in trace[q].noise_context) >= 2
    calls = [recs[q].probe_calls for q in with_planted]
    bound = [math.ceil(math.log2(recs[q].noise_pages)) + 3 for q in with_planted]
    assert sum(calls) / len(calls) <= sum(bound) / len(bound), (calls, bound)
    # the probes counted are the evaluated model's requests (the exact judge sends none)
    assert after_minus_before(verified) == sum(r.probe_calls for r in recs.values())


def after_minus_before(verified):
    _, _, _, _, before, after = verified
    return after["requests"] - before["requests"]


@pytest.mark.slow  # builds, grades, traces and verifies a run (about 12 s)
def test_no_case_without_the_planted_page_is_confirmed(verified):
    _, rd, planted, _, _, _ = verified
    trace = {r.question_id: r for r in load_trace(rd)}
    others = [r for r in load_verify(rd) if r.experiment == "distractor_search"
              and planted not in (trace[r.question_id].noise_context or [])]
    assert others, "the run has no Distraction case without the planted page"
    assert all(r.verdict != "confirmed" for r in others), [(r.question_id, r.verdict) for r in others]
    assert all(r.reason for r in others)


@pytest.mark.slow  # builds, grades, traces and verifies a run (about 12 s)
def test_the_search_asks_the_probes_own_prompt_again(verified):
    srv, rd, _, _, before, after = verified
    # the re-run of the whole context is the trace's gold-plus-noise request again (same messages),
    # as a fresh draw: the server sees each such request a second time
    again = [k for k, n in after["ok_by_key"].items() if n == 2 and before["ok_by_key"].get(k) == 1]
    searches = [r for r in load_verify(rd) if r.experiment == "distractor_search"]
    assert len(again) == len(searches)
    steps = [s for r in searches for s in r.steps if s.role == "evaluated"]
    assert steps and {s.template for s in steps} == {"trace.gold_plus_noise"}


@pytest.mark.slow  # builds, grades, traces and verifies a run (about 12 s)
def test_a_second_verify_sends_nothing_and_keeps_the_records(verified):
    srv, rd, _, _, _, _ = verified
    first = (rd / runs.VERIFY).read_bytes()
    n = srv.stats()["requests"]
    res = invoke("trace", "verify", rd, "--judge", "exact", "--no-progress")
    assert res.exit_code == 0, res.output
    assert srv.stats()["requests"] == n and "0 model requests" in res.output
    assert (rd / runs.VERIFY).read_bytes() == first


@pytest.mark.slow  # builds, grades, traces and verifies a run (about 12 s)
def test_query_repair_searches_the_local_index_again(verified):
    _, rd, _, res, _, _ = verified
    trace = {r.question_id: r for r in load_trace(rd)}
    repairs = [r for r in load_verify(rd) if r.experiment == "query_repair"]
    assert {r.question_id for r in repairs} == {q for q, r in trace.items()
                                                if {"Pre-retrieval", "Retrieval"} & set(r.labels)}
    store = PageStore(rd / "pages.sqlite")
    try:
        index = make_backend("local", store=store, cache=None)
        for r in repairs:
            assert r.backend == "local" and r.live is False and r.repaired_queries
            for query in r.repaired_queries:
                assert r.results[query] == [x.url for x in index.search(query, 6)]
            seen = {u for rs in r.results.values() for u in rs}
            if set(trace[r.question_id].gold_urls) <= seen:  # every gold page back
                assert r.outcome == "Pre-retrieval" and r.found_by == "url-identity"
            else:  # the rest is the evidence match's (the exact judge's annotations)
                assert r.found_by in ("evidence-match", None) and set(r.found_urls) <= seen
                assert (r.outcome == "Pre-retrieval") == bool(r.found_urls)
            assert r.verdict == ("confirmed" if r.outcome == r.label else "refuted")
    finally:
        store.close()


@pytest.mark.slow  # builds, grades, traces and verifies a run (about 12 s)
def test_the_summary_gives_k_of_n_a_percentage_and_an_interval_per_label(verified):
    _, rd, _, res, _, _ = verified
    recs = [r for r in load_verify(rd) if r.experiment == "distractor_search"]
    k = sum(r.verdict == "confirmed" for r in recs)
    n = sum(r.verdict != "skipped" for r in recs)
    line = next(x for x in res.output.splitlines() if x.startswith("Distraction"))
    assert f"confirmed {k}/{n} ({100 * k / n:.1f}%, 95% CI " in line
    low, high = map(float, re.search(r"CI ([\d.]+)-([\d.]+)%", line).groups())
    assert low < 100 * k / n <= high


@pytest.mark.slow  # builds, grades, traces and verifies a run (about 12 s)
def test_a_record_names_its_experiment_verdict_and_reason(verified):
    _, rd, _, _, _, _ = verified
    for line in (rd / runs.VERIFY).read_text().splitlines():
        r = VerifyRecord.model_validate_json(line)
        assert r.verdict in ("confirmed", "refuted", "inconclusive", "skipped")
        assert (r.reason is None) == (r.verdict == "confirmed")
        assert r.calls >= r.probe_calls


def test_verify_before_trace_names_the_file(tmp_path):
    (tmp_path / "run").mkdir()
    res = invoke("trace", "verify", tmp_path / "run", "--judge", "exact", "--model", "m", "--base-url",
                 "http://127.0.0.1:9/v1")
    assert res.exit_code == 2 and "trace.jsonl" in res.output and "trek trace" in res.output


def test_a_fresh_draw_has_its_own_sample_index_and_moves_a_given_seed():
    from trek.trace.common import RoleModel
    from trek.trace.verify import CHECK_DRAW, RERUN_DRAW, _draw

    who = RoleModel("evaluated", client=None, model="m", params={"temperature": 0.7, "seed": 5})  # type: ignore[arg-type]
    assert _draw(who, 0) is who
    again = _draw(who, RERUN_DRAW)
    assert again.params == {"temperature": 0.7, "seed": 5 + RERUN_DRAW, "sample": RERUN_DRAW}
    assert _draw(who, CHECK_DRAW).params["sample"] == CHECK_DRAW != RERUN_DRAW
    assert who.params == {"temperature": 0.7, "seed": 5}  # the role itself is unchanged
    plain = RoleModel("evaluated", client=None, model="m")  # type: ignore[arg-type]
    assert _draw(plain, RERUN_DRAW).params == {"sample": RERUN_DRAW}  # no seed is invented


@pytest.mark.slow  # builds, grades, traces and verifies a run (about 12 s)
def test_the_dry_run_brackets_the_probes_verify_then_asked(verified):
    _, rd, _, _, _, _ = verified
    out = DRY[rd]
    for role in ("diagnostic", "analysis"):  # the exact judge: no call
        assert f"trek trace verify, {role} role (no model call)" in out, out
    line = next(x for x in out.splitlines() if x.startswith("trek trace verify, evaluated role"))
    low, high = map(int, re.search(r"-> ([\d,]+) - ([\d,]+) calls", line).groups())
    recs = load_verify(rd)
    searches = [r for r in recs if r.experiment == "distractor_search" and r.noise_pages is not None]
    asked = sum(r.probe_calls for r in recs)
    assert low == len(searches) <= asked <= high, (low, asked, high)
    assert high >= sum(len(r.tests) for r in recs)
    tokens = re.search(r"input tokens: +([\d,]+) - ([\d,]+)", out.split(line)[1]).groups()
    assert 0 < int(tokens[0].replace(",", "")) < int(tokens[1].replace(",", ""))


def test_ddmin_never_asks_more_than_its_worst_case_bound():
    import random

    from trek.trace.verify_estimate import ddmin_worst

    for n in range(1, 11):
        for trial in range(200):
            rnd = random.Random(1000 * n + trial)
            culprits = [set(rnd.sample(range(n), rnd.randint(1, n))) for _ in range(rnd.randint(1, 3))]
            memo = {}

            async def flips(subset, culprits=culprits, memo=memo, rnd=rnd, coin=trial % 2):
                key = tuple(sorted(subset))
                if key not in memo:  # verify asks each subset once (its memo)
                    memo[key] = rnd.random() < 0.5 if coin else any(c <= set(subset) for c in culprits)
                return memo[key]
            asyncio.run(ddmin(range(n), flips))
            assert len(memo) <= ddmin_worst(n), (n, trial, len(memo))
    assert [ddmin_worst(n) for n in (0, 1, 2, 20)] == [0, 0, 9, 270]


@pytest.mark.slow  # builds, grades, traces and verifies a run (about 12 s)
def test_a_limit_of_probes_stops_a_search_inconclusive_and_caps_the_estimate(verified, tmp_path, monkeypatch):
    import shutil

    _, rd, _, _, _, _ = verified
    before = {r.question_id: r for r in load_verify(rd) if r.experiment == "distractor_search"}
    over = [q for q, r in before.items() if r.verdict == "confirmed" and r.probe_calls > 3]
    assert over, "no confirmed search needed more than 3 probes"
    copy = tmp_path / "run"
    shutil.copytree(rd, copy, ignore=shutil.ignore_patterns("*.lock"))
    (copy / runs.VERIFY).unlink()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    dry = invoke("trace", "verify", copy, "--judge", "exact", "--no-progress", "--dry-run", "--max-probes", "3")
    line = next(x for x in dry.output.splitlines() if x.startswith("trek trace verify, evaluated role"))
    high = int(re.search(r"-> [\d,]+ - ([\d,]+) calls", line).group(1))
    searches = [r for r in before.values() if r.noise_pages is not None]
    assert high <= 3 * len(searches), dry.output
    res = invoke("trace", "verify", copy, "--judge", "exact", "--no-progress", "--max-probes", "3")
    assert res.exit_code == 0, res.output
    after = {r.question_id: r for r in load_verify(copy) if r.experiment == "distractor_search"}
    assert all(r.probe_calls <= 3 for r in after.values())
    for q in over:
        assert after[q].verdict == "inconclusive" and "limit of 3 probes" in after[q].reason
        assert after[q].minimal_set is None
    # a search that needed no more than the limit gets the verdict it had
    for q, r in before.items():
        if q not in over and r.probe_calls <= 3:
            assert after[q].verdict == r.verdict, q
