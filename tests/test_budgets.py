"""A budget is a ceiling across invocations, for every command that spends.

Each command runs three times under one ``--budget`` against the scripted fake server of the
offline demo (prices from a ``--prices`` file). The spend is measured twice, independently of the
command's own accounting: the ledger it keeps (the dollars it recorded) and the bill, i.e. every
reply the server sent priced at the table (each reply is stored once in the response cache; the
server's request count checks that none is missing). Three invocations together stay within the
budget; the first is stopped by it (exit 3, "budget cap"); a fourth with room finishes.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from _scripts import load_script
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.costs import summarize_usage
from trek.ctrl.pools import from_mini, write_pools
from trek.datasets import mini
from trek.llm.ledger import read_ledger
from trek.llm.usage import PriceTable, price_factor, usage_from_raw
from trek.report.costs import cost_table
from trek.testing.fake_openai import FakeOpenAIServer

MODEL, JUDGE, DIAG, ANA = "demo-lm", "demo-judge", "demo-diagnostic-judge", "demo-analysis-judge"
FABRICATOR, FINDER = "scripted-demo", "fake-model"
RATE = 100.0  # dollars per million tokens, in and out: a demo call costs cents


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for var in [k for k in os.environ if k.startswith(("OPENAI_", "TREK_"))]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


@pytest.fixture(scope="module")
def prices(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("prices") / "prices.json"
    p.write_text(json.dumps({m: {"input": RATE, "output": RATE} for m in (MODEL, JUDGE, DIAG, ANA, FABRICATOR, FINDER)}))
    return p


@pytest.fixture(scope="module")
def server():
    bench = mini.load()
    script = (load_script("demo_runs").demo_script(bench.questions, bench)
              + load_script("demo_trace").demo_trace_script(bench, MODEL))
    with FakeOpenAIServer(script=script) as srv:
        yield srv


def bill(cache: Path, table: PriceTable) -> tuple[float, int]:
    """(dollars, replies) of every reply stored in a response cache, priced at the table."""
    if not cache.exists():
        return 0.0, 0
    con = sqlite3.connect(cache)
    try:
        rows = con.execute("SELECT request, response FROM responses").fetchall()
    finally:
        con.close()
    total = 0.0
    for req, resp in rows:
        raw = json.loads(resp)
        total += table.cost(json.loads(req)["body"]["model"], usage_from_raw(raw)) * (price_factor(raw) or 1.0)
    return total, len(rows)


def invoke(args: list[str]):
    return CliRunner().invoke(app, args)


def three_under_one_budget(srv, args, budget, ledger: Path, cache: Path, prices: Path) -> dict:
    """Run ``args --budget B`` three times; check the ceiling; then once with room. Returns figures."""
    table = PriceTable.load(prices)
    bill0, rows0 = bill(cache, table)
    srv.reset_stats()
    results = []
    for _ in range(3):
        r = invoke([*args, "--budget", str(budget), "--prices", str(prices), "--assume-output", "64", "--yes"])
        results.append(r)
        assert r.exit_code in (0, 3), r.output
    spent = read_ledger(ledger)
    paid, rows = bill(cache, table)
    assert srv.stats()["requests"] == rows - rows0  # every reply the server sent is priced
    assert results[0].exit_code == 3 and "budget cap" in results[0].output, results[0].output
    assert spent <= budget and paid - bill0 <= budget + 1e-9
    assert spent == pytest.approx(paid - bill0)  # the ledger recorded what the server billed
    assert spent > 0.25 * budget  # the budget was used, not refused wholesale
    room = invoke([*args, "--budget", str(budget * 100), "--prices", str(prices), "--assume-output", "64", "--yes"])
    assert room.exit_code == 0, room.output
    return {"budget": budget, "spent": spent, "total": read_ledger(ledger), "requests": srv.stats()["requests"]}


@pytest.fixture(scope="module")
def wild(server, prices, tmp_path_factory):
    """Answered (three invocations under a budget, then with room), graded and traced likewise."""
    run = tmp_path_factory.mktemp("wild") / "run"
    out = {}
    wild_args = ["wild", "run", "--model", MODEL, "--base-url", server.base_url, "--run", str(run), "--questions",
                 "mini", "--search", "local", "--system", "search-then-read", "--limit", "12", "--no-progress"]
    out["wild"] = three_under_one_budget(server, wild_args, 0.5, run / ".answers.jsonl.spend",
                                         run / "llm-cache.sqlite", prices)
    grade_args = ["grade", str(run), "--judge", JUDGE, "--judge-base-url", server.base_url, "--no-progress",
                  "--max-connections", "4"]
    out["grade"] = three_under_one_budget(server, grade_args, 0.12, run / ".grades.jsonl.spend",
                                          run / "llm-cache.sqlite", prices)
    trace_args = ["trace", str(run), "--diagnostic-judge", DIAG, "--analysis-judge", ANA, "--judge-base-url",
                  server.base_url, "--base-url", server.base_url, "--no-progress"]
    out["trace"] = three_under_one_budget(server, trace_args, 1.0, run / ".trace.jsonl.spend",
                                          run / "llm-cache.sqlite", prices)
    return run, out


@pytest.mark.slow  # the demo chain against the fake server: seconds
@pytest.mark.parametrize("stage", ["wild", "grade", "trace"])
def test_wild_grade_and_trace_spend_at_most_their_budget_over_three_invocations(wild, stage):
    _, figures = wild
    f = figures[stage]
    assert f["spent"] <= f["budget"]


@pytest.mark.slow  # the demo chain against the fake server, then verify on a copy of the traced run
def test_verify_spends_at_most_its_budget_and_stops_cleanly(wild, server, prices, tmp_path):
    import shutil

    run, _ = wild
    copy, other = tmp_path / "run", tmp_path / "other"
    for c in (copy, other):
        shutil.copytree(run, c, ignore=shutil.ignore_patterns("*.lock"))

    def args(rd):
        return ["trace", "verify", str(rd), "--diagnostic-judge", DIAG, "--analysis-judge", ANA, "--judge-base-url",
                server.base_url, "--base-url", server.base_url, "--no-progress"]
    first = invoke([*args(other), "--budget", "0.3", "--prices", str(prices), "--assume-output", "64", "--yes"])
    # stopped by the budget: experiments left pending (never a verdict), exit 3, a line that resumes
    assert first.exit_code == 3, first.output
    assert "budget cap" in first.output and "resume with the same command" in first.output
    recs = [json.loads(x) for x in (other / runs.VERIFY).read_text().splitlines()]
    pending = [r for r in recs if r["status"] == "pending"]
    assert pending and all(r["verdict"] is None and "budget" in r["error"] for r in pending)
    assert 0 < read_ledger(other / ".verify.jsonl.spend") <= 0.3
    f = three_under_one_budget(server, args(copy), 0.3, copy / ".verify.jsonl.spend", copy / "llm-cache.sqlite", prices)
    assert f["spent"] <= f["budget"]
    recs = [json.loads(x) for x in (copy / runs.VERIFY).read_text().splitlines()]
    assert recs and all(r["status"] == "done" and r["verdict"] for r in recs)
    # the labels are not touched by verification
    assert (copy / runs.TRACE).read_bytes() == (run / runs.TRACE).read_bytes()


@pytest.mark.slow  # the demo chain against the fake server: seconds
def test_trek_cost_is_every_stages_records_and_table_12(wild, prices):
    run, _ = wild
    table = PriceTable.load(prices)
    recorded = 0.0
    for name in (runs.ANSWERS, runs.GRADES, runs.TRACE):
        for line in (run / name).read_text().splitlines():
            rec = json.loads(line)
            steps = rec.get("steps") or []
            usages = [s["usage"] for s in steps] if steps and all("usage" in s for s in steps) else [rec.get("usage") or {}]
            recorded += sum(u.get("cost_usd") or 0.0 for u in usages)
    summary = summarize_usage(run, table)
    total = summary.loc[summary["file"] == "TOTAL", "cost_usd"].item()
    assert total > 0 and total == pytest.approx(recorded)
    assert cost_table({"r": run}, table).loc["total", "total_usd"] == pytest.approx(total)
    r = invoke(["cost", str(run), "--prices", str(prices)])
    assert r.exit_code == 0 and f"${total:.4f}" in r.output


def test_llm_run(prices, tmp_path):
    req, out = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    req.write_text("".join(json.dumps({"id": f"r{i}", "model": JUDGE, "max_tokens": 20, "messages": [
        {"role": "user", "content": f"question number {i} " + "about the weather " * 20}]}) + "\n" for i in range(12)))
    with FakeOpenAIServer() as srv:
        args = ["llm", "run", str(req), "--out", str(out), "--base-url", srv.base_url, "--no-progress"]
        three_under_one_budget(srv, args, 0.04, tmp_path / ".out.jsonl.spend", tmp_path / "llm-cache.sqlite", prices)


@pytest.fixture(scope="module")
def ctrl_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("ctrl") / "build"
    r = invoke(["ctrl", "build", "--source", "mini", "--out", str(out), "--conditions", "OO,GOLD", "--no-tokens"])
    assert r.exit_code == 0, r.output
    return out


@pytest.mark.slow  # the demo chain against the fake server: seconds
def test_ctrl_run_with_its_judge(ctrl_build, prices, tmp_path):
    from trek.contexts import read_contexts
    from trek.rag.context import load_ctrl_questions
    from trek.types import iter_json_lines

    demo_ctrl, demo_runs = load_script("demo_ctrl"), load_script("demo_runs")
    raw = [obj for _, obj in iter_json_lines(ctrl_build / "contexts.jsonl")]
    questions = load_ctrl_questions(ctrl_build / "pools.jsonl")
    bench = mini.load()
    judge_rules = [r for r in demo_runs.demo_script(bench.questions, bench) if r.get("model") == JUDGE]
    assert read_contexts(ctrl_build / "contexts.jsonl")
    runs_dir = tmp_path / "grid"
    with demo_ctrl.scripted_server(judge_rules + demo_ctrl.ctrl_script(raw, questions),
                                   [q.question for q in questions.values()]) as srv:
        args = ["ctrl", "run", str(ctrl_build / "contexts.jsonl"), "--model", MODEL, "--base-url", srv.base_url,
                "--runs", str(runs_dir), "--methods", "direct", "--conditions", "OO,GOLD", "--judge", JUDGE,
                "--judge-base-url", srv.base_url, "--no-progress"]
        f = three_under_one_budget(srv, args, 0.6, runs_dir / ".ctrl.spend", runs_dir / "llm-cache.sqlite", prices)
    judged = sum(1 for d in runs_dir.iterdir() if (d / runs.GRADES).exists())
    assert judged == 2 and f["total"] > f["budget"]  # the judge graded both runs, inside the grid's ledger


@pytest.mark.slow  # the demo chain against the fake server: seconds
def test_ctrl_build_with_a_model(prices, tmp_path):
    ids = ["mini:01", "mini:02", "mini:03", "mini:04", "mini:05", "mini:06"]
    script = load_script("demo_ctrl_build").demo_script(from_mini(question_ids=ids), target=2)
    out = tmp_path / "build"
    with FakeOpenAIServer(script=script) as srv:
        args = ["ctrl", "build", "--source", "mini", "--questions", ",".join(ids), "--out", str(out), "--model",
                FABRICATOR, "--base-url", srv.base_url, "--fabrications", "2", "--attempts", "1", "--conditions", "SAA",
                "--no-tokens", "--fabricator", "model"]
        three_under_one_budget(srv, args, 0.15, out / ".build.spend", out / "llm-cache.sqlite", prices)
    pools = [json.loads(x) for x in (out / "pools.jsonl").read_text().splitlines()]
    assert all(not p["notes"]["fabrication"]["pending"] for p in pools)


@pytest.mark.slow  # the demo chain against the fake server: seconds
def test_ctrl_discover(prices, tmp_path):
    from test_ctrl_discovery import SCRIPT, mini_pages

    pools = from_mini(question_ids=["mini:01", "mini:02", "mini:03", "mini:04"])
    start = write_pools(tmp_path / "start.jsonl", [p.model_copy(update={"documents": p.gold}) for p in pools])
    pages = mini_pages(tmp_path)
    out = tmp_path / "pools.jsonl"
    with FakeOpenAIServer(script=SCRIPT) as srv:
        args = ["ctrl", "discover", "--source", "pools", "--pools", str(start), "--pages", str(pages), "--model",
                FINDER, "--base-url", srv.base_url, "--search", "local", "--out", str(out), "--historical", "4",
                "--relevance", "2"]
        three_under_one_budget(srv, args, 0.3, tmp_path / ".pools.jsonl.spend", tmp_path / "llm-cache.sqlite", prices)


# -- bad budgets ---------------------------------------------------------------------------------
COMMANDS = {
    "wild run": ["wild", "run", "--model", "m", "--run", "r", "--questions", "mini"],
    "grade": ["grade", "r", "--judge", "j"],
    "trace": ["trace", "r", "--judge", "j"],
    "ctrl run": ["ctrl", "run", "c.jsonl", "--model", "m", "--runs", "g"],
    "ctrl build": ["ctrl", "build", "--out", "o", "--model", "m"],
    "ctrl discover": ["ctrl", "discover", "--out", "o.jsonl", "--model", "m"],
    "llm run": ["llm", "run", "q.jsonl", "--out", "o.jsonl"],
}


@pytest.mark.parametrize("value", ["nan", "-1", "inf", "five"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_bad_budgets_are_refused_by_every_command(command, value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = invoke([*COMMANDS[command], "--budget", value])
    assert r.exit_code == 2 and "--budget" in r.output, r.output
    assert list(tmp_path.iterdir()) == []  # refused before anything is written


# -- dry runs see what the run will do -----------------------------------------------------------
def calls(output: str) -> str:
    """The "-> N calls" part of an estimate's first line (``0`` when nothing would be sent)."""
    line = next(x for x in output.splitlines() if "already done or in the cache" in x)
    return line.split("-> ")[1].split(" calls")[0]


@pytest.mark.slow  # the demo chain against the fake server: seconds
def test_dry_runs_follow_the_stages_rule_for_what_is_kept(wild, server, prices, tmp_path, monkeypatch):
    run, _ = wild
    common = ["--prices", str(prices), "--dry-run", "--no-progress"]
    wild_args = ["wild", "run", "--model", MODEL, "--base-url", server.base_url, "--run", str(run), "--questions",
                 "mini", "--search", "local", "--system", "search-then-read", "--limit", "12", *common]
    grade_args = ["grade", str(run), "--judge", JUDGE, "--judge-base-url", server.base_url, *common]
    trace_args = ["trace", str(run), "--diagnostic-judge", DIAG, "--analysis-judge", ANA, "--judge-base-url",
                  server.base_url, "--base-url", server.base_url, *common]
    before = server.stats()["requests"]
    for args in (wild_args, grade_args, trace_args):
        r = invoke(args)
        assert r.exit_code == 0 and calls(r.output) == "0", r.output  # everything is kept
    # a changed prompt template re-answers every question: the dry run says so (it used to count
    # the final answers as done whatever their input key)
    (tmp_path / "agent.read_context.txt").write_text("Pages:\n{documents}\n\n{question_prompt}\n")
    monkeypatch.setenv("TREK_PROMPTS", str(tmp_path))
    r = invoke(wild_args)
    assert r.exit_code == 0 and calls(r.output) == "12", r.output
    monkeypatch.delenv("TREK_PROMPTS")
    r = invoke([*grade_args[:3], "other-judge", *grade_args[4:]])  # another judge re-grades
    assert r.exit_code == 0 and calls(r.output) not in ("0", "0 - 0"), r.output
    r = invoke([*trace_args[:5], "other-judge", *trace_args[6:]])  # another analysis judge re-traces
    assert r.exit_code == 0 and "8 items, 0 already done" in r.output, r.output
    # another model is refused by the dry run as by the run itself
    r = invoke([*wild_args[:3], "other-model", *wild_args[4:]])
    assert r.exit_code == 2 and "holds a run of model 'demo-lm'" in r.output
    assert server.stats()["requests"] == before and read_ledger(run / ".answers.jsonl.spend") > 0


# -- kill -9 --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_kill_mid_flight_does_not_reopen_the_budget(tmp_path, prices):
    """``trek llm run`` killed with calls in flight, then resumed twice under the same budget: what
    the server served (every request that arrived, at its price) stays within the budget."""
    import signal
    import subprocess
    import sys

    from trek.testing.fake_openai import _count_tokens

    req, out = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    prompts = [f"question {i:03d} " + "about the weather " * 30 for i in range(40)]
    req.write_text("".join(json.dumps({"id": f"r{i}", "model": JUDGE, "max_tokens": 20, "messages": [
        {"role": "user", "content": p}]}) + "\n" for i, p in enumerate(prompts)))
    per_call = (_count_tokens(prompts[0]) + 3) * RATE / 1e6  # every reply: the prompt's words + 3 ("fake answer <hash>")
    assert {_count_tokens(p) for p in prompts} == {_count_tokens(prompts[0])}
    budget = 20 * per_call
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TREK_"))} | {"OPENAI_API_KEY": "sk"}
    with FakeOpenAIServer(latency=0.5) as srv:
        args = [sys.executable, "-m", "trek.cli", "llm", "run", str(req), "--out", str(out), "--base-url",
                srv.base_url, "--budget", str(budget), "--prices", str(prices), "--no-progress", "--max-connections",
                "8", "--yes"]
        p = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        srv.wait_for(lambda s: s["requests"] >= 12, timeout=120)  # the second wave is in flight
        p.send_signal(signal.SIGKILL)
        p.communicate(timeout=60)
        killed_at = srv.stats()["requests"]
        held = read_ledger(tmp_path / ".out.jsonl.spend")
        assert held >= killed_at * per_call  # calls cut off in flight count at their worst case
        for _ in range(2):
            r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
            assert r.returncode == 3 and "budget cap" in r.stderr, r.stderr
        served = srv.stats()["requests"]
    assert served * per_call <= budget + 1e-12
    assert read_ledger(tmp_path / ".out.jsonl.spend") <= budget


def test_grading_through_the_batch_api_keeps_to_the_budget(tmp_path, monkeypatch):
    from test_grading import QUESTIONS, SCRIPT, trajectories

    from trek.grading import run_grading_batch
    from trek.llm import LLMCache, LLMClient
    from trek.llm.usage import Price
    from trek.types import write_jsonl

    d = tmp_path / "run"
    write_jsonl(d / runs.QUESTIONS, QUESTIONS)
    write_jsonl(d / runs.ANSWERS, trajectories())
    table = PriceTable({"judge-model": Price(input=RATE, output=RATE)})
    with FakeOpenAIServer(script=SCRIPT, batch_delay=0.02) as srv:
        def judge(budget):
            return LLMClient("judge-model", base_url=srv.base_url, prices=table, budget_usd=budget, progress=False,
                             cache=LLMCache(d / "llm-cache.sqlite"), assume_output=64, max_retries=0)

        with pytest.raises(ValueError, match="the batch may cost up to"):  # 3 judge calls, ~$0.01 each at worst
            run_grading_batch(d, judge(0.005), progress=False, poll_seconds=0.02)
        assert srv.stats()["batches"] == 0
        report, br = run_grading_batch(d, judge(1.0), progress=False, poll_seconds=0.02)
    ledger = read_ledger(d / ".grades.jsonl.spend")
    assert br.cost_usd > 0 and ledger == pytest.approx(br.cost_usd)  # the batch's half-price bill
    assert ledger == pytest.approx(sum(g.usage.cost_usd or 0.0 for g in report.grades))


def test_ctrl_run_dry_run_estimates_the_judge(ctrl_build, prices, tmp_path):
    args = ["ctrl", "run", str(ctrl_build / "contexts.jsonl"), "--model", MODEL, "--runs", str(tmp_path / "g"),
            "--methods", "direct", "--conditions", "OO", "--prices", str(prices), "--dry-run"]
    alone = invoke(args)
    judged = invoke([*args, "--judge", JUDGE])
    assert alone.exit_code == 0 and judged.exit_code == 0, judged.output
    assert "judge: answers to make (demo-judge): 36 items, 0 already done or in the cache -> 36 calls" in judged.output
    assert "judge" not in alone.output.split("roles")[0].replace("--judge", "")
    high = lambda out: float(out.strip().splitlines()[-1].split("$")[-1])  # noqa: E731 - "total: $lo - $hi"
    assert high(judged.output) > float(alone.output.split("estimate:")[1].split("$")[2].split()[0])
    assert not (tmp_path / "g").exists()  # a dry run writes nothing


@pytest.mark.slow  # the demo chain against the fake server: seconds
def test_trek_cost_lists_the_ledgers(wild, prices):
    run, _ = wild
    r = invoke(["cost", str(run), "--prices", str(prices)])
    line = next(x for x in r.output.splitlines() if x.startswith("billed"))
    for name in (".answers.jsonl.spend", ".grades.jsonl.spend", ".trace.jsonl.spend"):
        assert f"{name} ${read_ledger(run / name):.4f}" in line


def test_ctrl_build_and_discover_dry_runs_send_and_write_nothing(prices, tmp_path):
    from test_ctrl_discovery import SCRIPT

    ids = ["mini:01", "mini:02", "mini:03"]
    start = write_pools(tmp_path / "start.jsonl", [p.model_copy(update={"documents": p.gold})
                                                   for p in from_mini(question_ids=ids)])
    before = sorted(tmp_path.iterdir())
    with FakeOpenAIServer(script=SCRIPT) as srv:
        build = invoke(["ctrl", "build", "--source", "mini", "--questions", ",".join(ids), "--out",
                        str(tmp_path / "b"), "--model", FABRICATOR, "--fabricator", "model", "--base-url", srv.base_url,
                        "--fabrications", "2", "--attempts", "3", "--prices", str(prices), "--dry-run"])
        found = invoke(["ctrl", "discover", "--source", "pools", "--pools", str(start), "--model", FINDER,
                        "--base-url", srv.base_url, "--search", "local", "--out", str(tmp_path / "p.jsonl"),
                        "--prices", str(prices), "--dry-run"])
        assert srv.stats()["requests"] == 0
    assert build.exit_code == 0 and found.exit_code == 0, build.output + found.output
    assert "trek ctrl build (fabrication) (scripted-demo): 3 items, 0 already done or in the cache -> 12 - 54 calls" \
        in build.output  # 2 slots x (edit + verify) up to 2 slots x 3 attempts x (locate + edit + verify)
    assert "trek ctrl discover (fake-model): 3 items, 0 already done or in the cache -> 3 - 396 calls" in found.output
    assert sorted(tmp_path.iterdir()) == before


@pytest.mark.slow  # a model build against the fake server: seconds
def test_ctrl_build_dry_run_counts_the_checkpoint_not_the_cache(prices, tmp_path):
    ids = ["mini:01", "mini:02", "mini:03"]
    script = load_script("demo_ctrl_build").demo_script(from_mini(question_ids=ids), target=2)
    out = tmp_path / "build"
    with FakeOpenAIServer(script=script) as srv:
        def args(fabrications: str, *more: str) -> list[str]:
            return ["ctrl", "build", "--source", "mini", "--questions", ",".join(ids), "--out", str(out),
                    "--fabricator", FABRICATOR, "--fabricator-base-url", srv.base_url, "--fabrication", "model",
                    "--fabrications", fabrications, "--attempts", "1", "--conditions", "SAA", "--no-tokens",
                    "--prices", str(prices), *more]
        r = invoke(args("2", "--yes"))
        assert r.exit_code == 0, r.output
        (out / "llm-cache.sqlite").unlink()  # the replies are gone; the checkpoint holds the questions
        sent = srv.stats()["requests"]
        r = invoke(args("2", "--dry-run"))
        assert r.exit_code == 0, r.output
        assert "3 items, 3 already done or in the cache -> 0 calls" in r.output, r.output
        r = invoke(args("1", "--dry-run"))  # other settings: every question again
        assert r.exit_code == 0 and "3 items, 0 already done" in r.output, r.output
        assert srv.stats()["requests"] == sent  # a dry run sends nothing
