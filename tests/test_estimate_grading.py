"""``trek grade --dry-run`` and ``--batch``: the judge calls are counted before any is sent, the
bounds hold against the run the fake judge then serves, and batched grades come from the cache."""

import json

import pytest
from test_grading import QUESTIONS, SCRIPT, trajectories  # the same made-up run and scripted judge
from typer.testing import CliRunner

from trek.cli import app
from trek.grading import estimate_grading, iter_judge_requests, run_grading, run_grading_batch
from trek.llm import LLMCache, LLMClient
from trek.llm.usage import Price, PriceTable
from trek.testing.fake_openai import FakeOpenAIServer
from trek.types import Grade, read_jsonl, write_jsonl

PRICES = PriceTable({"gpt-4o-mini": Price(input=1.0, output=4.0)})


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("TREK_CACHE", raising=False)
    monkeypatch.delenv("TREK_PROMPTS", raising=False)
    d = tmp_path / "run"
    write_jsonl(d / "questions.jsonl", QUESTIONS)
    write_jsonl(d / "answers.jsonl", trajectories())
    yield d


def _judge(srv, run_dir):
    return LLMClient("gpt-4o-mini", base_url=srv.base_url, api_key="sk-test", cache=LLMCache(run_dir / "llm-cache.sqlite"),
                     prices=PRICES, progress=False, max_retries=0)


def test_grading_estimate_bounds_the_real_grading(run_dir):
    with FakeOpenAIServer(script=SCRIPT, tokenizer="o200k_base") as srv:
        judge = _judge(srv, run_dir)
        reqs = list(iter_judge_requests(run_dir, judge, max_tokens=50))
        assert len(reqs) == 3 and srv.stats()["requests"] == 0  # the exact match needs no judge
        assert not (run_dir / "grades.jsonl").exists()
        est = estimate_grading(run_dir, judge, max_tokens=50)
        run_grading(run_dir, judge, progress=False, max_tokens=50)
        assert srv.stats()["requests"] == 3
    used = sum((g.usage for g in read_jsonl(run_dir / "grades.jsonl", Grade)), start=type(judge.usage)())
    assert est.calls == (3, 3)
    assert est.input_tokens == (used.prompt_tokens, used.prompt_tokens)
    assert est.output_tokens[0] <= used.completion_tokens <= est.output_tokens[1] == 150
    assert est.usd_low <= used.cost_usd <= est.usd_high
    # graded now: a second estimate finds nothing to do
    with FakeOpenAIServer(script=SCRIPT) as srv:
        assert estimate_grading(run_dir, _judge(srv, run_dir), max_tokens=50).calls == (0, 0)


def test_grading_through_the_batch_api(run_dir):
    with FakeOpenAIServer(script=SCRIPT, batch_delay=0.05) as srv:
        report, br = run_grading_batch(run_dir, _judge(srv, run_dir), progress=False, poll_seconds=0.05)
        assert br.submitted == 3 and br.loaded == 3 and srv.stats()["requests"] == 0
        grades = read_jsonl(run_dir / "grades.jsonl", Grade)
        assert [g.outcome for g in grades] == ["correct", "correct", "incorrect", "correct"]
        judged = [g for g in grades if g.method == "judge"]
        assert all(g.usage.cost_usd == pytest.approx(PRICES.cost("gpt-4o-mini", g.usage) * 0.5) for g in judged)
        assert (run_dir / "openai-batch" / "openai-batches.json").exists()
        # a second run: nothing to batch, nothing to call
        report2, br2 = run_grading_batch(run_dir, _judge(srv, run_dir), progress=False, poll_seconds=0.05)
        assert br2.submitted == 0 and srv.stats()["batches"] == 1 and srv.stats()["requests"] == 0
        assert report2.kept == 4


def test_batch_failures_leave_grades_pending(run_dir):
    with FakeOpenAIServer(script=SCRIPT, batch_fail=1.0) as srv:
        report, br = run_grading_batch(run_dir, _judge(srv, run_dir), progress=False, poll_seconds=0.01)
        assert br.failed == 3 and report.pending_grades == 3 and srv.stats()["requests"] == 0


def test_grade_dry_run_command(run_dir, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeOpenAIServer(script=SCRIPT) as srv:
        r = CliRunner().invoke(app, ["grade", str(run_dir), "--judge", "gpt-4o-mini", "--judge-base-url", srv.base_url,
                                     "--dry-run", "--no-progress"])
        assert r.exit_code == 0, r.output
        assert "3 calls" in r.output and "estimate:" in r.output and srv.stats()["requests"] == 0
        assert not (run_dir / "grades.jsonl").exists()
        r = CliRunner().invoke(app, ["grade", str(run_dir), "--judge", "gpt-4o-mini", "--judge-base-url", srv.base_url,
                                     "--no-progress", "--confirm-above", "0"])
        assert r.exit_code == 2 and "--yes" in r.output and srv.stats()["requests"] == 0
        r = CliRunner().invoke(app, ["grade", str(run_dir), "--judge", "gpt-4o-mini", "--judge-base-url", srv.base_url,
                                     "--no-progress", "--batch", "--batch-poll", "0.05", "--yes"])
        assert r.exit_code == 0, r.output
        assert srv.stats()["batches"] == 1 and srv.stats()["requests"] == 0
        assert json.loads((run_dir / "openai-batch" / "openai-batches.json").read_text())["batches"][0]["loaded"]


def test_the_estimate_records_the_judge_requests_in_chunks_and_counts_the_same(run_dir, monkeypatch):
    import trek.grading as grading

    with FakeOpenAIServer(script=SCRIPT, tokenizer="o200k_base") as srv:
        judge = _judge(srv, run_dir)
        whole = estimate_grading(run_dir, judge, max_tokens=50)
        monkeypatch.setattr(grading, "JUDGE_REQUEST_CHUNK", 1)
        seen: list[int] = []
        real = grading.agrade_many

        async def counted(pairs, *a, **kw):
            seen.append(len(pairs))
            return await real(pairs, *a, **kw)

        monkeypatch.setattr(grading, "agrade_many", counted)
        chunked = estimate_grading(run_dir, judge, max_tokens=50)
        assert srv.stats()["requests"] == 0
    assert seen == [1, 1, 1, 1]  # one answer at a time (the exact match is recorded as nothing)
    assert (chunked.items, chunked.cached_items, chunked.calls, chunked.input_tokens, chunked.output_tokens) == \
        (whole.items, whole.cached_items, whole.calls, whole.input_tokens, whole.output_tokens) == \
        (3, 0, (3, 3), whole.input_tokens, (3, 150))
