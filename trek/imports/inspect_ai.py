"""``inspect-ai``: inspect_ai evaluation logs (``.eval`` zips and ``.json`` logs), read with the
standard library; inspect_ai need not be installed.

A ``.eval`` file is a zip holding ``header.json`` (the eval spec; ``_journal/start.json`` in a
log still being written) and one ``samples/<id>_epoch_<n>.json`` per sample; a ``.json`` log
holds the spec under ``eval`` and the samples under ``samples``. Every string of a sample that
is an ``attachment://<key>`` reference is replaced by ``sample.attachments[key]``.

Each sample brings its question: ``id`` (the question id), ``input`` (a string, or messages
whose user text is the question), ``target`` (a string or a list: the reference answers),
``metadata.gold_urls`` and ``metadata.effective_year`` when present; the dataset is the task's
name unless ``--dataset`` says otherwise, graded by the generic judge. With several epochs,
one epoch is imported (``epoch``, default 1).

From ``messages`` (rounds are the assistant turns):

* assistant ``tool_calls`` of ``web_search`` (``arguments.query``) with the tool message that
  answers them (``tool_call_id``): results are the ``citations`` of its text content (``url``,
  ``title``, ``cited_text`` kept as a snippet); a content part with a single citation and no
  cited text is that page's text (the Google provider); a plain-text output gives the URLs it
  names; a tool ``error`` is the search's error;
* ``web_browser_go`` (``arguments.url``) and ``web_browser_click`` on a link (its URL read
  from the previous page's ``[id] link ... [url: ...]`` line) are opened pages, the tool output
  their full text; other browser actions (scroll, type, back) open nothing new;
* ``ContentToolUse`` parts (``type: tool_use``, ``tool_type: web_search``) are provider-native
  searches: ``arguments`` and ``result`` are JSON strings holding the provider's payload
  (OpenAI's action with ``query``/``queries``/``sources``/``url``/``pattern``; Anthropic's
  query and result list with ``encrypted_content``, or ``web_fetch``'s document);
* the answer is ``output.choices[0].message`` (else the last assistant message), its text
  citations (``type: url``) the citations; a sample ``error`` makes the trajectory ``failed``.

``scores`` (inspect's own grading) go to ``details.inspect_scores``; token usage is summed over
``model_usage``.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any

from trek import jsonio
from trek.imports import anthropic_messages
from trek.imports.common import ImportFailure, InputRecord, PageText, Parsed, as_dict
from trek.imports.fields import FieldError, count, ident, model_name, texts
from trek.imports.openai_responses import parse_items
from trek.pages import strip_openai_tracking
from trek.types import Citation, Question, RecordError, SearchCall, SearchResult, TrajectoryStep, Usage

NAME = "inspect-ai"

_ATTACHMENT = "attachment://"
_URL_IN_TEXT = re.compile(r"https?://[^\s\"'<>)\]]+")
_SAMPLE_NAME = re.compile(r"^samples/.+\.json$")
#: Client tools read as web searches without a note: inspect's ``web_search`` and Trek's ``trek/search``.
SEARCH_TOOLS = ("web_search", "search")


# -- reading ---------------------------------------------------------------------------------------
def _resolve(value: Any, attachments: dict[str, Any], where: str) -> Any:
    if isinstance(value, str) and value.startswith(_ATTACHMENT):
        key = value[len(_ATTACHMENT):]
        if key not in attachments:
            raise ImportFailure(f"{where}: {value} is not among the sample's attachments")
        return attachments[key]
    if isinstance(value, list):
        return [_resolve(v, attachments, where) for v in value]
    if isinstance(value, dict):
        return {k: (v if k == "attachments" else _resolve(v, attachments, where)) for k, v in value.items()}
    return value


#: The zip compression method inspect writes ``.eval`` members with since 0.3.2xx (zstd; the
#: standard library reads it only from Python 3.14).
_ZSTD = 93


def _member(z: zipfile.ZipFile, name: str) -> bytes:
    """The bytes of one member; zstd members are read raw from the archive and decompressed
    with ``zstandard``."""
    info = z.getinfo(name)
    if info.compress_type != _ZSTD:
        return z.read(name)
    import struct

    import zstandard

    assert z.fp is not None
    z.fp.seek(info.header_offset)
    head = z.fp.read(30)
    if head[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local header of {name}")
    name_len, extra_len = struct.unpack("<HH", head[26:30])
    z.fp.seek(info.header_offset + 30 + name_len + extra_len)
    raw = z.fp.read(info.compress_size)
    import io

    from trek import jsonio

    chunks, n = [], 0
    source = io.BytesIO(raw)
    with zstandard.ZstdDecompressor().stream_reader(source, read_across_frames=True, read_size=1 << 16) as reader:
        while chunk := reader.read(1 << 16):  # bounded as every zip member (trek.jsonio), from the first byte
            n += len(chunk)
            if n > jsonio.MAX_DOCUMENT or n > jsonio.MAX_RATIO * max(1, source.tell()) + jsonio.ZIP_SLACK:
                raise zipfile.BadZipFile(f"{name}: inflates more than {jsonio.MAX_RATIO} times or past "
                                         f"{jsonio.MAX_DOCUMENT >> 20} MiB: refused as a decompression bomb")
            chunks.append(chunk)
    out = b"".join(chunks)
    if len(out) != info.file_size:
        raise zipfile.BadZipFile(f"{name}: {len(out)} bytes after zstd decompression, the zip says {info.file_size}")
    return out


def _zip_json(z: zipfile.ZipFile, name: str, path: Path) -> Any:
    """A JSON member of the zip, through the bounded reader (size, ratio, nesting)."""
    try:
        if z.getinfo(name).compress_type == _ZSTD:
            data = _member(z, name)
        else:
            data = jsonio.zip_member(z, name, path)
        return jsonio.loads(data, f"{path}, {name}", nonfinite=True)  # inspect writes unscored values as NaN
    except RecordError as e:
        raise ImportFailure(str(e)) from None
    except (ValueError, zipfile.BadZipFile, OSError, KeyError) as e:
        raise ImportFailure(f"{path}, {name}: not a readable JSON member ({e})") from None


#: The fields of a sample that make its question (kept for every sample while a ``.eval`` log is
#: read; the rest of the sample is read again, one sample at a time, when it is imported).
_HEAD_FIELDS = ("id", "epoch", "input", "target", "metadata")


class _Log:
    """An open ``.eval`` log whose samples are read one at a time: a single sample is kept (the
    last one read), so memory holds one sample, not the log."""

    def __init__(self, path: Path):
        self.path = path
        self.zip: zipfile.ZipFile | None = None
        self.last: tuple[str, dict[str, Any]] | None = None

    def sample(self, member: str) -> dict[str, Any]:
        if self.last is not None and self.last[0] == member:
            return self.last[1]
        self.last = None  # let the previous sample go before the next one is read
        if self.zip is None:
            try:
                self.zip = zipfile.ZipFile(self.path)
            except (zipfile.BadZipFile, OSError) as e:
                raise ImportFailure(f"{self.path}: not an inspect .eval zip ({e}; truncated?)") from None
        s = as_dict(_zip_json(self.zip, member, self.path))
        s = _resolve(s, as_dict(s.get("attachments")), f"{self.path}, {member} (sample id {s.get('id')!r})")
        self.last = (member, s)
        return s

    def close(self) -> None:
        if self.zip is not None:
            self.zip.close()
        self.zip, self.last = None, None


class _SampleData(dict):  # type: ignore[type-arg]
    """A record's data whose ``sample`` is read from the log when asked for (see :class:`_Log`)."""

    def __init__(self, log: _Log, member: str, spec: dict[str, Any], head: dict[str, Any]):
        super().__init__(eval=spec, member=member, head=head)
        self.log = log

    def __missing__(self, key: str) -> Any:
        if key == "sample":
            return self.log.sample(self["member"])
        raise KeyError(key)


def _check(p: Path, name: str, s: Any, epoch: int) -> tuple[str, bool]:
    if not isinstance(s, dict) or "id" not in s:
        raise ImportFailure(f"{p}, {name}: not a sample (no 'id')")
    try:
        sample_epoch = count(s.get("epoch", 1), "epoch", minimum=1)
        sample_id = ident(s["id"], "id")
    except FieldError as e:
        raise ImportFailure(f"{p}, {name}: {e}") from None
    return sample_id, sample_epoch == epoch


def read(path: str | Any, epoch: int = 1) -> tuple[list[InputRecord], int]:
    """The samples of one log and how many samples of other epochs were left out. A ``.eval``
    log is streamed: each member is read once here (through the bounded reader, one at a time)
    for the fields of its question, and again when the record is parsed; attachments are
    resolved as a sample is read. A ``.json`` log is one document and is read whole."""
    p = Path(path)
    try:
        jsonio.check_regular(p)
    except RecordError as e:
        raise ImportFailure(str(e)) from None
    out: list[InputRecord] = []
    skipped = 0
    if p.suffix == ".eval":
        try:
            z = zipfile.ZipFile(p)
        except (zipfile.BadZipFile, OSError) as e:
            raise ImportFailure(f"{p}: not an inspect .eval zip ({e}; truncated?)") from None
        log = _Log(p)
        with z:
            names = z.namelist()
            head = next((n for n in ("header.json", "_journal/start.json") if n in names), None)
            spec = as_dict(as_dict(_zip_json(z, head, p)).get("eval") if head else {})
            members = sorted(n for n in names if _SAMPLE_NAME.match(n))
            if not members:
                raise ImportFailure(f"{p}: the log holds no samples (no samples/*.json in the zip)")
            for i, name in enumerate(members, start=1):
                s = _zip_json(z, name, p)
                sample_id, wanted = _check(p, name, s, epoch)
                if not wanted:
                    skipped += 1
                    continue
                where = f"{p}, {name} (sample id {s['id']!r})"
                attachments = as_dict(s.get("attachments"))
                first = {k: _resolve(s[k], attachments, where) for k in _HEAD_FIELDS if k in s}
                del s  # the sample itself is read again when it is imported
                out.append(InputRecord(p, i, _SampleData(log, name, spec, first), sample_id, unit="sample"))
    else:
        try:  # the bounded reader; NaN allowed (inspect writes unscored values so)
            data = jsonio.loads(jsonio.read_text(p, "inspect log"), p, nonfinite=True)
        except RecordError as e:
            raise ImportFailure(str(e)) from None
        if not isinstance(data, dict) or "eval" not in data:
            raise ImportFailure(f"{p}: not an inspect eval log (no 'eval' field)")
        spec = data.get("eval")
        if not data.get("samples"):
            raise ImportFailure(f"{p}: the log holds no samples (field 'samples' is empty or missing)")
        for i, s in enumerate(data["samples"], start=1):
            name = f"sample {i}"
            sample_id, wanted = _check(p, name, s, epoch)
            if not wanted:
                skipped += 1
                continue
            where = f"{p}, {name} (sample id {s['id']!r})"
            s = _resolve(s, as_dict(s.get("attachments")), where)
            out.append(InputRecord(p, i, {"sample": s, "head": s, "eval": as_dict(spec), "member": name}, sample_id,
                                   unit="sample"))
    if not out:
        raise ImportFailure(f"{p}: no sample of epoch {epoch}")
    return out, skipped


# -- questions -------------------------------------------------------------------------------------
def _split(value: Any, field: str) -> list[str]:
    if isinstance(value, str):
        return [v.strip() for v in value.split("|") if v.strip()]
    return texts(value, field)


def _input_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    msgs = [as_dict(m) for m in value] if isinstance(value, list) else []
    return "\n\n".join(_content_text(m.get("content")) for m in msgs if m.get("role") == "user").strip()


#: The question fields a sample of Trek's own inspect tasks carries in its metadata (``trek: true``).
OWN_QUESTION_FIELDS = ("dataset", "question", "answers", "effective_year_raw", "false_premise", "split", "grader")


def question(rec: InputRecord, dataset: str | None) -> Question:
    s, spec = rec.data.get("head") or rec.data["sample"], rec.data["eval"]
    meta = as_dict(s.get("metadata"))
    text = meta["question"] if meta.get("trek") is True and isinstance(meta.get("question"), str) else \
        _input_text(s.get("input"))
    target = s.get("target")
    try:
        answers = [target.strip()] if isinstance(target, str) and target.strip() else _split(target, "target")
        gold = _split(as_dict(s.get("metadata")).get("gold_urls"), "metadata.gold_urls")
    except FieldError as e:
        raise rec.fail(str(e)) from None
    if not text:
        raise rec.fail("field 'input': the sample has no question text")
    if not answers:
        raise rec.fail("field 'target': the sample has no reference answer; give them in a --questions file")
    meta = as_dict(s.get("metadata"))
    year = meta.get("effective_year")
    if meta.get("trek") is True:  # a sample of Trek's own tasks (trek.inspect): the question as Trek has it
        own = {k: meta[k] for k in OWN_QUESTION_FIELDS if meta.get(k) is not None}
        return Question(id=rec.question_id or ident(s["id"], "id"), **{
            "dataset": dataset or own.pop("dataset", None) or str(spec.get("task") or "inspect"), "question": text,
            "answers": answers, "gold_urls": gold, **own,
            "effective_year": year if isinstance(year, int) else None,
            "metadata": as_dict(meta.get("question_metadata"))})
    return Question(id=rec.question_id or ident(s["id"], "id"), dataset=dataset or str(spec.get("task") or "inspect"),
                    question=text, answers=answers, gold_urls=gold,
                    effective_year=year if isinstance(year, int) else None, grader="generic",
                    metadata={k: v for k, v in meta.items() if k not in ("gold_urls", "effective_year")})


# -- messages --------------------------------------------------------------------------------------
def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = [as_dict(c) for c in content] if isinstance(content, list) else []
    return "".join(str(c.get("text") or "") for c in parts if c.get("type") == "text")


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [as_dict(c) for c in content] if isinstance(content, list) else []


def _json(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return jsonio.loads(text, "a tool call's arguments")
    except RecordError:
        return text


def _search_output(content: Any, parsed: Parsed) -> list[SearchResult]:
    """The results a ``web_search`` tool message shows, and the page text it carries."""
    results: list[SearchResult] = []
    for part in _parts(content):
        cites = [as_dict(c) for c in part.get("citations") or []]
        urls = [c for c in cites if isinstance(c.get("url"), str) and c.get("url")]
        for c in urls:
            results.append(SearchResult(url=c["url"], title=str(c.get("title") or ""),
                                        snippet=c["cited_text"] if isinstance(c.get("cited_text"), str) else ""))
            if isinstance(c.get("cited_text"), str) and c["cited_text"].strip():
                parsed.pages.append(PageText(url=c["url"], kind="snippet", text=c["cited_text"],
                                             title=str(c.get("title") or "")))
        if len(urls) == 1 and not isinstance(urls[0].get("cited_text"), str) and part.get("text"):
            parsed.pages.append(PageText(url=urls[0]["url"], kind="full", text=str(part["text"]),
                                         title=str(urls[0].get("title") or "")))
        if not cites and part.get("text"):
            found = list(dict.fromkeys(u.rstrip(".,;") for u in _URL_IN_TEXT.findall(str(part["text"]))))
            if found:
                parsed.note("some search results were read from the URLs named in a tool's text output")
            results += [SearchResult(url=u) for u in found]
    return results


def _link_url(page: str, element: Any) -> str | None:
    m = re.search(rf"^\s*\[{re.escape(str(element))}\] link\b[^\n]*\[url: ([^\]\s]+)\]", page, re.MULTILINE)
    return m.group(1) if m else None


def _tool_use(part: dict[str, Any], parsed: Parsed, rnd: int) -> None:
    """A provider-native search (``ContentToolUse``) into ``parsed``."""
    args, result = as_dict(_json(part.get("arguments"))), _json(part.get("result"))
    name = str(part.get("name") or "")
    error = part.get("error") or None
    if name in ("search", "open_page", "find_in_page", "find") or args.get("type") in ("search", "open_page",
                                                                                      "find_in_page", "find"):
        item = {"type": "web_search_call", "id": part.get("id"), "action": {"type": args.get("type") or name, **args},
                "status": "failed" if error else "completed"}
        start = len(parsed.steps)
        parse_items([item], parsed)
        for s in parsed.steps[start:]:
            s.round = rnd
        return
    if name == "web_fetch":
        url = args.get("url") if isinstance(args.get("url"), str) else None
        fetched_url, title, text, ferr = anthropic_messages.fetched_page(result)
        url = url or fetched_url
        parsed.steps.append(TrajectoryStep(kind="open", round=rnd, tool="web_fetch", call_id=part.get("id"), url=url,
                                           error=ferr or error))
        if url:
            parsed.opened.append(url)
            if text:
                parsed.pages.append(PageText(url=url, kind="full", text=text, title=title))
        return
    queries = [q for q in [args.get("query"), *(args.get("queries") or [])] if isinstance(q, str) and q.strip()]
    if isinstance(result, list) or isinstance(result, dict) and ("error_code" in result):
        results, rerr = anthropic_messages.search_results(result, parsed)
    else:
        results, rerr = [], None
    if not queries:
        parsed.queries = "some"
        parsed.note(f"a native {name or 'web search'} call without a query")
    for q in queries or [""]:
        parsed.steps.append(TrajectoryStep(kind="search", round=rnd, tool=name or "web_search", call_id=part.get("id"),
                                           query=q, result_urls=[r.url for r in results],
                                           search_index=len(parsed.searches), error=rerr or error))
        parsed.searches.append(SearchCall(query=q, backend="native", results=list(results), round=rnd,
                                          error=rerr or error))
    if not results and not rerr:
        parsed.results = "cited_only"
        parsed.note(f"the native {name or 'web search'} call's result lists no pages: only cited pages are known")


def _citations(content: Any, parsed: Parsed) -> None:
    for part in _parts(content):
        for c in map(as_dict, part.get("citations") or []):
            if c.get("type", "url") != "url" or not isinstance(c.get("url"), str) or not c.get("url"):
                continue
            cited = c.get("cited_text") if isinstance(c.get("cited_text"), str) else None
            c["url"] = strip_openai_tracking(c["url"])
            parsed.citations.append(Citation(url=c["url"], title=str(c.get("title") or ""), cited_text=cited))
            if cited:
                parsed.pages.append(PageText(url=c["url"], kind="snippet", text=cited, title=str(c.get("title") or "")))


def _usage(s: dict[str, Any]) -> Usage:
    total = Usage(cost_usd=None)
    mu = s.get("model_usage")
    if mu is not None and not isinstance(mu, dict):
        raise FieldError("model_usage", f"expected an object of usage by model, got {type(mu).__name__}")
    usages = [(f"model_usage.{k}", v) for k, v in (mu or {}).items()] or [
        ("output.usage", as_dict(s.get("output")).get("usage"))]
    for where, u in usages:
        if u is None:
            continue
        if not isinstance(u, dict):
            raise FieldError(where, f"expected a usage object, got {type(u).__name__}")
        total = total + Usage(prompt_tokens=count(u.get("input_tokens"), f"{where}.input_tokens"),
                              completion_tokens=count(u.get("output_tokens"), f"{where}.output_tokens"),
                              cached_tokens=count(u.get("input_tokens_cache_read"), f"{where}.input_tokens_cache_read"),
                              reasoning_tokens=count(u.get("reasoning_tokens"), f"{where}.reasoning_tokens"),
                              cost_usd=None)
    return total


def parse(rec: InputRecord) -> Parsed:
    s = rec.data["sample"]
    spec = rec.data["eval"]
    output = as_dict(s.get("output"))
    parsed = Parsed(model=model_name(output.get("model") or spec.get("model"), "output.model"), record_id=f"{s['id']}/epoch {s.get('epoch') or 1}",
                    usage=_usage(s))
    messages = s.get("messages")
    if not isinstance(messages, list):
        raise rec.fail("field 'messages': expected a list")
    calls: dict[str, tuple[str, dict[str, Any], int]] = {}
    rnd = 0
    page = ""  # the last browser page, to resolve clicks
    last_assistant: dict[str, Any] = {}
    for m in map(as_dict, messages):
        role = m.get("role")
        if role == "assistant":
            rnd += 1
            last_assistant = m
            for part in _parts(m.get("content")):
                if part.get("type") == "tool_use" and part.get("tool_type") == "web_search":
                    _tool_use(part, parsed, rnd)
            for c in map(as_dict, m.get("tool_calls") or []):
                calls[str(c.get("id"))] = (str(c.get("function") or ""), as_dict(c.get("arguments")), rnd)
        elif role == "tool":
            fn, args, r = calls.get(str(m.get("tool_call_id")), (str(m.get("function") or ""), {}, rnd))
            err = as_dict(m.get("error"))
            error = f"{err.get('type') or 'error'}: {err.get('message') or ''}".strip(": ") if err else None
            text = _content_text(m.get("content"))
            if fn in SEARCH_TOOLS or (("search" in fn) and isinstance(args.get("query"), str)):
                query = args.get("query") if isinstance(args.get("query"), str) else ""
                if not query:
                    parsed.queries = "some"
                    parsed.note(f"a {fn} call without a query")
                results = [] if error else _search_output(m.get("content"), parsed)
                if fn not in SEARCH_TOOLS:
                    parsed.note(f"tool {fn!r} read as a web search")
                parsed.steps.append(TrajectoryStep(kind="search", round=r, tool=fn, call_id=m.get("tool_call_id"),
                                                   query=query, result_urls=[x.url for x in results],
                                                   search_index=len(parsed.searches), error=error))
                parsed.searches.append(SearchCall(query=query, backend="inspect", results=results, round=r,
                                                  error=error))
            elif fn.startswith("web_browser"):
                url = None
                if fn == "web_browser_go":
                    url = args.get("url") if isinstance(args.get("url"), str) else None
                elif fn == "web_browser_click":
                    url = _link_url(page, args.get("element_id"))
                if url or (fn == "web_browser_go"):
                    parsed.steps.append(TrajectoryStep(kind="open", round=r, tool=fn, call_id=m.get("tool_call_id"),
                                                       url=url, error=error, shown_chars=len(text)))
                    if url and not error:
                        parsed.opened.append(url)
                        parsed.pages.append(PageText(url=url, kind="full", text=text))
                if text and not error:
                    page = text
    final = as_dict((output.get("choices") or [{}])[0]).get("message") if output.get("choices") else None
    final = as_dict(final) or last_assistant
    answer = _content_text(final.get("content")) if final else ""
    if not answer and isinstance(output.get("completion"), str):
        answer = output["completion"]
    _citations(final.get("content"), parsed)
    parsed.answer = answer if (answer or final) else None
    parsed.answer_round = max(rnd, 1)
    if s.get("error"):
        parsed.status = "failed"
        parsed.error = str(as_dict(s["error"]).get("message") or s["error"])
    scores = {k: as_dict(v).get("value") for k, v in as_dict(s.get("scores")).items()}
    if scores:
        parsed.details["inspect_scores"] = scores
    return parsed


# -- what Trek's own scorers left in a log ---------------------------------------------------------
#: The score names of Trek's inspect scorers (``trek/grade``, ``trek/trektrace``) in a sample's ``scores``.
GRADE_SCORE, TRACE_SCORE = "grade", "trektrace"


def carried(rec: InputRecord) -> tuple[Any, Any]:
    """The Trek grade and TrekTrace record that ``trek/grade`` / ``trek/trektrace`` stored in the
    sample's score metadata (``trek_grade``, ``trek_trace``), as :class:`~trek.types.Grade` and
    :class:`~trek.trace.records.TraceRecord`; ``None`` for what the log does not carry. The
    ``trek/grade`` score's grade wins over the one ``trek/trektrace`` graded inline."""
    from pydantic import ValidationError

    from trek.trace.records import TraceRecord
    from trek.types import Grade

    scores = as_dict(rec.data["sample"].get("scores"))
    grade = trace = None
    for name in (TRACE_SCORE, GRADE_SCORE):
        meta = as_dict(as_dict(scores.get(name)).get("metadata"))
        try:
            if isinstance(meta.get("trek_grade"), dict):
                grade = Grade.model_validate(meta["trek_grade"])
            if name == TRACE_SCORE and isinstance(meta.get("trek_trace"), dict):
                trace = TraceRecord.model_validate(meta["trek_trace"])
        except ValidationError as e:
            raise rec.fail(f"scores.{name}.metadata: not a Trek record ({str(e).splitlines()[0]})") from None
    return grade, trace


def corpus(rec: InputRecord) -> list[Any]:
    """The frozen corpus the sample was answered over (``metadata.corpus: mini``: TrekBench-Mini's
    hand-written pages), for the run's page store; none otherwise."""
    meta = as_dict(rec.data["sample"].get("metadata"))
    if meta.get("trek") is not True or meta.get("corpus") != "mini":
        return []
    from trek.datasets import load_benchmark

    return list(load_benchmark("mini", None).corpus)
