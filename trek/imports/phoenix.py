"""``phoenix``: the traces of a project on a running Phoenix server, through Phoenix's client.

``trek import phoenix URL [--project NAME] --questions FILE --out RUN`` asks the server at URL
(``phoenix.client.Client(base_url=URL)``) for every span of the project (default ``default``)
with ``client.spans.get_spans``, page after page, at most :data:`MAX_SPANS` spans, the whole
conversation under a deadline (:class:`trek.trace.destinations.Deadline`). Each span (its OTel ``context`` ids,
``parent_id``, ``span_kind`` (OpenInference's, which Phoenix keeps beside the attributes),
``start_time``/``end_time``, ``status_code``/``status_message``, flat ``attributes`` and
``events``) becomes the span record the OTLP importer reads, and each trace one
trajectory as :mod:`trek.imports.otlp` makes it (OpenInference or GenAI attributes, the question id
from ``--question-key``, else the question text). The trace and root span ids (OTel hex) are
kept, so ``trek trace export --to phoenix`` writes the labels back as span annotations.

Needs the ``phoenix`` extra (``pip install 'trek[phoenix]'``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trek.imports import otlp
from trek.imports.common import ImportFailure, InputRecord, Parsed
from trek.imports.servers import attributes, iso_ns, server_error, shown, trace_records
from trek.imports.spans import Span, TraceOptions

NAME = "phoenix"
#: The project read when ``--project`` is not given (Phoenix's own default).
DEFAULT_PROJECT = "default"
#: The location option of this source (``trek import phoenix --project``).
LOCATION = "--project"
REMOTE = True

__all__ = ["DEFAULT_PROJECT", "MAX_SPANS", "NAME", "client", "read_traces", "parse", "span_record"]


#: Most spans one import reads from a project: a server that always offers another page (or a
#: project too large to hold) ends with a clear error instead of pages without end.
MAX_SPANS = 1_000_000


def client(url: str, deadline: Any = None) -> Any:
    """Phoenix's client for the server at ``url``, its requests under ``deadline`` (a
    :class:`~trek.trace.destinations.Deadline`; by default one for reading the spans)."""
    from trek.trace.destinations import Deadline, MissingExtra, phoenix_client

    try:
        return phoenix_client(url, deadline or Deadline(url, "reading spans"))
    except MissingExtra as e:
        raise ImportFailure(str(e).replace("trek trace export --to", "trek import phoenix")) from None


def _error(span: dict[str, Any], events: list[tuple[str, dict[str, Any]]]) -> str | None:
    if str(span.get("status_code") or "").upper() != "ERROR":
        return None
    exc = next((a.get("exception.message") for n, a in events if n == "exception" and a.get("exception.message")),
               None)
    return str(span.get("status_message") or exc or "the span's status is ERROR")


def span_record(span: dict[str, Any], order: int) -> Span:
    """One span as ``client.spans.get_spans`` returns it, as the OTLP importer's span record."""
    ctx = span.get("context") if isinstance(span.get("context"), dict) else {}
    tid, sid = ctx.get("trace_id"), ctx.get("span_id")
    if not isinstance(tid, str) or not tid or not isinstance(sid, str) or not sid:
        raise ValueError(f"span {span.get('name')!r} has no context.trace_id or context.span_id")
    events = [(str(e.get("name") or ""), attributes(e.get("attributes") if isinstance(e.get("attributes"), dict)
                                                    else None))
              for e in span.get("events") or [] if isinstance(e, dict)]
    parent = span.get("parent_id")
    attrs = attributes(span.get("attributes") if isinstance(span.get("attributes"), dict) else None)
    kind = span.get("span_kind")  # Phoenix keeps OpenInference's span kind beside the attributes
    if isinstance(kind, str) and kind.strip() and kind.upper() != "UNKNOWN":
        attrs.setdefault("openinference.span.kind", kind.upper())
    return Span(trace_id=tid.lower(), span_id=sid.lower(), parent_id=parent.lower() if isinstance(parent, str) and parent
                else None, name=str(span.get("name") or ""), start=iso_ns(span.get("start_time")),
                end=iso_ns(span.get("end_time")),
                attrs=attrs, events=events, error=_error(span, events), order=order)


def read_traces(sources: Sequence[str], options: TraceOptions, location: str | None = None) -> list[InputRecord]:
    """One record per trace of project ``location`` (default :data:`DEFAULT_PROJECT`) on the
    server ``sources[0]``."""
    (url,) = sources
    project = location or DEFAULT_PROJECT
    where = f"{shown(url)} (project {project!r})"
    px = client(url)
    try:
        found = px.spans.get_spans(project_identifier=project, limit=MAX_SPANS + 1)
    except Exception as e:  # the client's errors: httpx's, its own ValueErrors, the deadline's
        status = getattr(getattr(e, "response", None), "status_code", None)
        if status == 404:
            raise ImportFailure(f"{where}: no such project on the server (--project names one)") from None
        raise server_error(url, f"reading the spans of project {project!r}", e) from None
    if len(found or []) > MAX_SPANS:
        raise ImportFailure(f"{where}: the server offers more than {MAX_SPANS:,} spans (the most one import reads); "
                            "import a smaller project")
    spans = []
    for i, s in enumerate(found or [], start=1):
        try:
            spans.append(span_record(s if isinstance(s, dict) else {}, i))
        except ValueError as e:
            raise ImportFailure(f"{where}, span {i}: {e}") from None
    return trace_records(spans, where, options)


def parse(rec: InputRecord) -> Parsed:
    return otlp.parse(rec)
