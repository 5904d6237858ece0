"""``trek wild run --dry-run``: first requests built by the real system code, nothing sent or
written to the run; the stated bounds hold against the agentic run the fake model then makes."""

import json

from typer.testing import CliRunner

from trek.answering.dry_run import estimate_wild_run
from trek.cli.run import app
from trek.datasets.mini import load
from trek.llm import LLMClient
from trek.pages import PageStore
from trek.runs import frame
from trek.search import make_backend
from trek.testing.fake_openai import FakeOpenAIServer

# search, open the first result's page, answer
SCRIPT = [
    {"tool_results": 0, "tool_calls": [{"name": "web_search", "arguments": {"query": "the question"}}]},
    {"tool_results": 1, "reply": "Dana Okafor"},
]


def test_wild_dry_run_bounds_an_agentic_run(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    run_dir = tmp_path / "run"
    with FakeOpenAIServer(script=SCRIPT, tokenizer="o200k_base") as srv:
        base = ["run", "--model", "gpt-4o-mini", "--base-url", srv.base_url, "--search", "local", "--questions", "mini",
                "--limit", "3", "--run", str(run_dir), "--no-progress", "--max-rounds", "3", "--assume-output", "50"]
        r = CliRunner().invoke(app, [*base, "--dry-run"])
        assert r.exit_code == 0, r.output
        assert srv.stats()["requests"] == 0 and not (run_dir / "answers.jsonl").exists()
        assert "1 to 4 model calls per question" in r.output
        assert "3 items, 0 already done" in r.output and "3 - 12 calls" in r.output
        r2 = CliRunner().invoke(app, [*base, "--dry-run", "--assume-rounds", "2"])
        assert "assumed 2 model calls per question" in r2.output and "-> 6 calls" in r2.output
        r = CliRunner().invoke(app, [*base, "--yes"])
        assert r.exit_code == 0, r.output
        assert srv.stats()["requests"] == 6
        # finished: nothing left to estimate
        r3 = CliRunner().invoke(app, [*base, "--dry-run"])
        assert "3 already done" in r3.output and "-> 0 calls" in r3.output

    # the numbers behind the first dry run, against what the run used
    df = frame(run_dir)
    client = LLMClient("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", progress=False)
    bench = load()
    store = PageStore(tmp_path / "p.sqlite")
    store.add_documents(bench.corpus)
    est = estimate_wild_run(bench.questions[:3], tmp_path / "fresh", client, make_backend("local", store=store),
                            store=store, max_rounds=3, assume_output=50)
    prompt, completion = int(df["prompt_tokens"].sum()), int(df["completion_tokens"].sum())
    assert est.input_tokens[0] <= prompt <= est.input_tokens[1]
    assert est.output_tokens[0] <= completion <= est.output_tokens[1]
    assert est.search_calls == (0, 9)
    assert est.usd_low <= float(df["cost_usd"].sum()) <= est.usd_high
    answers = [json.loads(x) for x in (run_dir / "answers.jsonl").read_text().splitlines()]
    assert all(len(a["search_calls"]) == 1 for a in answers)
