"""Figure 2's notes: whose query was the question, what wrong probe answers named, the rank sweep."""

from __future__ import annotations

from pathlib import Path

import pytest

from trek.graders.exact import decide
from trek.report import trace
from trek.trace.exact import ANSWER_KINDS, answer_kind
from trek.types import Question

WILD = Path(__file__).resolve().parents[1] / "data" / "runs" / "wild"
RUNS = {k: WILD / k for k in ("search-then-read", "agentic")}

Q = Question(id="k", dataset="freshqa", question="Who coaches the Rovers?", answers=["Ada Vale", "Vale"])
COMPETING = ["Ada Vale", "Bo Reed"]


@pytest.mark.parametrize("response, kind", [
    ("Ada Vale", "reference"), ("Bo Reed is the coach", "competing"), ("Eve Tan", "unannotated"),
    ("I don't know.", "no answer"), ("", "no answer"), (None, "no answer"),
])
def test_what_a_graded_answer_names(response, kind):
    assert answer_kind(decide(Q, response, COMPETING), response) == kind
    assert kind in ANSWER_KINDS


def test_search_then_read_is_named_question_as_query():
    assert trace.question_as_query_runs(RUNS) == ["search-then-read"]
    assert "search-then-read: question as query" in trace.query_note(RUNS)
    assert trace.query_note({"agentic": RUNS["agentic"]}) == ""


def test_the_probe_split_counts_every_exactly_graded_labelled_case_once():
    split = trace.probe_answer_split(RUNS)
    assert set(split.index.get_level_values("label")) == {"Interpretation", "Distraction"}
    kinds = split[["competing", "unannotated", "no answer"]].sum(axis=1)
    assert (kinds == split["exact"]).all() and (split["exact"] <= split["cases"]).all()
    shares = trace.label_shares(RUNS)
    for run in RUNS:  # the split is over the labelled cases of Figure 2
        n = int(shares.loc[(run, "all"), "cases"])
        assert split.loc[(run, "Interpretation"), "cases"] == round(shares.loc[(run, "all"), "Interpretation"] * n / 100)
    assert trace.probe_answer_note(RUNS).startswith("wrong probe answers named (exact judge): ")


def test_the_rank_sweep_grows_with_depth_and_never_decides_the_verdict():
    sweep = trace.query_rank_sweep(RUNS)
    cols = [f"rank<={d}" for d in trace.SWEEP_DEPTHS]
    for _, row in sweep.iterrows():
        values = row[cols].to_numpy(dtype=float)
        assert (values[1:] >= values[:-1]).all() and row["not taken"] == 0
    # the recorded agentic run: adequate by the rule far less often than its gold page is reachable at 50
    assert sweep.loc["agentic", "adequate"] < sweep.loc["agentic", "rank<=50"]
