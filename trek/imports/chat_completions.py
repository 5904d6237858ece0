"""``chat-completions``: Chat Completions replies of search models (``web_search_options``).

A record is a ``chat.completion`` object. The answer is ``choices[0].message.content`` (its
``refusal`` when there is no content); its ``annotations`` of type ``url_citation`` (``{"type":
"url_citation", "url_citation": {"url", "title", "start_index", "end_index"}}``) are the
citations; ``usage`` gives the tokens. The format shows nothing else of the search: coverage
is queries ``none`` and results ``cited_only`` (the cited pages are all that is known), no page
text. ``utm_source=openai`` is removed from the URLs. A reply without ``choices`` is an error.

Perplexity's Sonar replies are Chat Completions with two more top-level lists: ``citations``
(the URLs the bracketed ``[n]`` markers of the answer point to, in order) and
``search_results`` (``title``, ``url``, ``date``, ``snippet`` of each page its search found).
The citations are kept as the answer's citations (titled from the search results), and the
search results as one search whose query the reply does not show: coverage is queries ``none``
and results ``all`` (``cited_only`` when only ``citations`` are there). The same lists given
inside the message are read too.
"""

from __future__ import annotations

from typing import Any

from trek.imports.common import InputRecord, PageText, Parsed, as_dict
from trek.imports.fields import ident, model_name
from trek.imports.openai_responses import usage_of
from trek.pages import strip_openai_tracking
from trek.types import Citation, SearchCall, SearchResult, TrajectoryStep

NAME = "chat-completions"


def parse(rec: InputRecord) -> Parsed:
    data = rec.data
    if not isinstance(data, dict):
        raise rec.fail(f"expected a chat.completion object, got {type(data).__name__}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise rec.fail("field 'choices': the reply has no choice (no message)")
    message = as_dict(as_dict(choices[0]).get("message"))
    if not message:
        raise rec.fail("field 'choices.0.message': missing")
    parsed = Parsed(model=model_name(data.get("model"), "model"), record_id=ident(data.get("id"), "id", required=False), usage=usage_of(data.get("usage")),
                    queries="none", results="cited_only", has_page_text=False)
    content = message.get("content")
    parsed.answer = content if isinstance(content, str) else (message.get("refusal") or None)
    for i, ann in enumerate(message.get("annotations") or [], start=1):
        ann = as_dict(ann)
        if ann.get("type") != "url_citation":
            continue
        cit = as_dict(ann.get("url_citation")) or ann  # some SDK dumps flatten the object
        url = cit.get("url")
        if not isinstance(url, str) or not url:
            raise rec.fail(f"field 'choices.0.message.annotations.{i - 1}.url_citation.url': missing")
        parsed.citations.append(Citation(url=strip_openai_tracking(url), title=str(cit.get("title") or "")))
    if not _perplexity(data, message, parsed, rec):
        parsed.note("Chat Completions shows no search queries and no results beyond the cited pages")
    return parsed


def _listed(data: dict[str, Any], message: dict[str, Any], key: str) -> Any:
    value = data.get(key)
    return value if value is not None else message.get(key)


def _perplexity(data: dict[str, Any], message: dict[str, Any], parsed: Parsed, rec: InputRecord) -> bool:
    """Perplexity's ``citations`` and ``search_results`` into ``parsed`` (see the module
    docstring); False when the reply has neither."""
    cites, found = _listed(data, message, "citations"), _listed(data, message, "search_results")
    if cites is None and found is None:
        return False
    results: list[SearchResult] = []
    for i, r in enumerate(found or [], start=1):
        r = as_dict(r)
        url = r.get("url")
        if not isinstance(url, str) or not url.strip():
            raise rec.fail(f"field 'search_results.{i - 1}.url': missing")
        date = r.get("date") or r.get("last_updated")
        results.append(SearchResult(url=url.strip(), title=str(r.get("title") or ""),
                                    snippet=str(r.get("snippet") or ""), date=str(date) if date else None))
        if isinstance(r.get("snippet"), str) and r["snippet"].strip():
            parsed.pages.append(PageText(url=url.strip(), kind="snippet", text=r["snippet"], title=str(r.get("title") or "")))
    titles = {r.url: r.title for r in results if r.title}
    for i, c in enumerate(cites or [], start=1):
        url = c if isinstance(c, str) else as_dict(c).get("url")
        if not isinstance(url, str) or not url.strip():
            raise rec.fail(f"field 'citations.{i - 1}': not a URL")
        url = url.strip()
        if all(x.url != url for x in parsed.citations):
            parsed.citations.append(Citation(url=url, title=titles.get(url, "")))
    if results:
        parsed.searches.append(SearchCall(query="", backend="perplexity", results=results, round=1))
        parsed.steps.append(TrajectoryStep(kind="search", round=1, tool="perplexity_search", query="",
                                           result_urls=[r.url for r in results], search_index=0))
        parsed.results = "all"
        parsed.note(f"Perplexity lists the {len(results)} page(s) its search found (search_results) but not its "
                    "queries")
    else:
        parsed.note("Perplexity lists the cited pages (citations) but no search_results: the pages it found are a "
                    "lower bound")
    return True
