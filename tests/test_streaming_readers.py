"""`trek cost` and `trek validate` read a run one record at a time (issue 31: nothing a large run
holds is loaded whole). Memory is measured with tracemalloc (allocations, not time)."""

from __future__ import annotations

import tracemalloc

import pytest

from trek import runs
from trek.costs import run_spend, summarize_usage
from trek.imports.schema import validate_run
from trek.llm.usage import Price, PriceTable
from trek.types import Question, RunMeta, Trajectory, Usage, write_jsonl

N = 600
PAGE = "x" * 20_000  # each answer carries 20 KB of text: 12 MB held if the file were loaded whole


def _big_run(root, n=N):
    qs = [Question(id=f"q{i}", dataset="freshqa", question="?", answers=["a"]) for i in range(n)]
    write_jsonl(root / runs.QUESTIONS, qs)
    write_jsonl(root / runs.ANSWERS, (Trajectory(question_id=q.id, model="m", final_answer=PAGE,
                                                 usage=Usage(calls=1, prompt_tokens=10, completion_tokens=2))
                                      for q in qs))
    runs.write_meta(root, RunMeta(run_id="big", kind="wild", model="m"))
    return root


def _peak(fn) -> tuple[object, int]:
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


PRICES = PriceTable({"m": Price(input=1.0, output=2.0)})


@pytest.mark.slow  # tracemalloc slows every allocation
def test_cost_and_validate_hold_one_record_at_a_time(tmp_path):
    rd = _big_run(tmp_path)
    size = (rd / runs.ANSWERS).stat().st_size
    assert size > 10_000_000
    df, peak = _peak(lambda: summarize_usage(rd, PRICES))
    total = df[df["file"] == "TOTAL"].iloc[0]
    assert (total["records"], total["prompt_tokens"]) == (N, 10 * N)
    assert peak < size / 3, f"trek cost peaked at {peak / 1e6:.1f} MB on a {size / 1e6:.0f} MB answers file"
    spend, peak = _peak(lambda: run_spend(rd, PRICES))
    assert spend.tokens.prompt_tokens == 10 * N and spend.model == "m"
    assert peak < size / 3, f"run_spend peaked at {peak / 1e6:.1f} MB"
    problems, peak = _peak(lambda: validate_run(rd))
    assert problems == []
    assert peak < size / 3, f"trek validate peaked at {peak / 1e6:.1f} MB"


def test_a_later_line_still_supersedes_an_earlier_one_in_trek_cost(tmp_path):
    rd = _big_run(tmp_path, n=3)
    with open(rd / runs.ANSWERS, "a") as f:  # a re-run's line for q1 replaces the first one
        f.write(Trajectory(question_id="q1", model="m", final_answer="b",
                           usage=Usage(calls=1, prompt_tokens=1000, completion_tokens=0)).model_dump_json() + "\n")
    df = summarize_usage(rd, PRICES)
    total = df[df["file"] == "TOTAL"].iloc[0]
    assert (total["records"], total["prompt_tokens"]) == (3, 1020)


def test_validate_caps_the_problems_it_keeps_per_file(tmp_path):
    rd = _big_run(tmp_path, n=4)
    with open(rd / runs.ANSWERS, "a") as f:
        for i in range(120):
            f.write(Trajectory(question_id=f"nope{i}", model="m", final_answer="a").model_dump_json() + "\n")
    problems = validate_run(rd, limit=10)
    answers = [p for p in problems if p.file.endswith(runs.ANSWERS)]
    assert len(answers) == 11 and answers[-1].message == "... and 110 more problem(s) in this file"
    assert all("'nope" in p.message for p in answers[:10])


def _pools_file(path, n, chars):
    import datetime as dt

    from trek.ctrl.pools import Pool, write_pools
    from trek.types import Document

    def pools():
        for i in range(n):
            qid = f"s:{i}"
            docs = [Document(id=f"{qid}:{role}:{j}", url=f"https://{role}.example/{i}/{j}", title=f"{role} {j}",
                             date=dt.date(2015 + j, 1, 1), text=f"Report {i} {role} {j}. " + "w " * (chars // 2),
                             question_id=qid, role=role, supports_answer=f"{role}-{j}")
                    for role, k in (("gold", 1), ("outdated", 2)) for j in range(k)]
            yield Pool(question=Question(id=qid, dataset="freshqa", question=f"Who {i}?", answers=[f"a{i}"]),
                       documents=docs)

    return write_pools(path, pools())


@pytest.mark.slow  # tracemalloc slows every allocation
def test_ctrl_build_from_a_pools_file_holds_one_pool_at_a_time(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from trek.cli import app

    src = _pools_file(tmp_path / "pools.jsonl", 150, 30_000)
    size = src.stat().st_size
    assert size > 10_000_000
    monkeypatch.chdir(tmp_path)
    args = ["ctrl", "build", "--source", "pools", "--pools", str(src), "--out", str(tmp_path / "b"),
            "--fabrication", "none", "--conditions", "OO", "--no-tokens"]
    r, peak = _peak(lambda: CliRunner().invoke(app, args, catch_exceptions=False))
    assert r.exit_code == 0, r.output
    assert sum(1 for _ in (tmp_path / "b" / runs.CONTEXTS).open()) == 150
    assert peak < size / 5, f"trek ctrl build peaked at {peak / 1e6:.1f} MB on a {size / 1e6:.0f} MB pools file"


def test_a_slim_answer_keeps_only_what_grading_and_tracing_read():
    from trek.types import Coverage

    full = Trajectory(question_id="q1", model="m", final_answer="Paris", status="ok",
                      usage=Usage(calls=2, prompt_tokens=30, completion_tokens=4),
                      coverage=Coverage(queries="some", results="cited_only"),
                      messages=[{"role": "user", "content": "x" * 5000}])
    slim = runs.slim_answer(full)
    assert (slim.question_id, slim.final_answer, slim.status, slim.usage.calls) == ("q1", "Paris", "ok", 2)
    assert slim.observed == full.observed and slim.observed.results == "cited_only"
    with pytest.raises(AttributeError):  # a field grading does not read is not there, not an empty default
        slim.messages  # noqa: B018
    tracemalloc.start()
    copies = [runs.slim_answer(full) for _ in range(2000)]
    per_copy = tracemalloc.get_traced_memory()[0] / len(copies)
    tracemalloc.stop()
    assert per_copy < 1000, f"a slim copy holds {per_copy:.0f} bytes"
