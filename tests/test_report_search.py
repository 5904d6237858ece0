"""Tables 5 and 6 (trek.report.search) over hand-built runs: accuracy per search configuration, and
a model's native search against the proxy on the same questions (exact McNemar)."""

from __future__ import annotations

import pytest

from trek import runs
from trek.report import search
from trek.types import Grade, Question, RunMeta, Trajectory, write_jsonl

IDS = [f"freshqa:{i}" for i in range(6)] + [f"sealqa:{i}" for i in range(4)]


def make_run(root, label, model, search_name, correct, system="agentic"):
    rd = root / label
    qs = [Question(id=q, dataset=q.split(":")[0], question=f"{q}?", answers=["x"]) for q in IDS]
    runs.write_records(rd, runs.QUESTIONS, qs)
    runs.write_records(rd, runs.ANSWERS, [Trajectory(question_id=q, model=model, final_answer="a") for q in IDS])
    write_jsonl(rd / runs.GRADES, [Grade(question_id=q.id, dataset=q.dataset, response="a",
                                         outcome="correct" if ok else "incorrect", method="judge", grader="g",  # type: ignore[arg-type]
                                         grader_version="v", judge_model="j")
                                   for q, ok in zip(qs, correct, strict=True)])
    runs.write_meta(rd, RunMeta(run_id=label, kind="wild", model=model,
                                config={"system": {"system": system, "search": search_name}}))
    return rd


@pytest.fixture
def run_dirs(tmp_path):
    return {
        "gpt-none": make_run(tmp_path, "gpt-none", "gpt", None, [1, 0, 0, 0, 0, 0, 1, 0, 0, 0], system="no-search"),
        "gpt-native": make_run(tmp_path, "gpt-native", "gpt", "openai", [1, 1, 1, 1, 1, 0, 1, 1, 0, 0]),
        "gpt-proxy": make_run(tmp_path, "gpt-proxy", "gpt", "proxy:gpt-5", [1, 1, 0, 0, 0, 0, 1, 1, 1, 0]),
        "qwen-tavily": make_run(tmp_path, "qwen-tavily", "qwen", "tavily", [0, 0, 0, 1, 1, 1, 0, 0, 0, 1]),
    }


def test_table5_gives_each_search_configuration_a_row(run_dirs):
    t = search.search_configurations(run_dirs)
    assert list(t.index) == [("gpt", "none", "no-search"), ("gpt", "openai", "agentic"),
                             ("gpt", "proxy:gpt-5", "agentic"), ("qwen", "tavily", "agentic")]
    native = t.loc[("gpt", "openai", "agentic")]
    # freshqa 5/6, sealqa 2/4: micro 7/10, macro (83.33 + 50) / 2
    assert native["freshqa"] == pytest.approx(83.3) and native["sealqa"] == pytest.approx(50.0)
    assert native["micro"] == pytest.approx(70.0) and native["macro"] == pytest.approx(66.7) and native["n"] == 10
    assert "4 row(s)" in search.search_note(t, "x")


def test_table6_pairs_native_and_proxy_search_of_one_model(run_dirs):
    t = search.native_vs_proxy(run_dirs)
    assert list(t.index) == [("gpt", "agentic", "openai", "proxy:gpt-5")]
    row = t.iloc[0]
    # native right / proxy wrong on questions 2, 3, 4 (b = 3); the reverse on question 8 (c = 1)
    assert (row["n"], row["b"], row["c"]) == (10, 3, 1)
    assert row["acc_native"] == pytest.approx(70.0) and row["acc_proxy"] == pytest.approx(50.0)
    assert row["delta_pp"] == pytest.approx(-20.0)
    assert row["p"] == pytest.approx(0.625)  # exact McNemar: 2 * P(X <= 1), X ~ Bin(4, 0.5) = 2 * 5/16


def test_no_runs_of_a_kind_say_so(run_dirs):
    only = {k: v for k, v in run_dirs.items() if k != "gpt-proxy"}
    t = search.native_vs_proxy(only)
    assert t.empty and search.search_note(t, "native and proxy").startswith("no runs of this kind recorded")
    assert search.search_configurations({}).empty
    assert search.run_configuration(run_dirs["gpt-none"]) == {"model": "gpt", "system": "no-search", "search": "none"}
