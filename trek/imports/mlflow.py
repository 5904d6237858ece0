"""``mlflow``: the traces of an MLflow experiment, through ``mlflow.search_traces``.

``trek import mlflow TRACKING_URI [--experiment NAME|ID] --questions FILE --out RUN`` calls
``mlflow.search_traces`` (``return_type="list"``) with the tracking URI set to TRACKING_URI for
the call only, on the experiment named (by name, else by id; default the ``Default`` experiment,
id ``0``). Each span of each trace (``span_id``, ``parent_id``, ``start_time_ns``/``end_time_ns``,
``status``, ``attributes``, ``events``) becomes the span record the OTLP importer reads, and each
trace one trajectory as :mod:`trek.imports.otlp` makes it: spans sent over OTLP keep their
OpenInference or GenAI attributes; MLflow's own spans carry ``mlflow.spanType``,
``mlflow.spanInputs`` and ``mlflow.spanOutputs``. MLflow hands attribute values back decoded
from JSON; objects are written back as JSON text, as the instrumentation set them. The question
id may also be a trace tag or metadata key (``--question-key``).

Trace ids: MLflow names a trace ``tr-<OTel trace id in hex>``; the trajectory keeps the hex id
(so ``trek trace export --to otlp`` works too) and ``--to mlflow`` writes to ``tr-<hex>``.

Needs the ``mlflow`` extra (``pip install 'trek[mlflow]'``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from trek.imports import otlp
from trek.imports.common import ImportFailure, InputRecord, Parsed
from trek.imports.servers import attributes, server_error, shown, trace_records
from trek.imports.spans import Span, TraceOptions

NAME = "mlflow"
#: The experiment read when ``--experiment`` is not given: MLflow's ``Default``.
DEFAULT_EXPERIMENT = "0"
#: The location option of this source (``trek import mlflow --experiment``).
LOCATION = "--experiment"
REMOTE = True
_TR = re.compile(r"^tr-([0-9a-fA-F]{32})$")

__all__ = ["DEFAULT_EXPERIMENT", "NAME", "hex_trace_id", "read_traces", "parse", "tracking",
           "span_record"]


def hex_trace_id(trace_id: str) -> str:
    """``tr-<hex>`` -> ``<hex>`` (lower case); any other id unchanged."""
    m = _TR.match(trace_id or "")
    return m.group(1).lower() if m else trace_id


@contextmanager
def tracking(uri: str) -> Iterator[Any]:
    """``mlflow`` with its tracking URI set to ``uri`` inside the block."""
    from trek.trace.destinations import MissingExtra, mlflow_tracking

    try:
        ctx = mlflow_tracking(uri)
        mlflow = ctx.__enter__()
    except MissingExtra as e:
        raise ImportFailure(str(e).replace("trek trace export --to", "trek import mlflow")) from None
    try:
        yield mlflow
    finally:
        ctx.__exit__(None, None, None)


def _check_source(uri: str) -> None:
    """Refuse a tracking URI that names a local store which is not there: MLflow would create
    it (an empty database at ``sqlite:///typo.db``, a ``mlruns`` folder), and an import only
    reads."""
    from pathlib import Path
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme in ("http", "https", "databricks", "databricks-uc", "uc"):
        return
    if scheme == "sqlite":
        path = unquote(uri.split("://", 1)[1])
        path = path[1:] if path.startswith("/") and not path.startswith("//") else path[1:] if path else path
        target = Path(path) if path and path != ":memory:" else None
        if target is None or not target.is_file():
            raise ImportFailure(f"{shown(uri)}: no MLflow database at {target or path or '(no path)'}: an import only "
                                "reads, it does not create one (check the path)")
        return
    if scheme in ("", "file") or len(scheme) == 1:  # a folder of runs (a one-letter scheme: a Windows drive)
        folder = Path(unquote(parts.path) if scheme == "file" else uri)
        if not folder.is_dir():
            raise ImportFailure(f"{shown(uri)}: no MLflow tracking folder at {folder}: an import only reads, it does "
                                "not create one (check the path)")


def _experiment_id(mlflow: Any, uri: str, name: str) -> str:
    client = mlflow.MlflowClient(tracking_uri=uri)
    try:
        exp = client.get_experiment_by_name(name)
    except Exception as e:
        raise server_error(uri, f"looking up experiment {name!r}", e) from None
    if exp is not None:
        return str(exp.experiment_id)
    try:
        return str(client.get_experiment(name).experiment_id)
    except Exception as e:
        if "RESOURCE_DOES_NOT_EXIST" in str(e) or "not exist" in str(e).lower() or "INVALID_PARAMETER" in str(e):
            raise ImportFailure(f"{shown(uri)}: no experiment named or numbered {name!r} (--experiment names one)") from None
        raise server_error(uri, f"looking up experiment {name!r}", e) from None


def _status(span: Any) -> str | None:
    status = getattr(span, "status", None)
    code = getattr(getattr(status, "status_code", None), "value", getattr(status, "status_code", None))
    if str(code).upper() != "ERROR":
        return None
    return str(getattr(status, "description", "") or "the span's status is ERROR")


def span_record(span: Any, order: int) -> Span:
    """One ``mlflow.entities.Span`` as the OTLP importer's span record."""
    events = [(str(e.name or ""), attributes(e.attributes)) for e in (span.events or [])]
    error = _status(span)
    if error == "the span's status is ERROR":
        error = next((str(a["exception.message"]) for n, a in events if n == "exception" and a.get("exception.message")),
                     error)
    return Span(trace_id=hex_trace_id(str(span.trace_id)), span_id=str(span.span_id).lower(),
                parent_id=str(span.parent_id).lower() if span.parent_id else None, name=str(span.name or ""),
                start=int(span.start_time_ns or 0), end=int(span.end_time_ns or 0), attrs=attributes(span.attributes),
                events=events, error=error, order=order)


def read_traces(sources: Sequence[str], options: TraceOptions, location: str | None = None) -> list[InputRecord]:
    """One record per trace of experiment ``location`` (a name or an id; default
    :data:`DEFAULT_EXPERIMENT`) at the tracking URI ``sources[0]``."""
    from trek.trace.destinations import Deadline, DeadlineExceeded, call_within

    (uri,) = sources
    _check_source(uri)
    deadline = Deadline(uri, "reading traces")
    with tracking(uri) as mlflow:
        try:
            eid = call_within(deadline, lambda: _experiment_id(mlflow, uri, location)) if location else DEFAULT_EXPERIMENT
        except DeadlineExceeded as e:
            raise ImportFailure(str(e)) from None
        where = f"{shown(uri)} (experiment {location or 'Default'!r})"
        scope = "locations" if "locations" in inspect.signature(mlflow.search_traces).parameters else "experiment_ids"
        try:
            found = call_within(deadline, lambda: mlflow.search_traces(**{scope: [eid]}, return_type="list",
                                                                       include_spans=True))
        except DeadlineExceeded as e:
            raise ImportFailure(str(e)) from None
        except Exception as e:
            raise server_error(uri, f"searching the traces of experiment {eid}", e) from None
    spans: list[Span] = []
    extra: dict[str, list[Any]] = {}
    for t in found or []:
        info = t.info
        tid = hex_trace_id(str(info.trace_id))
        extra[tid] = [dict(info.tags or {}), dict(getattr(info, "trace_metadata", None) or {})]
        for s in t.data.spans if t.data is not None else []:
            try:
                spans.append(span_record(s, len(spans) + 1))
            except (TypeError, ValueError, AttributeError) as e:
                raise ImportFailure(f"{where}, trace {info.trace_id}: a span cannot be read ({e})") from None
    return trace_records(spans, where, options, extra)


def parse(rec: InputRecord) -> Parsed:
    return otlp.parse(rec)
