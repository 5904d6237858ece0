"""What a search tool returned, read from a trace: result URLs in rank order, titles, snippets,
and page text when the result holds it.

Tools return anything: a JSON list of hits, a dict wrapping one (``results``, ``organic``,
``items``, ``documents``, ``hits``, ``web.results``, ...), a message object whose ``content`` is
the real output, or plain text. :func:`parse_result` reads all of these:

* a hit is a JSON object; its URL is the first of ``url``, ``link``, ``href``, ``uri``,
  ``source`` (or the same keys under ``metadata``; a document id that is itself a URL); its title
  ``title`` or ``name``; its snippet ``snippet``, ``body``, ``description`` or ``summary``; its
  text ``raw_content``, ``page_content``, ``content`` or ``text``. Text of at least
  :data:`FULL_TEXT_CHARS` characters is stored as the page's full text, shorter text as a
  snippet;
* JSON given as a string is parsed first; text that is not JSON gives the URLs it names, with
  titles and snippets where it is laid out as ``snippet: ..., title: ..., link: ...`` (LangChain's
  DuckDuckGo results);
* a Wikipedia tool's text (``Page: TITLE`` / ``Summary: ...``) names no URL: each page's URL is
  built from its title on ``en.wikipedia.org`` (:data:`WIKIPEDIA`), its summary kept as a snippet.

Retrieval documents (OpenTelemetry's ``gen_ai.retrieval.documents``, OpenInference's
``retrieval.documents``) are hits too: a document without any URL keeps its id as its "URL"
(the run's URL identity is then ``document_ids``).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from trek import jsonio
from trek.imports.common import PageText
from trek.imports.fields import FieldError
from trek.types import SearchResult

__all__ = ["FULL_TEXT_CHARS", "WIKIPEDIA", "MAX_JSON_TEXT", "MAX_JSON_LAYERS", "ParsedResult", "parse_result",
           "maybe_json"]

#: A hit's text of at least this many characters is the page's full text; shorter is a snippet.
FULL_TEXT_CHARS = 2000
#: Where the URL of a Wikipedia tool's page is built from its title.
WIKIPEDIA = "https://en.wikipedia.org/wiki/"

_URL = re.compile(r"https?://[^\s\"'<>)\]},]+")
_IS_URL = re.compile(r"^https?://\S+$")
_URL_KEYS = ("url", "link", "href", "uri", "source", "source_url", "page_url")
_TITLE_KEYS = ("title", "name")
_SNIPPET_KEYS = ("snippet", "body", "description", "summary")
_TEXT_KEYS = ("raw_content", "page_content", "content", "text")
_LIST_KEYS = ("results", "organic_results", "organic", "items", "documents", "hits", "data", "search_results",
              "sources", "value")
_DDG = re.compile(r"snippet: (?P<snippet>.*?), title: (?P<title>.*?), link: (?P<url>https?://[^\s,\]]+)", re.DOTALL)
_WIKI = re.compile(r"^Page: (?P<title>.+?)\s*\nSummary: (?P<summary>.*?)(?=\n\s*\nPage: |\Z)", re.DOTALL | re.MULTILINE)
_MESSAGE_KEYS = ("content", "output", "result", "response", "text")
_LITERAL_CHARS = 100_000
#: Longest text inside a string that is read as JSON (characters); a longer one stays text.
MAX_JSON_TEXT = 16 << 20
#: Most layers of encoding undone in one string (a JSON string literal holding JSON ...).
MAX_JSON_LAYERS = 4


@dataclass
class ParsedResult:
    """The hits of one tool result and the page text they carry; ``how`` says how they were
    read when it was not structured data (a note for the trajectory's coverage)."""

    results: list[SearchResult] = field(default_factory=list)
    pages: list[PageText] = field(default_factory=list)
    how: str | None = None


def maybe_json(value: Any, field: str = "value") -> Any:
    """``value`` decoded when it is a string holding JSON (an object, an array or a string
    literal; or, as some Python instrumentations write them, a Python literal such as
    ``{'query': 'x'}``), else unchanged. Layers of encoding are undone (a JSON string literal
    holding a JSON document, up to :data:`MAX_JSON_LAYERS` of them), so a doubly encoded
    ``"\"{\\"a\\": 1}\""`` is the object ``{"a": 1}``.

    The bounded reader of JSON inside strings: a text longer than :data:`MAX_JSON_TEXT`
    characters is left as text; one nested deeper than :data:`~trek.jsonio.MAX_DEPTH` or holding
    a number that is not finite (``NaN``, ``Infinity``, ``1e400``) or too long is refused with a
    :class:`~trek.imports.fields.FieldError` naming ``field`` (never a ``RecursionError`` or an
    ``OverflowError``)."""
    for _ in range(MAX_JSON_LAYERS):
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text[:1] not in ("{", "[", '"') or len(text) > MAX_JSON_TEXT:
            return value
        parsed = _loads(text, field)
        if parsed is _NOT_JSON:
            return _literal(text, field) if text[0] in "{[" else value
        if isinstance(parsed, str) and parsed == value:
            return parsed
        value = parsed
    return value


class _NotJson:
    pass


_NOT_JSON = _NotJson()


def _no_constant(name: str) -> Any:
    raise ValueError(f"the number {name} is not finite")


def _loads(text: str, field: str) -> Any:
    try:
        parsed = json.loads(text, parse_constant=_no_constant, parse_float=jsonio.finite_float)
    except json.JSONDecodeError:
        return _NOT_JSON
    except RecursionError:
        raise FieldError(field, f"holds JSON nested deeper than {jsonio.MAX_DEPTH} arrays or objects: refused") \
            from None
    except ValueError as e:  # NaN, Infinity, 1e400, an integer of over 4,300 digits
        raise FieldError(field, f"holds JSON that cannot be read ({e})") from None
    err = jsonio.depth_error(parsed)
    if err:
        raise FieldError(field, f"holds JSON {err}")
    return parsed


def _literal(text: str, field: str) -> Any:
    if len(text) > _LITERAL_CHARS:
        return text
    try:
        parsed = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, OverflowError):
        return text
    if not isinstance(parsed, (dict, list)):
        return text
    if jsonio.depth_error(parsed):
        raise FieldError(field, f"holds a literal nested deeper than {jsonio.MAX_DEPTH} levels: refused")
    return parsed


def _str(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _first(obj: dict[str, Any], keys: tuple[str, ...]) -> str:
    return next((_str(obj[k]) for k in keys if _str(obj.get(k))), "")


def _hit(obj: dict[str, Any], out: ParsedResult, documents: bool) -> bool:
    """One hit into ``out``; False when the object names no URL (nor, for ``documents``, an id)."""
    if isinstance(obj.get("document"), dict):  # OpenInference: {"document": {"id", "content", ...}}
        obj = {**obj, **obj["document"]}
    meta = maybe_json(obj.get("metadata"))
    meta = meta if isinstance(meta, dict) else {}
    url = next((u for u in (_first(obj, _URL_KEYS), _first(meta, _URL_KEYS)) if _IS_URL.match(u)), "")
    doc_id = _str(obj.get("id")) if isinstance(obj.get("id"), str) else ""
    if not url and _IS_URL.match(doc_id):
        url = doc_id
    title = _first(obj, _TITLE_KEYS) or _first(meta, _TITLE_KEYS)
    texts = [_str(obj.get(k)) for k in _TEXT_KEYS if _str(obj.get(k))]
    text = next((t for t in texts if len(t) >= FULL_TEXT_CHARS), "")
    snippet = _first(obj, _SNIPPET_KEYS) or next((t for t in texts if len(t) < FULL_TEXT_CHARS), "")
    if not url and documents:
        url = doc_id
    if not url:
        return False
    date = _first(obj, ("date", "published_date", "published", "age")) or None
    out.results.append(SearchResult(url=url, title=title, snippet=snippet, date=date))
    if text:
        out.pages.append(PageText(url=url, kind="full", text=text, title=title))
    elif snippet:
        out.pages.append(PageText(url=url, kind="snippet", text=snippet, title=title))
    return True


def _text(text: str, tool: str, out: ParsedResult) -> None:
    wiki = list(_WIKI.finditer(text)) if "wiki" in tool.lower() else []
    if wiki:
        for m in wiki:
            title = m.group("title").strip()
            url = WIKIPEDIA + quote(title.replace(" ", "_"), safe="_()'%,-.")
            out.results.append(SearchResult(url=url, title=title, snippet=m.group("summary").strip()))
            out.pages.append(PageText(url=url, kind="snippet", text=m.group("summary").strip(), title=title))
        out.how = "Wikipedia result URLs were built from the page titles the tool's text names"
        return
    ddg = list(_DDG.finditer(text))
    if ddg:
        for m in ddg:
            url = m.group("url").rstrip(".;")
            out.results.append(SearchResult(url=url, title=m.group("title").strip(), snippet=m.group("snippet").strip()))
            out.pages.append(PageText(url=url, kind="snippet", text=m.group("snippet").strip(),
                                      title=m.group("title").strip()))
        return
    urls = list(dict.fromkeys(u.rstrip(".,;:") for u in _URL.findall(text)))
    if urls:
        out.how = "search results were read from the URLs named in a tool's text output"
    out.results += [SearchResult(url=u) for u in urls]


def _walk(value: Any, tool: str, out: ParsedResult, documents: bool, depth: int = 0) -> None:
    value = maybe_json(value)
    if depth > 4 or value is None:
        return
    if isinstance(value, str):
        if _IS_URL.match(value.strip()):
            out.results.append(SearchResult(url=value.strip()))
        elif value.strip():
            _text(value, tool, out)
        return
    if isinstance(value, list):
        for item in value:
            if isinstance(item, dict) and _hit(item, out, documents):
                continue
            if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
                _walk(item["text"], tool, out, documents, depth + 1)  # a content part
            elif isinstance(item, (str, list, dict)):
                _walk(item, tool, out, documents, depth + 1)
        return
    if isinstance(value, dict):
        for k in _LIST_KEYS:
            if isinstance(maybe_json(value.get(k)), list):
                _walk(value[k], tool, out, documents, depth + 1)
                return
        web = value.get("web")
        if isinstance(web, dict) and isinstance(web.get("results"), list):
            _walk(web["results"], tool, out, documents, depth + 1)
            return
        if _hit(value, out, documents):
            return
        for k in _MESSAGE_KEYS:  # a message or tool-output object wrapping the real output
            if value.get(k) is not None:
                _walk(value[k], tool, out, documents, depth + 1)
                return


def parse_result(value: Any, tool: str = "", *, documents: bool = False) -> ParsedResult:
    """The hits of one search tool's result (see the module docstring); ``tool`` is its name;
    ``documents``: retrieval documents, whose ids stand for URLs when they name none."""
    out = ParsedResult()
    _walk(value, tool, out, documents)
    return out
