"""Page text from files, without a live fetch (``trek pages add RUN SOURCE...``).

A source is:

* a ``.jsonl`` file, one page a line: ``url`` and ``text`` (required), ``title`` and ``date``
  (``YYYY-MM-DD``) optional; other fields (a corpus's ``id``, ``question_id``, ``metadata``, as
  in TrekBench-Mini's ``documents.jsonl``) are ignored, and one note a file names them;
* an ``.html``/``.htm`` file: text, title and date extracted with trafilatura (installed with
  ``pip install trek[search]``; without it a plain HTML-to-text parser is used, and the summary
  says so); its URL is ``--url``, else the page's own canonical URL (``<link rel=canonical>`` or
  ``og:url``);
* a ``.txt`` file (plain text): its URL is ``--url``.

The pages are stored as frozen corpus pages in the run's ``pages.sqlite``, replacing whatever
was stored under the same URL identity (snippets or encrypted content from an import, a failed
fetch). Every problem names the file, and the line for JSONL.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from trek.imports.fields import link_kind
from trek.jsonio import check_regular
from trek.pages import PageStore, extract_text, normalize_url
from trek.runs import PAGES, run_lock
from trek.types import Document, RecordError, iter_json_lines

__all__ = ["read_sources", "add_pages", "extractor"]

_CANONICAL = re.compile(
    r"<link[^>]+rel=[\"']canonical[\"'][^>]*href=[\"']([^\"']+)|<link[^>]+href=[\"']([^\"']+)[\"'][^>]*rel=[\"']"
    r"canonical|<meta[^>]+property=[\"']og:url[\"'][^>]*content=[\"']([^\"']+)", re.IGNORECASE)


def extractor() -> str:
    """``trafilatura`` when it is installed, else ``plain``."""
    try:
        import trafilatura  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return "plain"
    return "trafilatura"


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise RecordError(path, None, f"cannot be read ({e.strerror})") from None


def _date(path: Path, line: int | None, value: object) -> _dt.date | None:
    if value in (None, ""):
        return None
    try:
        return _dt.date.fromisoformat(str(value)[:10])
    except ValueError:
        raise RecordError(path, line, f"field 'date': expected YYYY-MM-DD, got {value!r}") from None


def read_sources(sources: Sequence[str | os.PathLike[str]], url: str | None = None,
                 notes: list[str] | None = None) -> list[Document]:
    """The pages of ``sources`` as documents (see the module docstring); ``notes`` gets one line a
    JSONL file whose pages have fields other than a page's (ignored)."""
    if url and len(sources) != 1:
        raise ValueError("--url names the page of one HTML or text file; give one source with it")
    docs: list[Document] = []
    for src in sources:
        p = check_regular(src, "page file")
        kind = p.suffix.lower()
        if kind in (".jsonl", ".ndjson"):
            extra: dict[str, None] = {}
            lines = 0
            for line, obj in iter_json_lines(p):
                for f in ("url", "text"):
                    if not isinstance(obj.get(f), str) or not obj[f].strip():
                        raise RecordError(p, line, f"field '{f}': missing or empty")
                more = [k for k in obj if k not in ("url", "text", "title", "date")]
                if more:
                    lines += 1
                    extra.update(dict.fromkeys(more))
                docs.append(Document(id=f"{p.name}:{line}", url=obj["url"].strip(), title=str(obj.get("title") or ""),
                                     date=_date(p, line, obj.get("date")), text=obj["text"], source=str(p)))
            if extra and notes is not None:
                notes.append(f"{p}: ignored field(s) {', '.join(sorted(extra))} of {lines} line(s) (a page has url, "
                             "text, title, date)")
        elif kind in (".html", ".htm"):
            html = _text(p)
            m = _CANONICAL.search(html)
            page_url = url or (next(g for g in m.groups() if g) if m else None)
            if not page_url:
                raise RecordError(p, None, "no URL: the page names no canonical URL; give it with --url")
            title, date, text = extract_text(html, page_url)
            if not text.strip():
                raise RecordError(p, None, "no text could be extracted")
            docs.append(Document(id=p.name, url=page_url, title=title, date=_date(p, None, date), text=text,
                                 source=str(p)))
        elif kind == ".txt":
            if not url:
                raise RecordError(p, None, "no URL: give the page's URL with --url (or use a JSONL file)")
            text = _text(p)
            if not text.strip():
                raise RecordError(p, None, "the file is empty")
            docs.append(Document(id=p.name, url=url, text=text, source=str(p)))
        else:
            raise RecordError(p, None, f"unknown kind of page file {kind or '(no suffix)'!r}: use .jsonl, .html or .txt")
    seen: dict[str, Document] = {}
    for d in docs:
        if link_kind(d.url) != "http":
            raise RecordError(d.source or "", None, f"page {d.id}: field 'url': {d.url[:80]!r} is not an http(s) URL "
                              "(a page is stored under its web address)")
        key = normalize_url(d.url)
        first = seen.setdefault(key, d)
        if first is not d and first.text != d.text:
            raise RecordError(d.source or "", None, f"page {d.id}: the URL {d.url[:80]} is given twice with different "
                              f"text (first as {first.id}); give each page once")
    return docs


def add_pages(run_dir: str | os.PathLike[str], sources: Sequence[str | os.PathLike[str]],
              url: str | None = None, notes: list[str] | None = None) -> int:
    """Store the pages of ``sources`` in the run's ``pages.sqlite``; returns how many were
    written (one per URL identity). Every source is read before anything is written; ``notes``
    gets what :func:`read_sources` notes."""
    rd = Path(run_dir)
    if not rd.is_dir():
        raise RecordError(rd, None, "run directory does not exist")
    docs = read_sources(sources, url, notes)
    path = rd / PAGES
    if path.exists():
        check_regular(path, "page store (SQLite)")
    with run_lock(rd):
        try:
            store = PageStore(path)
        except sqlite3.DatabaseError as e:
            raise RecordError(path, None, f"not a Trek page store ({e}): move it away or give another run") from None
        try:
            return store.add_documents(docs)
        except sqlite3.DatabaseError as e:
            raise RecordError(path, None, f"cannot be written as a page store ({e})") from None
        finally:
            store.close()
