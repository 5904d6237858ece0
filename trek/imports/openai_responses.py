"""``openai-responses``: OpenAI Responses API replies with the hosted ``web_search`` tool.

A record is a response object (``{"object": "response", "output": [...], "model", "usage"}``),
or the items of one run as the Agents SDK lists them (``[{"type": "tool_call_item",
"raw_item": {...}}, ...]``, or ``{"items": [...]}`` / ``{"new_items": [...]}``; each run item's
``raw_item`` is a Responses output item; bare output items work too).

Read (through :func:`trek.search.openai_search.parse_web_search_output`, the parser of Trek's
own native-search runs):

* ``web_search_call`` items: ``action.type`` ``search`` (``query``, ``queries``, and
  ``sources`` when the request asked for ``web_search_call.action.sources``), ``open_page``
  (``url``), ``find_in_page`` (``url``, ``pattern``; ``find`` in older logs); a failed call's
  ``status`` becomes the step's error;
* the final ``message`` item's ``output_text`` is the answer, its ``url_citation``
  annotations (``url``, ``title``) the citations;
* ``usage`` (``input_tokens``, ``output_tokens``, cached and reasoning token details).

xAI's Responses API writes the same ``web_search_call`` items, some with an ``action`` as
above and some (grok-4 replies of late 2025) with the tool's ``name`` and its ``arguments``
instead, a JSON text such as ``{"query": "...", "num_results": 5}``: the query (or the ``url``
of a page it opened) is read from there.

OpenAI's ``utm_source=openai`` tracking parameter is removed from every URL. Coverage: queries
``all`` (``some``/``none`` when search actions carry no query); results ``all`` when every
search action lists its ``sources``, else ``cited_only``; the API returns no page text. A reply
without a ``message`` item is an error, unless its ``status`` says it failed or stopped
(``failed``, ``incomplete``, ``cancelled``): then the trajectory is ``failed`` with that reason.
"""

from __future__ import annotations

from typing import Any

from trek.imports.common import InputRecord, Parsed, as_dict, get
from trek.imports.fields import count, ident, model_name
from trek.pages import strip_openai_tracking
from trek.search.openai_search import parse_web_search_output
from trek.types import Citation, Usage

NAME = "openai-responses"

_RUN_ITEM_LISTS = ("items", "new_items")


def is_item(obj: Any) -> bool:
    """An output item or Agents SDK run item (not a whole response or a wrapper)."""
    return isinstance(obj, dict) and ("raw_item" in obj or (
        isinstance(obj.get("type"), str) and obj.get("type") != "response" and "output" not in obj
        and "question_id" not in obj))


def output_items(rec: InputRecord) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The Responses output items of a record and the response object around them ({} for a
    list of run items)."""
    data = rec.data
    if isinstance(data, dict) and isinstance(data.get("output"), list):
        items, response = data["output"], data
    elif isinstance(data, dict) and any(isinstance(data.get(k), list) for k in _RUN_ITEM_LISTS):
        items = next(data[k] for k in _RUN_ITEM_LISTS if isinstance(data.get(k), list))
        response = data
    elif isinstance(data, list):
        items, response = data, {}
    else:
        raise rec.fail("not a Responses object: expected a response with an 'output' list, or a list of "
                       "output items / Agents SDK run items")
    out = []
    for i, item in enumerate(items, start=1):
        raw = item.get("raw_item") if isinstance(item, dict) and "raw_item" in item else item
        if not isinstance(raw, dict):
            raise rec.fail(f"output item {i}: expected a JSON object, got {type(raw).__name__}")
        out.append(raw)
    return out, response


def usage_of(u: Any) -> Usage:
    u = as_dict(u)
    prompt = count(get(u, "input_tokens", "prompt_tokens"), "usage.input_tokens")
    completion = count(get(u, "output_tokens", "completion_tokens"), "usage.output_tokens")
    cached = count(as_dict(get(u, "input_tokens_details", "prompt_tokens_details")).get("cached_tokens"),
                   "usage.input_tokens_details.cached_tokens")
    reasoning = count(as_dict(get(u, "output_tokens_details", "completion_tokens_details")).get("reasoning_tokens"),
                      "usage.output_tokens_details.reasoning_tokens")
    return Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached,
                 reasoning_tokens=reasoning, calls=1 if u else 0, cost_usd=None)


_ARG_QUERY = ("query", "q", "search_query", "queries")
_ARG_URL = ("url", "link", "page_url")


def with_actions(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``items`` with an ``action`` made from ``arguments`` for each ``web_search_call`` that
    has none (xAI's way of writing them, see the module docstring)."""
    from trek.imports.tool_results import maybe_json

    out = []
    for i, item in enumerate(items):
        if item.get("type") == "web_search_call" and not isinstance(item.get("action"), dict) \
                and item.get("arguments") is not None:
            args = maybe_json(item["arguments"], f"output item {i + 1}: arguments")
            args = args if isinstance(args, dict) else {"query": args} if isinstance(args, str) else {}
            query = next((args[k] for k in _ARG_QUERY if args.get(k)), None)
            url = next((args[k] for k in _ARG_URL if isinstance(args.get(k), str) and args.get(k)), None)
            if isinstance(query, list):
                action: dict[str, Any] = {"type": "search", "queries": [q for q in query if isinstance(q, str)]}
            elif query is not None:
                action = {"type": "search", "query": str(query)}
            elif url:
                action = {"type": "open_page", "url": url}
            else:
                action = {"type": "search"}
            item = {**item, "action": action}
        out.append(item)
    return out


def parse_items(items: list[dict[str, Any]], parsed: Parsed) -> None:
    """Searches, opened pages and citations of Responses output items into ``parsed``."""
    items = with_actions(items)
    trace = parse_web_search_output({"output": items}, backend="openai", round=1)
    parsed.searches += trace.searches
    parsed.steps += trace.steps
    parsed.opened += trace.opened
    parsed.citations += [Citation(url=c.url, title=c.title) for c in trace.citations]
    actions = [as_dict(i.get("action")) for i in items if i.get("type") == "web_search_call"]
    searches = [a for a in actions if a.get("type") == "search" or (not a.get("type") and not a.get("url"))]
    with_query = [a for a in searches if a.get("query") or a.get("queries")]
    if searches and len(with_query) < len(searches):
        parsed.queries = "none" if not with_query else "some"
        parsed.note(f"{len(searches) - len(with_query)} of {len(searches)} search action(s) carry no query")
    if any("sources" not in a for a in searches):
        parsed.results = "cited_only"
        if any(i.get("type") == "web_search_call" and "arguments" in i for i in items):
            parsed.note("web_search_call items written with arguments (xAI) list no sources: only the cited pages "
                        "are known")
        else:
            parsed.note("search actions list no sources (the request did not include "
                        "web_search_call.action.sources): only the cited pages are known")
    if parsed.searches or parsed.opened:
        parsed.note("the Responses API returns no page text")


def answer_of(items: list[dict[str, Any]]) -> str | None:
    """The output text of the last ``message`` item (None when there is none)."""
    messages = [i for i in items if i.get("type") == "message"]
    if not messages:
        return None
    parts = [p for p in messages[-1].get("content") or [] if isinstance(p, dict)]
    return "".join(str(p.get("text") or "") for p in parts if p.get("type") in ("output_text", "text"))


def parse(rec: InputRecord) -> Parsed:
    items, response = output_items(rec)
    parsed = Parsed(model=model_name(response.get("model"), "model"), record_id=ident(response.get("id"), "id", required=False), usage=usage_of(response.get("usage")),
                    has_page_text=False)
    parse_items(items, parsed)
    parsed.answer = answer_of(items)
    if parsed.answer is None:
        status = response.get("status")
        if status in ("failed", "incomplete", "cancelled"):
            why = as_dict(response.get("error")).get("message") or as_dict(response.get("incomplete_details")).get(
                "reason") or ""
            parsed.status, parsed.error = "failed", f"response {status}" + (f": {why}" if why else "")
        else:
            raise rec.fail("no 'message' item in the output: the reply holds no final answer")
    parsed.citations = [c.model_copy(update={"url": strip_openai_tracking(c.url)}) for c in parsed.citations]
    return parsed
