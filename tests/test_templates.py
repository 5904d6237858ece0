import pytest

from trek.answer_prompts import (
    ANSWER_AS_OF_YEAR,
    ANSWER_AS_WRITTEN,
    answer_prompt,
    answer_prompt_version,
    year_fields,
)
from trek.templates import (
    UnknownTemplateError,
    known_templates,
    render,
    template,
    template_version,
)
from trek.types import Question


@pytest.fixture(autouse=True)
def _reset(monkeypatch):
    monkeypatch.delenv("TREK_PROMPTS", raising=False)
    yield


def q(**kw):
    base = dict(id="t:1", dataset="freshqa", question="Who leads the Harbor league?", answers=["X"])
    return Question(**{**base, **kw})


# -- answer prompts per dataset (paper B.5) ----------------------------------------------------------
def test_freshqa_and_sealqa_are_answered_as_of_their_year():
    for ds in ("freshqa", "sealqa"):
        text = answer_prompt(q(dataset=ds, effective_year=2024, effective_year_raw="2024"))
        assert "Who leads the Harbor league?" in text
        assert "held in 2024" in text and "the end of 2024" in text
        assert "latest" in text  # relative time words are explained


def test_infodeepseek_is_asked_as_written_even_with_a_year():
    plain = answer_prompt(q(dataset="infodeepseek"))
    assert plain == ANSWER_AS_WRITTEN.format(question="Who leads the Harbor league?")
    # the dataset decides, not the presence of a year
    with_year = answer_prompt(q(dataset="infodeepseek", effective_year=2024))
    assert with_year == plain and "2024" not in with_year


def test_freshqa_without_a_year_is_an_error_not_a_silent_other_prompt():
    with pytest.raises(ValueError, match=r"t:1.*no reference year"):
        answer_prompt(q(dataset="freshqa"))


def test_unknown_dataset_is_an_error():
    with pytest.raises(ValueError, match=r"no answer prompt for dataset 'trivia'.*freshqa"):
        answer_prompt(q(dataset="trivia"))


def test_a_bounded_year_is_phrased_as_a_bound():
    text = answer_prompt(q(dataset="sealqa", effective_year_raw="before 2024"))
    assert "held before 2024" in text
    assert "the time just before 2024" in text and "the end of 2023" in text
    for wrong in ("in before", "of before", "end of before", "at before"):
        assert wrong not in text
    assert year_fields(q(effective_year_raw="until 2022"))["moment"] == "the end of 2022"
    assert year_fields(q(effective_year_raw="Since 2021"))["period"] == "since 2021"
    with pytest.raises(ValueError, match="unreadable reference year"):
        year_fields(q(effective_year_raw="around 2020"))


def test_each_dataset_has_its_own_template_name(tmp_path, use_prompts):
    (tmp_path / "answer.sealqa.txt").write_text("SEAL {year}: {question}")
    use_prompts(tmp_path)
    assert answer_prompt(q(dataset="sealqa", effective_year_raw="before 2024")).startswith(
        "SEAL before 2024: "
    )
    # FreshQA keeps the built-in text and version
    assert answer_prompt(q(effective_year=2024)).startswith("Reply with the final answer only")
    assert answer_prompt_version(q(effective_year=2024)) == "answer-2"
    assert answer_prompt_version(q(dataset="sealqa", effective_year=2024)).startswith("answer-2+override.")


def test_override_from_folder_changes_text_and_version(tmp_path, monkeypatch):
    v0 = answer_prompt_version(q(effective_year=2024))
    (tmp_path / "answer.freshqa.txt").write_text("In {year}: {question} -> ")
    monkeypatch.setenv("TREK_PROMPTS", str(tmp_path))
    assert answer_prompt(q(effective_year=2024)) == "In 2024: Who leads the Harbor league? -> "
    v1 = answer_prompt_version(q(effective_year=2024))
    assert v1 != v0 and v1.startswith(v0 + "+override.")


def test_override_with_unknown_field_is_rejected(tmp_path, use_prompts):
    (tmp_path / "answer.freshqa.txt").write_text("{question} {colour}")
    use_prompts(tmp_path)
    with pytest.raises(ValueError, match=r"answer.freshqa.txt.*colour"):
        template("answer.freshqa", ANSWER_AS_OF_YEAR)


def test_missing_folder_is_an_error(tmp_path, use_prompts):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        use_prompts(tmp_path / "nowhere")
    assert template_version("x", "default {a}", "v1") == "v1"


# -- unknown names are errors -------------------------------------------------------------------------
def test_known_templates_cover_every_module():
    names = set(known_templates())
    for name in (
        "answer.freshqa",
        "answer.infodeepseek",
        "answer.sealqa",
        "agent.system",
        "agent.hints",
        "grader.freshqa",
        "grader.infodeepseek",
        "grader.infodeepseek_false_premise",
        "grader.sealqa",
        "search.proxy",
    ):
        assert name in names, name


def test_misspelled_override_file_is_an_error_listing_known_names(tmp_path, use_prompts):
    (tmp_path / "grader.sealqaa.txt").write_text("{question}")
    with pytest.raises(UnknownTemplateError, match=r"grader\.sealqaa.*known templates:.*grader\.sealqa"):
        use_prompts(tmp_path)


def test_misspelled_override_file_found_through_the_environment(tmp_path, monkeypatch):
    (tmp_path / "answer.freshqa.txt").write_text("{question}")
    (tmp_path / "answer.fresh_qa.txt").write_text("{question}")
    monkeypatch.setenv("TREK_PROMPTS", str(tmp_path))
    with pytest.raises(UnknownTemplateError, match="answer.fresh_qa"):
        answer_prompt(q(effective_year=2024))


def test_render_of_an_unknown_name_is_an_error():
    with pytest.raises(UnknownTemplateError, match=r"'no-such-name'.*answer\.freshqa"):
        render("no-such-name")
    # a registered name renders without repeating its text
    assert render("answer.infodeepseek", question="Q?").endswith("Question: Q?\nAnswer:")


def test_a_template_in_a_module_not_yet_imported_is_known(tmp_path, monkeypatch, use_prompts):
    from trek import templates

    mod = tmp_path / "pkg_mod.py"
    mod.write_text('EXAMPLE_TEMPLATE = "ctrl.example"\n\ndef f():\n    return render("rag.example_prompt", "x")\n')
    monkeypatch.setattr(templates, "_registry", dict(templates._registry))
    monkeypatch.setattr(templates, "_scanned", False)
    monkeypatch.setattr(templates, "__file__", str(tmp_path / "templates.py"))
    names = known_templates()
    assert {"ctrl.example", "rag.example_prompt"} <= set(names)
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "ctrl.example.txt").write_text("x")
    use_prompts(tmp_path / "prompts")  # accepted: the name is declared in a source file


def test_prompt_folder_is_scoped_to_its_block_and_reaches_worker_threads(tmp_path):
    from trek import templates
    from trek.aio import run_sync

    (tmp_path / "answer.freshqa.txt").write_text("SCOPED {year}: {question}")
    with templates.prompts_folder(tmp_path):
        assert answer_prompt(q(effective_year=2024)).startswith("SCOPED 2024")

        async def inside_a_loop():
            return run_sync(_render_async())  # a nested run_sync goes through a worker thread

        async def _render_async():
            return answer_prompt(q(effective_year=2024))

        assert run_sync(inside_a_loop()).startswith("SCOPED 2024")
    assert answer_prompt(q(effective_year=2024)).startswith("Reply with the final answer only")
