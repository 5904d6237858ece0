import pytest

from trek.answer_prompts import ANSWER_AS_OF_YEAR, answer_prompt, answer_prompt_version
from trek.templates import set_prompts_dir, template, template_version
from trek.types import Question


@pytest.fixture(autouse=True)
def _reset(monkeypatch):
    monkeypatch.delenv("TREK_PROMPTS", raising=False)
    set_prompts_dir(None)
    yield
    set_prompts_dir(None)


def q(**kw):
    base = dict(id="t:1", dataset="freshqa", question="Who leads the Harbor league?", answers=["X"])
    return Question(**{**base, **kw})


def test_answer_prompt_uses_year_only_when_there_is_one():
    with_year = answer_prompt(q(effective_year=2024))
    assert "2024" in with_year and "Who leads the Harbor league?" in with_year
    assert "latest" in with_year  # relative time words are explained
    plain = answer_prompt(q(dataset="infodeepseek"))
    assert "Who leads the Harbor league?" in plain and "latest" not in plain
    bound = answer_prompt(q(effective_year_raw="before 2022"))
    assert "before 2022" in bound


def test_override_from_folder_changes_text_and_version(tmp_path, monkeypatch):
    v0 = answer_prompt_version(q(effective_year=2024))
    (tmp_path / "answer.as_of_year.txt").write_text("In {year}: {question} -> ")
    monkeypatch.setenv("TREK_PROMPTS", str(tmp_path))
    assert answer_prompt(q(effective_year=2024)) == "In 2024: Who leads the Harbor league? -> "
    v1 = answer_prompt_version(q(effective_year=2024))
    assert v1 != v0 and v1.startswith(v0 + "+override.")


def test_override_with_unknown_field_is_rejected(tmp_path):
    (tmp_path / "answer.as_of_year.txt").write_text("{question} {colour}")
    set_prompts_dir(tmp_path)
    with pytest.raises(ValueError, match=r"answer.as_of_year.txt.*colour"):
        template("answer.as_of_year", ANSWER_AS_OF_YEAR)


def test_missing_folder_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        set_prompts_dir(tmp_path / "nowhere")
    assert template_version("x", "default {a}", "v1") == "v1"
