"""The four baselines against a scripted model: what each sends, parses, keeps and records."""

import asyncio

import pytest
from _rag_fixtures import doc, record

from trek.contexts import Context, render_documents
from trek.llm.client import LLMClient
from trek.rag import Direct, Filter, Rerank, Structured, make_method
from trek.rag.filter import check_keep_shape, parse_keep_ids
from trek.rag.structured import check_extraction_shape, evidence_text, parse_contrast, parse_extraction
from trek.testing.fake_openai import FakeOpenAIServer
from trek.types import Question

Q = Question(id="q1", dataset="freshqa", question="Who runs the Alder Street bakery?", answers=["Mira"],
             effective_year=2024)
DOCS = [doc(1, "2021-05-01", "Owner Tomas opened the bakery."),
        doc(2, "2024-06-01", "Mira now runs the bakery.\n\nShe bought it in spring.", role="gold"),
        doc(3, None, "A bakery in another town sells rye."),
        doc(4, "2019-01-01", "Old news: Petra runs the bakery.")]
CTX = Context.model_validate(record("q1", "MND", DOCS))

ANSWER_MARK = "=== DOCUMENTS ==="
FILTER_MARK = "Decide which documents to keep"
EXTRACT_MARK = "Go through every document below"
CONTRAST_MARK = "Below is evidence extracted"


def run(method, script, ctx=CTX, q=Q):
    async def go(srv):
        client = LLMClient("m", base_url=srv.base_url, api_key="k", max_retries=0)
        try:
            return await method.arun(q, ctx, client, {})
        finally:
            await client.aclose()

    with FakeOpenAIServer(script=script) as srv:
        out = asyncio.run(go(srv))
        return out, srv.stats()


def test_every_method_prompt_names_the_question_and_its_year():
    from trek.rag.answer import ANSWER_PROMPT, question_prompt
    from trek.rag.filter import FILTER_PROMPT
    from trek.rag.rerank import QUERY_PROMPT
    from trek.rag.structured import CONTRAST_PROMPT, EXTRACT_PROMPT

    for name, template, values in [("rag.answer", ANSWER_PROMPT, {"docs_block": "DOCS"}),
                                   ("rag.filter", FILTER_PROMPT, {"docs_block": "DOCS"}),
                                   ("rag.structured.extract", EXTRACT_PROMPT, {"docs_block": "DOCS"}),
                                   ("rag.structured.contrast", CONTRAST_PROMPT, {"extracted_evidence": "DOCS"}),
                                   ("rag.rerank.query", QUERY_PROMPT, {})]:
        text = question_prompt(name, template, Q, **values)
        assert Q.question in text and "2024" in text and ("DOCS" in text) == bool(values), name
    no_year = Q.model_copy(update={"effective_year": None})
    assert "the present day" in question_prompt("rag.rerank.query", QUERY_PROMPT, no_year)


# -- contexts -------------------------------------------------------------------------------------
def test_documents_render_back_to_the_context_and_subsets_renumber():
    assert render_documents(CTX.documents) == CTX.rendered
    assert CTX.documents[1].text == "Mira now runs the bakery.\n\nShe bought it in spring."
    sub = render_documents([CTX.documents[3], CTX.documents[1]])
    assert sub.startswith("[Document 1]\nDate: 2019-01-01\nSource URL: https://example.org/4\nOld news")
    assert "\n\n[Document 2]\nDate: 2024-06-01\n" in sub and "[Document 3]" not in sub


# -- direct ---------------------------------------------------------------------------------------
def test_direct_sends_the_whole_rendered_context_once():
    out, stats = run(Direct(), [{"any_pattern": ANSWER_MARK, "reply": "  Mira \n"}])
    assert out.final_answer == "Mira" and out.status == "ok"
    assert stats["requests"] == 1 and out.usage.calls == 1


def test_direct_reports_a_failed_call_as_pending_not_as_an_answer():
    out, _ = run(Direct(), [{"error": {"status": 500, "message": "down"}}])
    assert out.status == "pending" and out.final_answer is None and out.error


# -- rerank ---------------------------------------------------------------------------------------
class FixedScorer:
    name = "fixed"

    def __init__(self, scores):
        self.scores = scores
        self.texts = None

    async def ascore(self, query, texts):
        assert "Alder Street" in query
        self.texts = list(texts)
        return self.scores


def test_rerank_keeps_top_k_in_context_order_and_records_scores():
    # relevance scales to [0, 1/3, 2/3, 1]; temporal: doc2 (2024-06-01) highest; doc3 undated = mean
    scorer = FixedScorer([0.0, 1.0, 2.0, 3.0])
    m = Rerank(scorer=scorer, k=2, sigma_days=365)
    out, stats = run(m, [{"any_pattern": ANSWER_MARK, "reply": "{last}"}])
    assert scorer.texts == [d.text for d in CTX.documents]  # the document texts, no header or date line
    kept = [s["doc_id"] for s in out.details["scores"] if s["kept"]]
    assert out.details["kept_doc_ids"] == kept
    # doc4 (2019): relevance 1 x tiny weight; doc3 (undated): 2/3 x mean weight; doc2: 1/3 x ~0.92
    by_id = {s["doc_id"]: s for s in out.details["scores"]}
    assert by_id["d3"]["temporal"] == pytest.approx((by_id["d1"]["temporal"] + by_id["d2"]["temporal"]
                                                     + by_id["d4"]["temporal"]) / 3, abs=1e-5)
    assert kept == ["d2", "d3"] and out.details["cutoff"] == "2024-12-31"
    assert "[Document 1]\nDate: 2024-06-01" in out.final_answer and "[Document 3]" not in out.final_answer
    assert stats["requests"] == 1


# -- filter ---------------------------------------------------------------------------------------
def test_parse_keep_ids_drops_and_records_bad_ids():
    kept, dropped = parse_keep_ids([3, 1, 3, 0, 7, "2", "x", True, 2.0], 5)
    assert kept == [1, 2, 3]
    assert dropped == {"out_of_range": [0, 7], "duplicate": [3, 2], "not_an_id": ["x", True]}
    assert check_keep_shape({"keep_document_ids": [1]}) == [1] and check_keep_shape([2]) == [2]
    for bad in ({"keep": [1]}, {"keep_document_ids": 3}, "1, 2"):
        with pytest.raises(ValueError):
            check_keep_shape(bad)


def test_filter_answers_from_the_kept_documents_only():
    script = [{"any_pattern": FILTER_MARK, "reply": 'Keep: {"keep_document_ids": [4, 2, 2, 9]}'},
              {"any_pattern": ANSWER_MARK, "reply": "{last}"}]
    out, stats = run(Filter(), script)
    assert out.details["kept_doc_ids"] == ["d2", "d4"] and out.details["selection"] == "kept"
    assert out.details["dropped_ids"] == {"duplicate": [2], "out_of_range": [9]}
    assert "[Document 1]\nDate: 2024-06-01" in out.final_answer and "[Document 2]\nDate: 2019-01-01" in out.final_answer
    assert "Tomas" not in out.final_answer and stats["requests"] == 2
    assert [r["call"] for r in out.replies] == ["filter", "answer"]


def test_filter_empty_selection_falls_back_to_all_documents():
    script = [{"any_pattern": FILTER_MARK, "reply": '{"keep_document_ids": []}'},
              {"any_pattern": ANSWER_MARK, "reply": "{last}"}]
    out, _ = run(Filter(), script)
    assert out.details["selection"] == "empty" and out.details["fallback"] == "all"
    assert CTX.rendered in out.final_answer
    out, _ = run(Filter(empty_fallback="none"), script)
    assert "[Document 1]" not in out.final_answer


def test_filter_unreadable_reply_is_reasked_then_recorded():
    script = [{"pattern": "I could not read", "reply": "still not json"},
              {"any_pattern": FILTER_MARK, "reply": "I would keep two and four."},
              {"any_pattern": ANSWER_MARK, "reply": "Mira"}]
    out, stats = run(Filter(max_reasks=1), script)
    assert out.details["selection"] == "unparsed" and out.details["filter_attempts"] == 2
    assert out.final_answer == "Mira" and stats["requests"] == 3


def test_filter_pending_when_the_first_call_fails():
    out, stats = run(Filter(), [{"any_pattern": FILTER_MARK, "error": {"status": 500, "message": "x"}}])
    assert out.status == "pending" and out.final_answer is None


# -- structured -----------------------------------------------------------------------------------
def test_parse_contrast_well_formed_and_malformed():
    assert parse_contrast("#Contrast: doc 2 is newer.\n#Answer: Mira") == ("doc 2 is newer.", "Mira")
    assert parse_contrast("#Contrast: a #Answer: b #Answer: **Mira**") == ("a #Answer: b", "Mira")
    assert parse_contrast("# answer :  \"Mira\"\n") == (None, "Mira")
    for bad in ("Mira", "#Contrast: x\n#Answer:   ", "", None):
        with pytest.raises(ValueError):
            parse_contrast(bad)


def test_parse_extraction_keeps_well_formed_records():
    items = [
        {"document_id": 2, "key_evidence": "Mira now runs it", "candidate_answer": "Mira", "relation": "Answers",
         "reason": "recent"},
        {"document_id": "1", "candidate_answer": "Tomas", "relation": "competing"},
        {"document_id": 2, "candidate_answer": "again"},
        {"document_id": 9},
        {"document_id": "x"},
        "not an object",
        {"document_id": 4, "candidate_answer": "Petra", "relation": "outdated", "reason": None},
    ]
    recs, dropped = parse_extraction(items, 4)
    assert [r["document_id"] for r in recs] == [1, 2, 4]
    assert recs[0]["key_evidence"] == "" and recs[1]["relation"] == "answers"
    assert recs[2]["relation"] == "other" and recs[2]["relation_raw"] == "outdated"
    assert [d["reason"] for d in dropped] == ["document_id 2 repeated", "document_id 9 out of range 1..4",
                                              "no integer document_id", "not an object"]
    assert check_extraction_shape({"documents": [1]}) == [1]
    with pytest.raises(ValueError):
        check_extraction_shape({"a": [1], "b": [2]})
    text = evidence_text(recs, CTX)
    assert '"date": "2024-06-01"' in text and '"source_url": "https://example.org/2"' in text


def test_structured_two_calls_and_the_answer_after_the_marker():
    extraction = ('[{"document_id": 2, "key_evidence": "Mira now runs the bakery", "candidate_answer": "Mira", '
                  '"relation": "answers", "reason": "latest"}]')
    script = [{"any_pattern": EXTRACT_MARK, "reply": "```json\n" + extraction + "\n```"},
              {"any_pattern": "(?s)" + CONTRAST_MARK + '.*"candidate_answer": "Mira"',
               "reply": "#Contrast: only doc 2 is current.\n#Answer: Mira"}]
    out, stats = run(Structured(), script)
    assert out.final_answer == "Mira" and out.details["answer"] == "ok"
    assert out.details["records"][0]["candidate_answer"] == "Mira" and out.details["contrast"] == "only doc 2 is current."
    assert stats["requests"] == 2


def test_structured_malformed_replies_are_reasked_and_an_unparsed_answer_stays_unanswered():
    script = [{"pattern": "I could not read", "reply": '[{"document_id": 1, "candidate_answer": "Tomas"}]'},
              {"any_pattern": EXTRACT_MARK, "reply": "Document 1 says Tomas."},
              {"any_pattern": CONTRAST_MARK, "reply": "I think it is Tomas."}]
    out, stats = run(Structured(format_reasks=1), script)
    assert out.details["extraction"] == "ok" and out.details["extract_attempts"] == 2
    assert out.details["answer"] == "unparsed" and out.final_answer is None and out.status == "ok"
    assert stats["requests"] == 4  # extract, re-ask, contrast, format re-ask


def test_structured_unreadable_extraction_passes_the_raw_reply_on():
    script = [{"any_pattern": EXTRACT_MARK, "reply": "no json here"},
              {"any_pattern": "(?s)" + CONTRAST_MARK + ".*no json here", "reply": "#Answer: Tomas"}]
    out, _ = run(Structured(max_reasks=0), script)
    assert out.details["extraction"] == "unparsed" and out.final_answer == "Tomas"


def run_schema_endpoint(method, script):
    """``run`` against an endpoint that constrains replies to a JSON schema (as the embedded
    llama.cpp model's client says it does)."""
    async def go(srv):
        client = LLMClient("m", base_url=srv.base_url, api_key="k", max_retries=0)
        client.json_schema_replies = True
        try:
            return await method.arun(Q, CTX, client, {})
        finally:
            await client.aclose()

    with FakeOpenAIServer(script=script) as srv:
        return asyncio.run(go(srv)), srv.stats()


# a small model: prose unless the request constrains the reply to a schema
SMALL_MODEL = [{"any_pattern": EXTRACT_MARK, "json_schema": True,
                "reply": '{"documents": [{"document_id": 2, "key_evidence": "Mira now runs the bakery", '
                         '"candidate_answer": "Mira", "relation": "answers", "reason": "latest"}]}'},
               {"any_pattern": CONTRAST_MARK, "json_schema": True,
                "reply": '{"contrast": "only document 2 is current", "answer": "Mira"}'},
               {"any_pattern": CONTRAST_MARK, "json_schema": False, "reply": "The bakery is run by Mira."}]


def test_structured_json_answer_is_read_where_the_hash_answer_line_is_lost():
    plain, _ = run_schema_endpoint(Structured(max_reasks=0, format_reasks=1), SMALL_MODEL)
    assert plain.details["extraction"] == "ok" and plain.details["answer"] == "unparsed" and plain.final_answer is None
    out, stats = run_schema_endpoint(Structured(max_reasks=0, json_answer=True), SMALL_MODEL)
    assert out.final_answer == "Mira" and out.details["answer"] == "ok" and out.details["answer_format"] == "json"
    assert out.details["contrast"] == "only document 2 is current" and stats["requests"] == 2
    assert [r["call"] for r in out.replies] == ["extract", "contrast"]
    assert "contrast_json" in " ".join(Structured(json_answer=True).versions())
    assert Structured(json_answer=True).config()["json_answer"] is True and "json_answer" not in Structured().config()


def test_structured_json_answer_without_a_schema_endpoint_is_read_from_the_prompt_alone():
    script = [{"any_pattern": EXTRACT_MARK, "reply": "no json"},
              {"pattern": "I could not read", "json_schema": False, "reply": '{"contrast": "", "answer": "Mira"}'},
              {"any_pattern": CONTRAST_MARK, "json_schema": False, "reply": '{"contrast": "c", "answer": ""}'}]
    out, stats = run(Structured(max_reasks=0, json_answer=True), script)  # an ordinary endpoint: no schema sent
    assert out.final_answer == "Mira" and out.details["contrast_attempts"] == 2  # an empty answer is re-asked
    assert stats["requests"] == 3


def test_make_method_and_its_calls():
    assert {m: make_method(m).calls for m in ("direct", "filter", "structured")} == {
        "direct": 1, "filter": 2, "structured": 2}
    assert make_method("rerank", scorer=FixedScorer([]), sigma_days=30).config()["sigma_days"] == 30
    with pytest.raises(ValueError, match="unknown method"):
        make_method("hyde")
