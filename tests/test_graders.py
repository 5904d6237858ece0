"""Dataset graders against a scripted judge on the fake OpenAI server (no network)."""

from __future__ import annotations

import asyncio

import pytest

from trek.graders import agrade, agrade_many, freshqa, grade, grader_version, infodeepseek, sealqa
from trek.graders.common import JudgeConfig, explain_unsupported_parameter, parse_judge_params
from trek.llm import LLMClient
from trek.llm.client import FatalLLMError
from trek.testing.fake_openai import FakeOpenAIServer
from trek.types import Question


def judge_for(srv, **kw):
    kw.setdefault("cache", None)
    kw.setdefault("progress", False)
    kw.setdefault("max_retries", 0)
    kw.setdefault("backoff_base", 0.01)
    return LLMClient("judge-model", base_url=srv.base_url, api_key="sk-test", **kw)


def q_fresh(**kw):
    base = dict(id="freshqa:1", dataset="freshqa", question="Who leads the city council?",
                answers=["Ada Lovelace", "A. Lovelace"], effective_year=2024)
    return Question(**{**base, **kw})


def q_ids(**kw):
    base = dict(id="infodeepseek:1", dataset="infodeepseek", question="When did the bridge open?",
                answers=["1932"])
    return Question(**{**base, **kw})


def q_seal(**kw):
    base = dict(id="sealqa:1", dataset="sealqa", question="How many lakes are in the park?",
                answers=["7"], effective_year=2025)
    return Question(**{**base, **kw})


@pytest.fixture(autouse=True)
def _no_prompt_overrides(monkeypatch):
    monkeypatch.delenv("TREK_PROMPTS", raising=False)
    yield


# -- FreshQA deterministic path: case, whitespace, punctuation and articles only --------------
@pytest.mark.parametrize(
    ("response", "answer"),
    [
        ("ada lovelace", "Ada Lovelace"),  # case
        ("  Ada   Lovelace. ", "Ada Lovelace"),  # whitespace, punctuation
        ("Ada\u00a0Lovelace", "Ada Lovelace"),  # a non-breaking space is whitespace
        ("The Beatles", "Beatles"),  # article
        ("An Apple", "apple"),
        ("\u201cThe Beatles\u201d", "Beatles"),  # quotes are punctuation
        ("Jean-Luc Picard", "Jean Luc Picard"),  # a hyphen between words
        ("O'Brien", "OBrien"),  # apostrophe
        ("O\u2019Brien", "O'Brien"),
        ("1,000", "1000"),  # a thousands separator is punctuation
        ("$1,000", "$1000"),
        ("42%", "42 %"),  # whitespace only
        ("iOS 17.1.", "ios 17.1"),  # trailing full stop, case
        ("-5", "\u22125"),  # the minus sign, typed two ways
        ("Cafe\u0301", "Caf\u00e9"),  # the same letter, decomposed and composed
    ],
)
def test_freshqa_exact_match_accepts(response, answer):
    assert freshqa.exact_match(response, [answer])


@pytest.mark.parametrize(
    ("response", "answer"),
    [
        ("iOS 17.1", "iOS 17.10"),  # issue 10: trailing zeros are not exact
        ("12 miles", "12"),  # issue 10: a unit is not dropped
        ("$1,000", "1000"),  # nor a currency sign
        ("1,000 USD", "$1000"),
        ("3.50", "3.5"),
        ("42%", "42 percent"),
        ("12 km", "12"),
        ("-5 \u00b0C", "-5 degrees Celsius"),
        ("Caf\u00e9 M\u00fcller", "Cafe Muller"),  # accents are not punctuation
        ("Paris [1]", "Paris"),  # a citation mark is left for the judge
        ("100 km", "100 miles"),
        ("3.5", "35"),  # a decimal point is not punctuation
        ("1/2", "1-2"),  # nor is a slash or dash between digits
        ("-5", "5"),  # the sign matters
        ("C#", "C"),  # meaningful punctuation stays
        ("5 million", "5"),
        ("Vitamin", "Vitamin A"),  # a trailing letter is not an article
        ("Lovelace", "A. Lovelace"),  # an initial is not an article
        ("Ada", "Ada Lovelace"),
        ("", "x"),
        ("...", "..."),  # nothing left to compare
        ("1000", "10000"),
    ],
)
def test_freshqa_exact_match_rejects(response, answer):
    assert not freshqa.exact_match(response, [answer])


def test_freshqa_unit_difference_goes_to_the_judge():
    q = q_fresh(answers=["12"], question="How long is the trail in miles?")
    with FakeOpenAIServer(script=[{"pattern": "Response: 12 miles", "reply": "evaluation: correct"}]) as srv:
        g = grade(q, "12 miles", judge_for(srv))
        assert srv.stats()["requests"] == 1
    assert (g.outcome, g.method) == ("correct", "judge")


def test_freshqa_exact_match_makes_no_judge_call():
    with FakeOpenAIServer(script=[{"reply": "evaluation: incorrect"}]) as srv:
        g = grade(q_fresh(), "a. lovelace", judge_for(srv))
        assert srv.stats()["requests"] == 0
    assert (g.outcome, g.method, g.judge_raw) == ("correct", "exact", [])
    assert g.grader == "freshqa" and g.grader_version == freshqa.VERSION
    assert g.judge_model == "judge-model" and g.judge_settings == {"max_reasks": 2}


def test_freshqa_judge_path_and_prompt_fields():
    script = [
        # only a prompt carrying every field in the expected shape gets "correct"
        {"pattern": r"(?s)Who leads the city council\?.*2024.*Ada Lovelace \| A\. Lovelace.*Countess Lovelace",
         "reply": "The response names the same person.\n**Evaluation: Correct**"},
        {"reply": "evaluation: incorrect"},
    ]
    with FakeOpenAIServer(script=script) as srv:
        g = grade(q_fresh(), "Countess Lovelace", judge_for(srv), seed=7)
        assert srv.stats()["requests"] == 1
    assert (g.outcome, g.method) == ("correct", "judge")
    assert g.judge_settings == {"seed": 7, "max_reasks": 2}
    assert g.judge_raw == ["The response names the same person.\n**Evaluation: Correct**"]
    assert g.usage.calls == 1 and g.usage.prompt_tokens > 0


def test_freshqa_judge_incorrect():
    with FakeOpenAIServer(script=[{"reply": "evaluation: incorrect"}]) as srv:
        g = grade(q_fresh(), "Charles Babbage", judge_for(srv))
    assert (g.outcome, g.method) == ("incorrect", "judge")


# -- parsers (the large tables are in test_verdict_parsing.py) ---------------------------------
@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("evaluation: correct", "correct"),
        ("Evaluation: Correct", "correct"),
        ("**Evaluation:** incorrect.", "incorrect"),
        ("Reasoning first.\n\nevaluation: incorrect", "incorrect"),
        ("EVALUATION - CORRECT", "correct"),
        ("Correct.", "correct"),
        ("evaluation: correct\nevaluation: incorrect", "incorrect"),  # the last verdict line wins
        ("evaluation: not correct", None),
        ("I think the response is probably fine", None),
        ("", None),
    ],
)
def test_parse_evaluation(text, want):
    assert freshqa.parse_evaluation(text) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Yes", "yes"),
        ("Yes.", "yes"),
        ("**No**", "no"),
        ("no", "no"),
        ("Answer: YES", "yes"),
        ("_Yes_", "yes"),
        ("Yes and no", None),
        ("Yes. There is no contradiction.", "yes"),  # "no contradiction" is not a verdict
        ("Maybe", None),
        ("Not sure", None),
        ("", None),
    ],
)
def test_parse_yes_no(text, want):
    assert infodeepseek.parse_yes_no(text) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("A", "A"),
        ("b", "B"),
        ("C.", "C"),
        ("**A**", "A"),
        ("(b)", "B"),
        ("The answer is B", "B"),
        ("grade: c", "C"),
        ("A: CORRECT", "A"),
        ("INCORRECT", "B"),
        ("NOT_ATTEMPTED", "C"),
        ("Not attempted", "C"),
        ("correct", "A"),
        ("A or B", None),
        ("A: CORRECT\nB: INCORRECT\nC: NOT_ATTEMPTED", None),
        ("B, INCORRECT... actually CORRECT", None),
        ("I cannot decide", None),
        ("", None),
    ],
)
def test_parse_letter(text, want):
    assert sealqa.parse_letter(text) == want


# -- re-asking, unparsed, pending -------------------------------------------------------------
def test_unparsed_after_the_reask_cap():
    with FakeOpenAIServer(script=[{"reply": "Hmm, hard to say."}]) as srv:
        g = grade(q_seal(), "seven", judge_for(srv))
        assert srv.stats()["requests"] == 3  # the first ask and 2 re-asks
    assert g.outcome == "unparsed" and g.correct is None
    assert g.judge_raw == ["Hmm, hard to say."] * 3
    assert "could not be read" in g.error

    with FakeOpenAIServer(script=[{"reply": "Hmm, hard to say."}]) as srv:
        g = grade(q_seal(), "seven", judge_for(srv), max_reasks=0)
        assert srv.stats()["requests"] == 1
    assert g.outcome == "unparsed" and g.judge_settings["max_reasks"] == 0


def test_reask_sends_the_conversation_and_a_reask_message():
    script = [
        # the re-ask is the last message, and the earlier reply is part of the conversation
        {"pattern": r"one letter only", "any_pattern": r"(?s)Gold target: 7.*Let me think", "reply": "A"},
        {"reply": "Let me think about this."},
    ]
    with FakeOpenAIServer(script=script) as srv:
        g = grade(q_seal(), "There are 7 lakes.", judge_for(srv))
        assert srv.stats()["requests"] == 2
    assert g.outcome == "correct"
    assert g.judge_raw == ["Let me think about this.", "A"]


def test_pending_judge_call_is_not_a_grade():
    with FakeOpenAIServer(script=[{"error": {"status": 500, "message": "overloaded"}}]) as srv:
        g = grade(q_ids(), "1932", judge_for(srv))
    assert g.outcome == "pending" and g.correct is None
    assert g.error and "500" in g.error
    assert g.judge_raw == []


# -- InfoDeepSeek routing ---------------------------------------------------------------------
def test_false_premise_routing_uses_the_annotation():
    # a phrase that only the false-premise template contains
    script = [{"pattern": "mistaken assumption", "reply": "Yes"}, {"reply": "No"}]
    with FakeOpenAIServer(script=script) as srv:
        judge = judge_for(srv)
        fp = grade(q_ids(false_premise=True, answers=["The bridge never opened."]), "It never opened.", judge)
        plain = grade(q_ids(), "It never opened.", judge)
    assert fp.outcome == "correct" and plain.outcome == "incorrect"
    assert "mistaken assumption" not in infodeepseek.JUDGE_PROMPT
    assert "mistaken assumption" in infodeepseek.FALSE_PREMISE_PROMPT


def test_infodeepseek_yes_no_mapping():
    with FakeOpenAIServer(script=[{"pattern": "Candidate answer: It opened in 1932", "reply": "**Yes.**"}, {"reply": "No."}]) as srv:
        judge = judge_for(srv)
        assert grade(q_ids(), "It opened in 1932.", judge).outcome == "correct"
        assert grade(q_ids(), "It opened in 1950.", judge).outcome == "incorrect"


# -- SealQA: only A earns credit --------------------------------------------------------------
@pytest.mark.parametrize(("letter", "outcome", "correct"),
                         [("A", "correct", True), ("B", "incorrect", False), ("C", "not_attempted", False)])
def test_sealqa_only_a_counts(letter, outcome, correct):
    with FakeOpenAIServer(script=[{"reply": letter}]) as srv:
        g = grade(q_seal(), "some answer", judge_for(srv))
    assert g.outcome == outcome and g.correct is correct


# -- empty responses --------------------------------------------------------------------------
@pytest.mark.parametrize(("question", "outcome"),
                         [(q_fresh(), "incorrect"), (q_ids(), "incorrect"), (q_seal(), "not_attempted")])
@pytest.mark.parametrize("response", [None, "", "   \n"])
def test_empty_response_is_not_judged(question, outcome, response):
    with FakeOpenAIServer(script=[{"reply": "A"}]) as srv:
        g = grade(question, response, judge_for(srv))
        assert srv.stats()["requests"] == 0
    assert (g.outcome, g.method) == (outcome, "none")


# -- template overrides -----------------------------------------------------------------------
def test_sealqa_override_changes_prompt_and_version(tmp_path, use_prompts):
    (tmp_path / "grader.sealqa.txt").write_text(
        "PURPLE-RUBRIC {question} / {target} / {predicted_answer}\nOne letter please.", encoding="utf-8"
    )
    script = [{"pattern": r"^PURPLE-RUBRIC How many lakes.* / 7 / seven", "reply": "A"}, {"reply": "B"}]
    with FakeOpenAIServer(script=script) as srv:
        judge = judge_for(srv)
        before = grade(q_seal(), "seven", judge)
        use_prompts(tmp_path)
        after = grade(q_seal(), "seven", judge)
    assert before.outcome == "incorrect" and before.grader_version == sealqa.VERSION
    assert after.outcome == "correct"
    assert after.grader_version.startswith(sealqa.VERSION + "+override.")
    assert grader_version(q_seal()) == after.grader_version
    # other graders are untouched by this file
    assert grader_version(q_fresh()) == freshqa.VERSION


def test_override_with_unknown_field_is_rejected(tmp_path, use_prompts):
    (tmp_path / "grader.sealqa.txt").write_text("{question} {target} {predicted_answer} {gold}", encoding="utf-8")
    use_prompts(tmp_path)
    with FakeOpenAIServer() as srv, pytest.raises(ValueError, match="gold"):
        grade(q_seal(), "seven", judge_for(srv))


def test_false_premise_override_only_versions_false_premise_grades(tmp_path, use_prompts):
    (tmp_path / "grader.infodeepseek_false_premise.txt").write_text(
        "{query} {reference_answer} {candidate_answer} Yes or No?", encoding="utf-8"
    )
    use_prompts(tmp_path)
    assert grader_version(q_ids()) == infodeepseek.VERSION
    assert grader_version(q_ids(false_premise=True)) != infodeepseek.VERSION


# -- dispatch and fan-out ---------------------------------------------------------------------
def test_unknown_dataset_is_a_clear_error():
    q = Question(id="mystery:9", dataset="mystery", question="?", answers=["x"])
    with FakeOpenAIServer() as srv, pytest.raises(ValueError, match=r"mystery:9.*'mystery'"):
        grade(q, "x", judge_for(srv))


def test_judge_settings_validation():
    c = LLMClient(None, base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="no judge model"):
        JudgeConfig.from_settings(c, {})
    with pytest.raises(ValueError, match="max_reasks"):
        JudgeConfig.from_settings(c, {"model": "m", "max_reasks": -1})
    cfg = JudgeConfig.from_settings(c, {"model": "m", "seed": None, "temperature": 0.5})
    assert cfg.params == {"temperature": 0.5}


def test_agrade_many_keeps_order_and_mixes_datasets():
    script = [
        {"pattern": "Gold target", "reply": "C"},
        {"pattern": "Reference answer", "reply": "Yes"},
        {"reply": "evaluation: incorrect"},
    ]
    pairs = [(q_seal(id=f"sealqa:{i}"), f"guess {i}") for i in range(6)]
    pairs += [(q_ids(id="infodeepseek:x"), "1932"), (q_fresh(), "Ada Lovelace"), (q_fresh(id="freshqa:2"), "Bob")]
    with FakeOpenAIServer(script=script, latency=0.02) as srv:
        judge = judge_for(srv, max_connections=4)
        seen = []

        async def main():
            try:
                return await agrade_many(pairs, judge, progress=False, on_result=lambda i, g: seen.append(i))
            finally:
                await judge.aclose()

        grades = asyncio.run(main())
        assert srv.stats()["requests"] == 8  # the exact FreshQA match needs no call
    assert [g.question_id for g in grades] == [q.id for q, _ in pairs]
    assert [g.outcome for g in grades] == ["not_attempted"] * 6 + ["correct", "correct", "incorrect"]
    assert sorted(seen) == list(range(len(pairs)))


def test_agrade_is_awaitable_and_grade_works_inside_a_running_loop():
    with FakeOpenAIServer(script=[{"reply": "A"}]) as srv:
        judge = judge_for(srv)

        async def main():
            direct = await agrade(q_seal(), "7", judge)
            await judge.aclose()
            nested = grade(q_seal(id="sealqa:2"), "7", judge)  # sync call from inside a loop
            return direct, nested

        direct, nested = asyncio.run(main())
    assert direct.outcome == nested.outcome == "correct"


# -- request parameters: only what the caller asked for ------------------------------------------
def spy_params(judge):
    """Record the keyword parameters of every judge call (the request parameters)."""
    seen = []
    real = judge.achat

    async def achat(messages, **kw):
        seen.append(dict(kw))
        return await real(messages, **kw)

    judge.achat = achat
    return seen


@pytest.mark.parametrize("question", [q_fresh(), q_ids(), q_seal()], ids=["freshqa", "infodeepseek", "sealqa"])
def test_no_sampling_parameter_is_sent_by_default(question):
    with FakeOpenAIServer(script=[{"reply": "Hmm."}]) as srv:
        judge = judge_for(srv)
        seen = spy_params(judge)
        g = grade(question, "Charles Babbage", judge, max_reasks=1)
    assert seen == [{"model": "judge-model"}] * 2  # the ask and the re-ask
    assert g.judge_settings == {"max_reasks": 1}
    assert JudgeConfig.from_settings(judge, {}).params == {}


def test_judge_params_from_flags_reach_every_call_and_the_record():
    settings = parse_judge_params(["reasoning_effort=high", "max_completion_tokens=4000", "temperature=1"])
    with FakeOpenAIServer(script=[{"reply": "B"}]) as srv:
        judge = judge_for(srv)
        seen = spy_params(judge)
        g = grade(q_seal(), "nine", judge, **settings)
    want = {"reasoning_effort": "high", "max_completion_tokens": 4000, "temperature": 1}
    assert seen == [{"model": "judge-model", **want}]
    assert g.judge_settings == {**want, "max_reasks": 2}


@pytest.mark.parametrize(
    ("flags", "want"),
    [
        ([], {}),
        (["temperature=0"], {"temperature": 0}),
        (["temperature=0.7", "seed=42"], {"temperature": 0.7, "seed": 42}),
        (["reasoning_effort=high"], {"reasoning_effort": "high"}),
        (["reasoning-effort=low"], {"reasoning_effort": "low"}),
        (["max_tokens=512", "max_completion_tokens=2048"], {"max_tokens": 512, "max_completion_tokens": 2048}),
        (['stop=["\\n\\n"]'], {"stop": ["\n\n"]}),
        (['reasoning={"effort": "medium"}'], {"reasoning": {"effort": "medium"}}),
        (['user="0"'], {"user": "0"}),  # a quoted value stays a string
        (["top_p=null"], {"top_p": None}),  # null: left out of the request
        (["logprobs=true"], {"logprobs": True}),
        ([" temperature = 1 "], {"temperature": 1}),
    ],
)
def test_parse_judge_params(flags, want):
    assert parse_judge_params(flags) == want


@pytest.mark.parametrize(
    ("flags", "match"),
    [
        (["temperature"], r"--judge-param 'temperature': expected KEY=VALUE"),
        (["=1"], r"--judge-param '=1': the key must be"),
        (["temp erature=1"], "the key must be"),
        (["model=gpt-5"], r"'model' cannot be set this way \(use --judge"),
        (["messages=[]"], "cannot be set"),
        (["temperature=hot"], "temperature takes a number"),
        (["temperature=true"], "temperature takes a number"),
        (["seed=1.5"], "seed takes an integer"),
        (["max_completion_tokens=lots"], "max_completion_tokens takes an integer"),
        (["temperature=NaN"], "finite"),
        (["seed=1", "seed=2"], "'seed' is given more than once"),
        (["reasoning_effort="], "the value is empty"),
    ],
)
def test_parse_judge_params_errors_name_the_flag(flags, match):
    with pytest.raises(ValueError, match=match) as e:
        parse_judge_params(flags)
    assert "--judge-param" in str(e.value)


@pytest.mark.parametrize(
    ("message", "want"),
    [
        ("Unsupported parameter: 'temperature' is not supported with this model.",
         "does not accept the parameter 'temperature'; remove --judge-param temperature=..."),
        ("Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) value is supported.",
         "accepts only the default value (1) of 'temperature'; remove --judge-param temperature=0"),
        ("Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
         "remove --judge-param max_tokens=... and use --judge-param max_completion_tokens=N instead"),
        ("Unsupported value: 'reasoning_effort' does not support 'minimal' with this model. "
         "Supported values are: 'low', 'medium', and 'high'.",
         "change --judge-param reasoning_effort=minimal to one of: low, medium, high"),
        ("Unrecognized request argument supplied: reasoning_effort",
         "does not accept the parameter 'reasoning_effort'; remove --judge-param reasoning_effort=..."),
        # the provider's message inside the client's error text
        ("400 from https://api.example/v1 for model 'gpt-5.4': Unsupported parameter: 'top_p' is not supported "
         "with this model. (the request itself was rejected; fix it and run again)",
         "remove --judge-param top_p=..."),
    ],
)
def test_explain_unsupported_parameter(message, want):
    text = explain_unsupported_parameter(message)
    assert text is not None and want in text


def test_explain_unsupported_parameter_names_the_option_that_set_it():
    text = explain_unsupported_parameter(
        "Unsupported parameter: 'seed' is not supported with this model.", sources={"seed": "--seed"}
    )
    assert text is not None and "remove --seed" in text and "--judge-param" not in text
    assert "--custom" in explain_unsupported_parameter(
        "Unsupported parameter: 'temperature' is not supported with this model.", flag="--custom"
    )


@pytest.mark.parametrize(
    "message",
    [None, "", "401 from x: Incorrect API key provided", "The model 'gpt-9' does not exist",
     "This model's maximum context length is 128000 tokens."],
)
def test_explain_unsupported_parameter_ignores_other_errors(message):
    assert explain_unsupported_parameter(message) is None


def test_a_rejected_parameter_stops_grading_with_an_explainable_error():
    msg = "Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) value is supported."
    script = [{"error": {"status": 400, "message": msg, "param": "temperature", "code": "unsupported_value"}}]
    with FakeOpenAIServer(script=script) as srv, pytest.raises(FatalLLMError) as e:
        grade(q_seal(), "nine", judge_for(srv), **parse_judge_params(["temperature=0"]))
    text = explain_unsupported_parameter(str(e.value))
    assert text is not None and "--judge-param temperature=0" in text


def test_a_schema_constraining_endpoint_is_asked_for_a_json_verdict():
    script = [{"pattern": "gold target", "reply": '{"verdict": "A"}'}]
    with FakeOpenAIServer(script=script) as srv:
        judge = judge_for(srv)
        judge.json_schema_replies = True  # as the embedded llama.cpp model's client says
        g = grade(q_seal(), "seven", judge)
        plain = grade(q_seal(), "seven", judge_for(srv))
    assert g.outcome == "correct"
    fmt = g.judge_settings["response_format"]
    assert fmt["type"] == "json_object" and fmt["schema"]["properties"]["verdict"]["enum"] == ["A", "B", "C"]
    assert "response_format" not in plain.judge_settings  # other endpoints get no format


def test_every_grader_registers_itself_and_the_help_names_each():
    from trek.cli import options
    from trek.graders import GRADERS

    assert {m.GRADER for m in GRADERS.values()} == set(GRADERS) >= {"freshqa", "infodeepseek", "sealqa", "generic"}
    assert all(GRADERS[name].__name__ == f"trek.graders.{name}" for name in GRADERS)
    for name in GRADERS:  # --grader's help lists the registered graders
        assert name in options.GRADER.help, name
