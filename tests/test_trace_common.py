"""Page rendering for the judges and probes (paper C.5) and prompt template overrides."""

from __future__ import annotations

from trek import templates
from trek.pages import GOLD_CHARS, NON_GOLD_CHARS, PageStore, normalize_url
from trek.trace import probes, verdict
from trek.trace.common import render_pages
from trek.types import Document


def test_pages_are_indexed_truncated_by_role_and_placeholdered():
    store = PageStore()
    long = "q" * 60_000
    store.add_documents([Document(id="g", url="https://gold.example/a", text=long, title="Gold"),
                         Document(id="o", url="https://other.example/b", text=long)])
    pages = [store.get("https://gold.example/a"), store.get("https://other.example/b"),
             store.get("https://missing.example/c")]
    text = render_pages(pages, [normalize_url("https://www.gold.example/a/")])
    parts = text.split("\n\n-----\n\n")
    assert [p[:4] for p in parts] == ["[1] ", "[2] ", "[3] "]
    assert "URL: https://gold.example/a" in parts[0] and "Title: Gold" in parts[0]
    assert parts[0].count("q") == GOLD_CHARS and "first 50,000 of 60,000" in parts[0]
    assert parts[1].count("q") == NON_GOLD_CHARS
    assert "Page unavailable: https://missing.example/c" in parts[2]
    assert render_pages([]) == "(none)"
    short = render_pages(pages, [normalize_url("https://gold.example/a")], gold_chars=700, other_chars=350).split(
        "\n\n-----\n\n")
    assert short[0].count("q") == 700 and short[1].count("q") == 350


def test_page_limits_other_than_the_papers_are_part_of_the_resume_key():
    from trek.llm import LLMClient
    from trek.trace.common import RoleModel
    from trek.trace.pipeline import TraceConfig

    role = RoleModel("diagnostic", LLMClient("m", base_url="http://h/v1", progress=False), "m")
    base = TraceConfig(role, role, role, PageStore())
    assert "page_chars" not in base.settings()  # default limits: keys of earlier traces stay valid
    assert TraceConfig(role, role, role, PageStore(), gold_chars=700).settings()["page_chars"] == [700, NON_GOLD_CHARS]


def test_probe_prompts_have_no_reference_field():
    for prompt in (probes.GOLD_ONLY_PROMPT, probes.NOISE_PROMPT):
        fields = templates._fields(prompt)
        assert fields == {"question", "effective_year", "pages"}
        assert "reference" not in prompt.lower()
    assert "answers" in templates._fields(verdict.PROMPT)


def test_an_override_changes_the_recorded_version(tmp_path):
    (tmp_path / "trace.verdict.txt").write_text("Q {question} A {answers} C {candidate} Y {effective_year}")
    with templates.prompts_folder(tmp_path):
        v = templates.template_version(verdict.TEMPLATE, verdict.PROMPT, verdict.VERSION)
        assert v.startswith(verdict.VERSION + "+override.")
    assert templates.template_version(verdict.TEMPLATE, verdict.PROMPT, verdict.VERSION) == verdict.VERSION


def test_reply_validators_accept_json_booleans_and_reject_the_rest():
    import pytest

    from trek.trace import evidence, queries

    assert verdict.validate({"correct": "yes", "reason": " ok "}) == {"correct": True, "reason": "ok"}
    assert queries.validate({"query_adequate": False}) == {"query_adequate": False, "reason": ""}
    for bad in ({}, {"correct": "maybe"}, {"correct": 1}):
        with pytest.raises(ValueError):
            verdict.validate(bad)
    with pytest.raises(ValueError, match="key_evidence"):
        evidence.validate_key_evidence({"key_evidence": "  "})
    with pytest.raises(ValueError, match="answer"):
        probes.validate({"answer": ""})
    assert evidence.validate_match({"evidence_match": True, "equivalent_urls": "u"})["equivalent_urls"] == ["u"]


def _longest_value(schema: dict, where: str = "reply") -> int:
    """The most characters a value of ``schema`` can hold; fails on an unbounded string or list."""
    kind = schema.get("type")
    if kind == "object":
        return sum(_longest_value(s, f"{where}.{k}") for k, s in schema["properties"].items())
    if kind == "array":
        assert "maxItems" in schema, f"{where}: a list without maxItems"
        return schema["maxItems"] * _longest_value(schema["items"], f"{where}[]")
    if kind == "string":
        assert "maxLength" in schema, f"{where}: a string without maxLength"
        return schema["maxLength"]
    return 8  # booleans and numbers


def test_a_probe_reply_constrained_to_its_schema_fits_the_recorded_token_limit():
    """SmolLM2 constrained to an unbounded list wrote "URLs" until max_tokens (320) cut the JSON."""
    from trek.trace import probes

    assert _longest_value(probes.SCHEMA) <= 4 * 160  # characters: well under 320 tokens with the keys
