"""``anthropic-messages``: Anthropic Messages API replies with the server ``web_search`` tool.

A record is a message object (``{"type": "message", "role": "assistant", "content": [...],
"model", "usage"}``) or a list of them (the turns of one answer, e.g. after ``pause_turn``;
wrap such a list as ``{"question_id": ..., "record": [...]}``).

Read from the content blocks, in order:

* ``server_tool_use`` with ``name: web_search``: a search (``input.query``); with ``name:
  web_fetch``: an opened page (``input.url``);
* ``web_search_tool_result`` (matched by ``tool_use_id``): its ``content`` is the ranked results
  (``url``, ``title``, ``page_age`` as the date, ``encrypted_content``) or an error object
  (``{"type": "web_search_tool_result_error", "error_code"}``), recorded as the search's error;
* ``web_fetch_tool_result``: the fetched document's text (kept as the page's full text) or an
  error object;
* ``text`` blocks: the answer is the text after the last tool result of the last turn; their
  ``citations`` of type ``web_search_result_location`` (``url``, ``title``, ``cited_text``) are
  the citations, and the cited text is kept as a snippet of the page;
* ``usage``: ``input_tokens`` (+ cache reads and writes), ``output_tokens``.

Coverage: queries and results ``all``; the result pages are held only encrypted (stored as such
in the page store, with the cited snippets beside them), so page text is ``encrypted`` unless
every retrieved page was fetched or cited.
"""

from __future__ import annotations

from typing import Any

from trek.imports.common import InputRecord, PageText, Parsed, as_dict
from trek.imports.fields import count, ident, model_name
from trek.types import Citation, SearchCall, SearchResult, TrajectoryStep, Usage

NAME = "anthropic-messages"


def is_item(obj: Any) -> bool:
    return False  # an array in a .json file is always an array of records


def usage_of(u: Any) -> Usage:
    u = as_dict(u)
    cached = count(u.get("cache_read_input_tokens"), "usage.cache_read_input_tokens")
    prompt = (count(u.get("input_tokens"), "usage.input_tokens") + cached
              + count(u.get("cache_creation_input_tokens"), "usage.cache_creation_input_tokens"))
    return Usage(prompt_tokens=prompt, completion_tokens=count(u.get("output_tokens"), "usage.output_tokens"),
                 cached_tokens=cached,
                 calls=1 if u else 0, cost_usd=None)


def search_results(content: Any, parsed: Parsed) -> tuple[list[SearchResult], str | None]:
    """The results of a ``web_search_tool_result``'s content (and the pages they carry), or the
    error code of an error object."""
    if isinstance(content, dict):
        return [], str(content.get("error_code") or content.get("type") or "error")
    results = []
    for r in content if isinstance(content, list) else []:
        r = as_dict(r)
        url = r.get("url")
        if not isinstance(url, str) or not url:
            continue
        title, date = str(r.get("title") or ""), r.get("page_age") or None
        results.append(SearchResult(url=url, title=title, date=date))
        if r.get("encrypted_content"):
            parsed.pages.append(PageText(url=url, kind="encrypted", title=title, date=date))
    return results, None


def fetched_page(content: Any) -> tuple[str | None, str, str, str | None]:
    """``(url, title, text, error)`` of a ``web_fetch_tool_result``'s content."""
    content = as_dict(content)
    if content.get("type", "").endswith("error") or "error_code" in content:
        return None, "", "", str(content.get("error_code") or "error")
    doc = as_dict(content.get("content"))
    source = as_dict(doc.get("source"))
    text = source.get("data") if source.get("type") == "text" else None
    return content.get("url"), str(doc.get("title") or ""), text if isinstance(text, str) else "", None


def add_citations(citations: Any, parsed: Parsed) -> None:
    for c in citations if isinstance(citations, list) else []:
        c = as_dict(c)
        url = c.get("url")
        if not isinstance(url, str) or not url:
            continue
        cited = c.get("cited_text") if isinstance(c.get("cited_text"), str) else None
        parsed.citations.append(Citation(url=url, title=str(c.get("title") or ""), cited_text=cited))
        if cited:
            parsed.pages.append(PageText(url=url, kind="snippet", text=cited, title=str(c.get("title") or "")))


def parse_blocks(blocks: list[Any], parsed: Parsed, rnd: int) -> list[str]:
    """Read one turn's content blocks into ``parsed``; return the text after its last tool result."""
    pending: dict[str, TrajectoryStep] = {}
    texts: list[str] = []
    for b in blocks:
        b = as_dict(b)
        kind = b.get("type")
        if kind == "server_tool_use":
            inp = as_dict(b.get("input"))
            if b.get("name") == "web_search":
                query = inp.get("query") if isinstance(inp.get("query"), str) else ""
                if not query:
                    parsed.queries = "some"
                    parsed.note("a web_search call without a query")
                step = TrajectoryStep(kind="search", round=rnd, tool="web_search", call_id=b.get("id"), query=query,
                                      search_index=len(parsed.searches))
                parsed.searches.append(SearchCall(query=query, backend="anthropic", round=rnd))
            elif b.get("name") == "web_fetch":
                step = TrajectoryStep(kind="open", round=rnd, tool="web_fetch", call_id=b.get("id"),
                                      url=inp.get("url") if isinstance(inp.get("url"), str) else None)
                if step.url:
                    parsed.opened.append(step.url)
            else:
                continue
            parsed.steps.append(step)
            pending[str(b.get("id"))] = step
        elif kind == "web_search_tool_result":
            step = pending.get(str(b.get("tool_use_id")))
            if step is None or step.search_index is None:
                continue
            results, error = search_results(b.get("content"), parsed)
            call = parsed.searches[step.search_index]
            call.results, call.error = results, error
            step.result_urls, step.error = [r.url for r in results], error
            texts = []
        elif kind == "web_fetch_tool_result":
            step = pending.get(str(b.get("tool_use_id")))
            url, title, text, error = fetched_page(b.get("content"))
            if step is not None:
                step.error = error
                step.url = step.url or url
                if step.url and step.url not in parsed.opened:
                    parsed.opened.append(step.url)
            if url and text:
                parsed.pages.append(PageText(url=url, kind="full", text=text, title=title))
            texts = []
        elif kind == "text":
            texts.append(str(b.get("text") or ""))
            add_citations(b.get("citations"), parsed)
        elif kind == "tool_use":
            parsed.note(f"client tool call {b.get('name')!r} is not read as a search")
    return texts


def parse(rec: InputRecord) -> Parsed:
    turns = rec.data if isinstance(rec.data, list) else [rec.data]
    if not turns or not all(isinstance(t, dict) for t in turns):
        raise rec.fail("expected a message object (or a list of them)")
    parsed = Parsed(model=model_name(turns[-1].get("model"), "model"),
                    record_id=ident(turns[-1].get("id"), "id", required=False))
    answer: list[str] = []
    for rnd, turn in enumerate(turns, start=1):
        content = turn.get("content")
        if not isinstance(content, list):
            raise rec.fail(f"turn {rnd}: field 'content': expected a list of content blocks")
        answer = parse_blocks(content, parsed, rnd)
        parsed.usage = parsed.usage + usage_of(turn.get("usage"))
    if parsed.usage.calls == 0:
        parsed.usage = parsed.usage.model_copy(update={"cost_usd": None})
    if not answer:
        last = [as_dict(b) for b in turns[-1]["content"]]
        answer = [str(b.get("text") or "") for b in last if b.get("type") == "text"]
    parsed.answer = "".join(answer) if answer else None
    parsed.answer_round = len(turns)
    if parsed.answer is None and turns[-1].get("stop_reason") not in (None, "end_turn"):
        parsed.status, parsed.error = "failed", f"stop_reason {turns[-1].get('stop_reason')}"
    if any(p.kind == "encrypted" for p in parsed.pages):
        parsed.note("result pages are held only as encrypted_content; cited text is kept as snippets")
    return parsed
