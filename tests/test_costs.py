"""Table 12 on made-up runs whose numbers are worked out by hand."""

import math

import pytest

from trek import runs
from trek.costs import search_calls_billed
from trek.llm.usage import Price, PriceTable
from trek.report.costs import cost_table
from trek.types import Grade, Question, RunMeta, SearchCall, Trajectory, Usage, write_jsonl

PRICES = PriceTable({"m": Price(input=1.0, output=10.0), "judge": Price(input=0.5, output=2.0)},
                    {"tavily": 0.01, "openai": 0.02})


def _run(root, name, *, search, effort, trajs, grades=()):
    d = root / name
    qs = [Question(id=f"q{i}", dataset="freshqa", question=f"Q{i}?", answers=["a"]) for i in range(2)]
    write_jsonl(d / runs.QUESTIONS, qs)
    write_jsonl(d / runs.ANSWERS, trajs)
    if grades:
        write_jsonl(d / runs.GRADES, list(grades))
    runs.write_meta(d, RunMeta(run_id=name, kind="wild", model="m",
                               config={"system": {"system": "agentic", "search": search, "effort": effort}}))
    return d


def _call(q, action=None):
    return SearchCall(query=q, backend="x", action=action)


def test_cost_table_by_hand(tmp_path):
    a = _run(tmp_path, "a", search="tavily", effort="high", trajs=[
        # 1000 in (200 cached), 100 out (40 reasoning); recorded $0.002; two searches
        Trajectory(question_id="q0", model="m", usage=Usage(prompt_tokens=1000, cached_tokens=200, completion_tokens=100,
                                                            reasoning_tokens=40, calls=2, cost_usd=0.002),
                   search_calls=[_call("x"), _call("y")]),
        # recorded without dollars: priced now, 500 * $1/M + 50 * $10/M = $0.001; one search
        Trajectory(question_id="q1", model="m", usage=Usage(prompt_tokens=500, completion_tokens=50, calls=1, cost_usd=None),
                   search_calls=[_call("z")]),
    ], grades=[
        Grade(question_id="q0", dataset="freshqa", response="a", outcome="correct", grader="g", grader_version="1", judge_model="judge",
              usage=Usage(prompt_tokens=100, completion_tokens=10, calls=1, cost_usd=0.0003)),
        Grade(question_id="q1", dataset="freshqa", response="b", outcome="incorrect", grader="g", grader_version="1", method="exact", usage=Usage()),
    ])
    b = _run(tmp_path, "b", search="openai", effort="low", trajs=[
        # native search: three queries in two actions -> 2 billed calls at $0.02
        Trajectory(question_id="q0", model="m", usage=Usage(prompt_tokens=2000, completion_tokens=300, calls=1, cost_usd=0.005),
                   search_calls=[_call("p", 0), _call("q", 0), _call("r", 1)]),
    ])
    t = cost_table({"A": a, "B": b}, PRICES)
    assert list(t.index) == ["A", "B", "total"]
    ra = t.loc["A"]
    assert (ra["model"], ra["search"], ra["effort"], ra["questions"]) == ("m", "tavily", "high", 2)
    assert ra["input_k"] == pytest.approx(1.5) and ra["cached_input_k"] == pytest.approx(0.2)
    assert ra["output_k"] == pytest.approx(0.15) and ra["reasoning_k"] == pytest.approx(0.04)
    assert ra["token_usd"] == pytest.approx(0.003)
    assert ra["search_calls"] == 3 and ra["search_usd"] == pytest.approx(0.03)
    assert ra["judge_usd"] == pytest.approx(0.0003)
    assert ra["total_usd"] == pytest.approx(0.0333)
    rb = t.loc["B"]
    assert rb["search_calls"] == 2 and rb["search_usd"] == pytest.approx(0.04) and rb["judge_usd"] == 0
    assert rb["total_usd"] == pytest.approx(0.045)
    tot = t.loc["total"]
    assert tot["input_k"] == pytest.approx(3.5) and tot["search_calls"] == 5
    assert tot["total_usd"] == pytest.approx(0.0783)


def test_unknown_prices_stay_unknown(tmp_path):
    d = _run(tmp_path, "c", search="brave", effort=None, trajs=[
        Trajectory(question_id="q0", model="unpriced-model", usage=Usage(prompt_tokens=10, calls=1, cost_usd=None),
                   search_calls=[_call("x")]),
    ])
    t = cost_table({"C": d}, PRICES)
    assert math.isnan(t.loc["C", "token_usd"]) and math.isnan(t.loc["C", "search_usd"])
    assert math.isnan(t.loc["total", "total_usd"])  # never silently lower
    assert t.loc["C", "effort"] == "-"


def test_search_calls_billed():
    t = Trajectory(question_id="q", model="m", search_calls=[_call("a"), _call("b", 3), _call("c", 3)])
    assert search_calls_billed(t) == 2


def test_the_embedded_model_is_priced_at_zero():
    from trek.costs import load_prices
    from trek.local import MODEL_NAME

    p = load_prices()
    assert p.cost(MODEL_NAME, Usage(prompt_tokens=1000, completion_tokens=10)) == 0.0
    assert p.search_fee("local") == 0.0


def test_trek_cost_and_table_12_agree_on_a_batch_graded_traced_run(tmp_path, monkeypatch):
    # answers with recorded dollars and searches, grades made through the (fake) Batch API at
    # half price, and a TrekTrace file: `trek cost` total == Table 12 total == what was recorded
    from test_grading import QUESTIONS, SCRIPT
    from typer.testing import CliRunner

    from trek.cli import app
    from trek.costs import summarize_usage
    from trek.grading import run_grading_batch
    from trek.llm import LLMCache, LLMClient
    from trek.testing.fake_openai import FakeOpenAIServer
    from trek.trace.records import Step, TraceRecord
    from trek.types import read_jsonl

    monkeypatch.delenv("TREK_CACHE", raising=False)
    monkeypatch.delenv("TREK_PROMPTS", raising=False)
    prices = PriceTable({"m": Price(input=1.0, output=10.0), "gpt-4o-mini": Price(input=1.0, output=4.0),
                         "diag": Price(input=3.0, output=15.0)}, {"tavily": 0.01})
    d = tmp_path / "run"
    write_jsonl(d / runs.QUESTIONS, QUESTIONS)
    answers = [Trajectory(question_id=q.id, model="m", final_answer=a, search_calls=[_call("x")] * n,
                          usage=Usage(prompt_tokens=1000 * n, completion_tokens=50, calls=n, cost_usd=0.0015 * n))
               for q, a, n in zip(QUESTIONS[1:4], ["Saturn VI (Titan)", "Someone Else", "twelve"], [1, 2, 3], strict=True)]
    write_jsonl(d / runs.ANSWERS, answers)
    runs.write_meta(d, RunMeta(run_id="r", kind="wild", model="m",
                               config={"system": {"system": "agentic", "search": "tavily", "effort": None}}))
    with FakeOpenAIServer(script=SCRIPT, batch_delay=0.02) as srv:
        judge = LLMClient("gpt-4o-mini", base_url=srv.base_url, api_key="sk-test", prices=prices, progress=False,
                          cache=LLMCache(d / "llm-cache.sqlite"), max_retries=0)
        run_grading_batch(d, judge, progress=False, poll_seconds=0.02)
    grades = read_jsonl(d / runs.GRADES, Grade)
    judged = [g for g in grades if g.usage.calls]
    assert len(judged) == 3 and all(g.usage.cost_usd == pytest.approx(0.5 * prices.cost("gpt-4o-mini", g.usage))
                                    for g in judged)
    steps = [Step(name="retrieval", role="diagnostic", model="diag", endpoint="e", template="t", version="1",
                  status="ok", usage=Usage(prompt_tokens=2000, completion_tokens=100, calls=1, cost_usd=0.0075)),
             Step(name="gold_only", role="evaluated", model="m", endpoint="e", template="t", version="1",
                  status="ok", usage=Usage(prompt_tokens=500, completion_tokens=20, calls=1, cost_usd=0.0007))]
    trace = TraceRecord(question_id="freshqa:2", dataset="freshqa", question="q", answers=["Titan"],
                        original_outcome="incorrect", status="done", steps=steps,
                        usage=steps[0].usage + steps[1].usage)
    write_jsonl(d / runs.TRACE, [trace])

    recorded = (sum(t.usage.cost_usd for t in answers) + 6 * 0.01  # six searches at the Tavily fee
                + sum(g.usage.cost_usd for g in grades) + trace.usage.cost_usd)
    table = cost_table({"r": d}, prices)
    assert table.loc["total", "total_usd"] == pytest.approx(recorded)
    assert table.loc["r", "judge_usd"] == pytest.approx(sum(g.usage.cost_usd for g in grades) + 0.0082)
    from trek.costs import run_spend

    spend = run_spend(d, prices)
    assert spend.trace_usd == pytest.approx(0.0082) and spend.total_usd == pytest.approx(recorded)
    summary = summarize_usage(d, prices).set_index(["file", "model"])
    assert summary.loc[("TOTAL", ""), "cost_usd"] == pytest.approx(recorded)
    assert summary.loc[("trace.jsonl", "diag"), "cost_usd"] == pytest.approx(0.0075)  # by the step's model
    assert summary.loc[("answers.jsonl", "search:tavily"), "calls"] == 6
    full_price = sum(prices.cost("gpt-4o-mini", g.usage) for g in judged)
    assert summary.loc[("grades.jsonl", "gpt-4o-mini"), "cost_usd"] == pytest.approx(full_price / 2)  # discount kept

    monkeypatch.setenv("TREK_PRICES", str(tmp_path / "none.json"))
    (tmp_path / "none.json").write_text("{}")
    out = CliRunner().invoke(app, ["cost", str(d)]).output
    assert "trace.jsonl" in out and "?" not in out.split()


def test_the_bundled_price_table_says_where_every_price_comes_from(monkeypatch):
    import json
    from importlib import resources

    from trek.costs import load_prices

    monkeypatch.delenv("TREK_PRICES", raising=False)

    data = json.loads(resources.files("trek").joinpath("prices.json").read_text())
    entries = {k: v for k, v in data.items() if not k.startswith("_") and k != "search"}
    entries |= {f"search:{k}": v for k, v in data["search"].items() if not k.startswith("_")}
    for name, e in entries.items():
        assert e.get("source") and e.get("date") and isinstance(e.get("verified"), bool), name
    # the models the paper evaluates, and its embedder, are priced (Gemini by prefix)
    p = load_prices()
    for model in ("gpt-5.4", "gpt-5.4-mini", "gemini-3.1-pro-preview", "claude-opus-4-6", "text-embedding-3-small"):
        assert p.get(model) is not None, model
    assert p.search_fee("tavily") == 0.008 and p.search_fee("openai") == 0.01 and p.search_fee("duckduckgo") == 0.0
    assert p.get("a-model-nobody-priced") is None  # a missing price stays missing


def test_search_fees_as_numbers_or_documented_objects(tmp_path):
    import json

    f = tmp_path / "p.json"
    f.write_text(json.dumps({"search": {"a": 0.5, "b": {"usd_per_call": 0.25, "source": "x"}}}))
    p = PriceTable.load(f)
    assert p.search_fee("a") == 0.5 and p.search_fee("b") == 0.25
    f.write_text(json.dumps({"search": {"c": {"source": "x"}}}))
    with pytest.raises(ValueError, match="'c' needs a 'usd_per_call'"):
        PriceTable.load(f)


# -- malformed usage is named, never summed or dropped ----------------------------------------------
def _cost_run(tmp_path, records):
    import json

    run = tmp_path / "run"
    run.mkdir()
    (run / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run


GOOD = {"question_id": "q1", "model": "gpt-4o", "usage": {"prompt_tokens": 10, "completion_tokens": 5, "calls": 1}}


@pytest.mark.parametrize("bad, expected", [
    ({"usage": {"prompt_tokens": -100, "calls": 1}}, "line 2: field 'usage.prompt_tokens': a token or call count cannot be negative, got -100"),
    ({"usage": {"completion_tokens": 5, "calls": -1}}, "field 'usage.calls': a token or call count cannot be negative"),
    ({"usage": {"calls": 1, "cost_usd": -2.0}}, "field 'usage.cost_usd': must be a non-negative number of dollars"),
    ({"usage": "1000 tokens"}, "line 2: field 'usage': must be an object of token counts, got str"),
    ({"usage": [1, 2]}, "field 'usage': must be an object of token counts, got list"),
    ({"usage": {"prompt_tokens": "many", "calls": 1}}, "field 'usage': field 'prompt_tokens'"),
    ({"usage": {"prompt_tokens": 1, "calls": 1}, "search_usage": 7}, "field 'search_usage': must be an object"),
    ({"usage": {"prompt_tokens": 1, "calls": 1}, "search_usage": {"prompt_tokens": 50, "calls": 1}},
     "field 'search_usage': counts more than the record's whole 'usage'"),
])
def test_cost_names_malformed_usage_records(tmp_path, bad, expected):
    from typer.testing import CliRunner

    from trek.cli import app

    run = _cost_run(tmp_path, [GOOD, {"question_id": "q2", "model": "gpt-4o", **bad}])
    r = CliRunner().invoke(app, ["cost", str(run)])
    flat = " ".join(r.output.split())
    assert r.exit_code == 2, r.output
    assert "answers.jsonl" in flat and expected in flat, flat
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_cost_of_well_formed_records_still_sums(tmp_path):
    from trek.costs import summarize_usage

    run = _cost_run(tmp_path, [GOOD, {**GOOD, "question_id": "q2"}])
    df = summarize_usage(run)
    assert int(df[df["file"] == "TOTAL"]["prompt_tokens"].iloc[0]) == 20
