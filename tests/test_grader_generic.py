"""The generic judge (correct / incorrect / not attempted) against a scripted judge, and how a
question picks its grader (no network)."""

from __future__ import annotations

import pytest

from trek import graders
from trek.graders import generic, grade, grader_for, grader_version
from trek.llm import LLMClient
from trek.testing.fake_openai import FakeOpenAIServer
from trek.types import Question


@pytest.fixture(autouse=True)
def _no_prompt_overrides(monkeypatch):
    monkeypatch.delenv("TREK_PROMPTS", raising=False)


def judge_for(srv):
    return LLMClient("judge-model", base_url=srv.base_url, api_key="sk-test", cache=None, progress=False,
                     max_retries=0, backoff_base=0.01)


def mine(**kw):
    base = dict(id="mine:1", dataset="mine", question="Which river runs through the town?",
                answers=["Avon", "River Avon"], effective_year=2025, grader="generic")
    return Question(**{**base, **kw})


@pytest.mark.parametrize(("text", "want"), [
    ("verdict: correct", "correct"),
    ("The answer names the Avon.\nverdict: correct", "correct"),
    ("verdict: incorrect", "incorrect"),
    ("verdict: not_attempted", "not_attempted"),
    ("Verdict: Not Attempted", "not_attempted"),
    ('{"verdict": "not_attempted"}', "not_attempted"),
    ("**Incorrect**", "incorrect"),
    ("verdict: not correct", None),                    # a negated label is no verdict
    ("verdict: correct\nOn second thought it is incorrect.", None),  # a change of mind
    ("I am not sure.", None),
    ("", None),
])
def test_parse_verdict(text, want):
    assert generic.parse_verdict(text) == want


@pytest.mark.parametrize(("reply", "outcome", "correct"), [
    ("verdict: correct", "correct", True),
    ("verdict: incorrect", "incorrect", False),
    ("verdict: not_attempted", "not_attempted", False),
])
def test_generic_outcomes_and_the_prompt_fields(reply, outcome, correct):
    script = [{"pattern": r"(?s)Which river runs.*Effective year: 2025.*Avon \| River Avon.*Answer to grade: the Avon",
               "reply": reply}]
    with FakeOpenAIServer(script=script) as srv:
        g = grade(mine(), "the Avon", judge_for(srv))
    assert (g.outcome, g.correct, g.method) == (outcome, correct, "judge")
    assert (g.grader, g.grader_version, g.dataset) == ("generic", generic.VERSION, "mine")


def test_unreadable_verdict_is_reasked_then_unparsed():
    with FakeOpenAIServer(script=[{"reply": "Hard to say."}] * 3) as srv:
        g = grade(mine(), "maybe the Severn", judge_for(srv))
        assert srv.stats()["requests"] == 3  # the first ask and two re-asks
    assert g.outcome == "unparsed" and g.correct is None


def test_empty_response_is_not_attempted_without_a_call():
    with FakeOpenAIServer() as srv:
        g = grade(mine(), "  ", judge_for(srv))
        assert srv.stats()["requests"] == 0
    assert (g.outcome, g.method) == ("not_attempted", "none")


def test_override_changes_the_version(tmp_path, use_prompts):
    (tmp_path / "grader.generic.txt").write_text("{question} {answers} {response} {effective_year}\nverdict?")
    use_prompts(tmp_path)
    assert grader_version(mine()).startswith(generic.VERSION + "+override.")


def test_which_grader_a_question_gets():
    fresh = Question(id="f:1", dataset="freshqa", question="?", answers=["x"])
    assert grader_for(fresh).GRADER == "freshqa"
    assert grader_for(mine()).GRADER == "generic"  # the question's own grader field
    with graders.using("generic"):
        assert grader_for(fresh).GRADER == "generic"  # forced for every question
    assert grader_for(fresh).GRADER == "freshqa"
    with pytest.raises(ValueError, match="no grader named 'nope'"), graders.using("nope"):
        pass
    bare = Question(id="m:2", dataset="mine", question="?", answers=["x"])
    with pytest.raises(ValueError, match="--grader generic"):
        grader_for(bare)


def test_the_grader_field_is_written_only_when_set():
    assert "grader" not in Question(id="a", dataset="d", question="?", answers=["x"]).model_dump_json()
    assert '"grader":"generic"' in mine().model_dump_json()
