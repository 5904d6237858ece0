"""Traces read from a running trace server (``trek import phoenix`` / ``trek import mlflow``).

The two server formats fetch spans through the server's own client (:mod:`trek.imports.phoenix`,
:mod:`trek.imports.mlflow`) and turn each into the :class:`~trek.imports.spans.Span` the OTLP
importer reads, so one trace becomes one record exactly as ``trek import otlp`` makes it from an
OTLP file (same span reader, same question ids, same ``parse``). What this module shares:

* :func:`attribute_value`: a server's attribute value as OTLP carries it (a server that hands
  back decoded JSON, such as MLflow, gets its objects written back as the JSON string the
  instrumentation set);
* :func:`trace_records`: spans grouped by trace id, the traces in the order they started, each
  with its question id or the texts its question may be in (a server's own order, newest first
  for Phoenix, never decides anything: traces are matched to questions by id or question text,
  :func:`trek.imports.common.match_traces`);
* :func:`server_error`: an error of the client as one line naming the server.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from trek.imports.common import ImportFailure, InputRecord, iso_time_ns
from trek.imports.fields import FieldError
from trek.imports.spans import Span, TraceOptions, question_id_of, question_texts

__all__ = ["attribute_value", "iso_ns", "server_error", "shown", "trace_records"]


def shown(url: str) -> str:
    """``url`` as run files and messages show it: without the credentials it may carry."""
    from trek.llm.client import endpoint_identity

    return endpoint_identity(url)


def server_error(url: str, what: str, exc: BaseException) -> ImportFailure:
    """One line for a failed call to the server at ``url`` (never the client's traceback, nor a
    credential of the URL)."""
    from trek.llm.client import scrub, url_secrets

    text = scrub(" ".join(str(exc).split()) or type(exc).__name__, url_secrets(url))
    if len(text) > 300:
        text = text[:300] + "..."
    return ImportFailure(f"{shown(url)}: {what}: {type(exc).__name__}: {text}")


def attribute_value(value: Any) -> Any:
    """``value`` as an OTLP attribute holds it: strings, numbers and booleans as they are, a list
    of those as a list; a mapping (or a list holding one) as its JSON text, which is what an
    instrumentation had written before the server decoded it."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)) and all(v is None or isinstance(v, (str, bool, int, float)) for v in value):
        return list(value)
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def attributes(values: Mapping[str, Any] | None) -> dict[str, Any]:
    """A span's attributes through :func:`attribute_value`."""
    return {str(k): attribute_value(v) for k, v in (values or {}).items()}


def iso_ns(value: Any) -> int:
    """An ISO 8601 time (or nanoseconds) as Unix nanoseconds; 0 when unreadable."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value) if math.isfinite(value) else 0
    return iso_time_ns(value)


def trace_records(spans: Iterable[Span], where: str, options: TraceOptions,
                  extra: Mapping[str, list[Any]] | None = None) -> list[InputRecord]:
    """One record per trace id (``data`` as :func:`trek.imports.otlp.parse` reads it), the
    traces in the order their first span started. ``where`` names the server and project in
    messages (``<where>, trace N``); ``extra``: per trace id, more mappings that may name the
    question id (a server's trace tags or metadata)."""
    traces: dict[str, list[Span]] = {}
    for s in spans:
        traces.setdefault(s.trace_id, []).append(s)
    ordered = sorted(traces.items(), key=lambda kv: (min(s.start for s in kv[1]), kv[0]))
    out = []
    for i, (tid, group) in enumerate(ordered, start=1):
        group.sort(key=lambda s: (s.start, s.order))
        qid = question_id_of(group, options.question_key, *((extra or {}).get(tid) or []))
        try:
            texts = () if qid is not None else question_texts(group)
        except FieldError as e:
            raise ImportFailure(f"{where}, trace {i}: trace {tid}: {e}") from None
        out.append(InputRecord(where, i, {"trace_id": tid, "spans": group, "options": options}, qid,  # type: ignore[arg-type]
                               unit="trace", texts=texts, label=f"trace {tid}"))
    if not out:
        raise ImportFailure(f"{where}: the server holds no trace there")
    return out
