"""``gemini``: Gemini ``generateContent`` replies with Google Search grounding.

A record is a ``GenerateContentResponse`` as the REST API writes it (camelCase) or as the
``google-genai`` SDK dumps it (snake_case); both spellings are read. From the first candidate:

* ``content.parts``: the answer is the text of the parts that are not thoughts;
* ``groundingMetadata.webSearchQueries``: the searches (their results are not attributed to a
  query, so each search has none);
* ``groundingMetadata.groundingChunks[].web.{uri, title}``: the pages the answer is grounded
  on, in order; the chunks that ``groundingSupports`` point to are the citations;
  ``retrievedContext`` chunks (Vertex AI Search) give document ids;
* ``usageMetadata``: prompt, candidate, thought and cached token counts.

Coverage: queries ``all``; results ``cited_only`` (grounding chunks are the sources the answer
used, not every result); no page text; URL identity ``redirects`` (the URIs are
``vertexaisearch.cloud.google.com/grounding-api-redirect/...`` links, not the pages' URLs; the
title is often only the site's domain). A reply without candidates is an error unless its
``promptFeedback`` says it was blocked (then the trajectory is ``failed``).
"""

from __future__ import annotations

from typing import Any

from trek.imports.common import InputRecord, Parsed, as_dict, get
from trek.imports.fields import count, ident, model_name
from trek.types import Citation, SearchCall, TrajectoryStep, Usage

NAME = "gemini"


def is_item(obj: Any) -> bool:
    return False


def usage_of(u: Any) -> Usage:
    u = as_dict(u)
    return Usage(
        prompt_tokens=count(get(u, "promptTokenCount", "prompt_token_count"), "usageMetadata.promptTokenCount"),
        completion_tokens=count(get(u, "candidatesTokenCount", "candidates_token_count"),
                                "usageMetadata.candidatesTokenCount")
        + count(get(u, "thoughtsTokenCount", "thoughts_token_count"), "usageMetadata.thoughtsTokenCount"),
        reasoning_tokens=count(get(u, "thoughtsTokenCount", "thoughts_token_count"), "usageMetadata.thoughtsTokenCount"),
        cached_tokens=count(get(u, "cachedContentTokenCount", "cached_content_token_count"),
                            "usageMetadata.cachedContentTokenCount"),
        calls=1 if u else 0, cost_usd=None,
    )


def grounding(meta: Any, parsed: Parsed) -> None:
    """Searches, grounding chunks and citations of one ``groundingMetadata`` into ``parsed``."""
    meta = as_dict(meta)
    for q in get(meta, "webSearchQueries", "web_search_queries") or []:
        if isinstance(q, str) and q.strip():
            parsed.steps.append(TrajectoryStep(kind="search", round=1, tool="google_search", query=q,
                                               search_index=len(parsed.searches)))
            parsed.searches.append(SearchCall(query=q, backend="gemini", round=1))
    chunks: list[tuple[str, str]] = []
    for ch in get(meta, "groundingChunks", "grounding_chunks") or []:
        ch = as_dict(ch)
        web = as_dict(ch.get("web"))
        ctx = as_dict(get(ch, "retrievedContext", "retrieved_context"))
        if web.get("uri"):
            chunks.append((str(web["uri"]), str(web.get("title") or web.get("domain") or "")))
        elif ctx.get("uri") or get(ctx, "documentName", "document_name"):
            chunks.append((str(ctx.get("uri") or get(ctx, "documentName", "document_name")), str(ctx.get("title") or "")))
        else:
            chunks.append(("", ""))
    parsed.seen_urls += [u for u, _ in chunks if u]
    cited: list[int] = []
    for sup in get(meta, "groundingSupports", "grounding_supports") or []:
        for i in get(as_dict(sup), "groundingChunkIndices", "grounding_chunk_indices") or []:
            if isinstance(i, int) and 0 <= i < len(chunks) and chunks[i][0] and i not in cited:
                cited.append(i)
    parsed.citations += [Citation(url=chunks[i][0], title=chunks[i][1]) for i in sorted(cited)]


def parse(rec: InputRecord) -> Parsed:
    data = rec.data
    if not isinstance(data, dict):
        raise rec.fail(f"expected a GenerateContentResponse object, got {type(data).__name__}")
    parsed = Parsed(model=model_name(get(data, "modelVersion", "model_version"), "modelVersion"),
                    record_id=ident(get(data, "responseId", "response_id"), "responseId", required=False),
                    usage=usage_of(get(data, "usageMetadata", "usage_metadata")), results="cited_only", has_page_text=False)
    candidates = data.get("candidates")
    if not isinstance(candidates, list) or not candidates:
        block = as_dict(get(data, "promptFeedback", "prompt_feedback"))
        reason = get(block, "blockReason", "block_reason")
        if reason:
            parsed.status, parsed.error = "failed", f"prompt blocked: {reason}"
            return parsed
        raise rec.fail("field 'candidates': the reply has no candidate (no answer)")
    cand = as_dict(candidates[0])
    parts = as_dict(cand.get("content")).get("parts") or []
    texts = [str(p.get("text")) for p in map(as_dict, parts) if isinstance(p.get("text"), str) and not p.get("thought")]
    parsed.answer = "".join(texts) if texts else None
    if parsed.answer is None:
        parsed.status = "failed"
        parsed.error = f"no text in the candidate (finishReason {get(cand, 'finishReason', 'finish_reason')})"
    grounding(get(cand, "groundingMetadata", "grounding_metadata"), parsed)
    if parsed.seen_urls or parsed.searches:
        parsed.note("grounding chunks are the sources the answer used, not every search result; "
                    "their URIs are redirect links and no page text is returned")
    return parsed
