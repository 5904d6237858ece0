"""TrekTrace's labels sent to where the traces live (``trek trace export RUN --to DEST URL``).

The scores are those of :func:`trek.trace.export.scores` (one per label whose side of C.4 ran,
value 1 or 0, and one ``trektrace.status``), written with each destination's own client:

* ``phoenix``: one span annotation per score on the trace's root span
  (``client.spans.log_span_annotations``): ``name`` ``trektrace.<label>``, ``annotator_kind``
  ``LLM``, ``result`` ``{score: 1|0, label: yes|no, explanation: why}`` (the status:
  ``{label: done|incomplete|pending|failed, explanation}``), ``metadata`` the question id and
  Trek's version. Phoenix keys an annotation by span, name and identifier, so sending again
  updates instead of adding;
* ``mlflow``: one feedback assessment per score on the trace ``tr-<trace id>``
  (``mlflow.log_feedback``, source ``LLM_JUDGE`` ``trektrace``, value 1/0 or the status,
  ``rationale`` why). Earlier ``trektrace.*`` feedback of source ``trektrace`` on the trace is
  deleted first, so sending again replaces;
* ``otlp``: the OTLP request of :func:`trek.trace.export.otlp_request` (a ``trektrace`` span in
  each imported trace with its ``gen_ai.evaluation.result`` events) as OTLP/HTTP protobuf
  (``POST URL``, ``/v1/traces`` added when URL has no path), ids as bytes.

Ids in the two OTLP encodings: OTLP/JSON (``trek trace export --format otlp``) writes trace and
span ids as hex, as the specification says; protobuf's own JSON mapping (Python's
``json_format``) reads every ``bytes`` field as base64 and would silently get other ids from
hex. :func:`otlp_protobuf` therefore builds the message from the ids' bytes, and the OTLP
importer reads ids in either encoding.
"""

from __future__ import annotations

import base64
import copy
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from trek import __version__
from trek.trace.export import Score, otlp_request, scores

__all__ = ["DESTINATIONS", "MissingExtra", "Sent", "missing", "mlflow_trace_id", "mlflow_tracking", "phoenix_client_module", "otlp_protobuf", "send_labels", "to_mlflow", "to_otlp", "to_phoenix"]

#: Where ``--to`` can send the labels.
DESTINATIONS = ("phoenix", "mlflow", "otlp")
_SOURCE = "trektrace"


@dataclass(frozen=True)
class Sent:
    """What :func:`send_labels` sent: scores, traced cases, and where."""

    scores: int
    cases: int
    destination: str
    url: str

    def describe(self) -> str:
        what = {"phoenix": "span annotation(s)", "mlflow": "feedback assessment(s)",
                "otlp": "evaluation event(s)"}[self.destination]
        return f"sent {self.scores} {what} of {self.cases} traced case(s) to {self.destination} at {self.url}"


def _shown(url: str) -> str:
    from trek.llm.client import endpoint_identity

    return endpoint_identity(url)


def _one_line(url: str, what: str, exc: BaseException) -> RuntimeError:
    """One line for a failed call to ``url``, without the URL's credentials."""
    from trek.llm.client import scrub, url_secrets

    text = scrub(" ".join(str(exc).split()) or type(exc).__name__, url_secrets(url))
    return RuntimeError(f"{_shown(url)}: {what}: {type(exc).__name__}: {text[:300]}")


class MissingExtra(RuntimeError):
    """An optional dependency of a destination (or source) is not installed."""


def missing(e: ImportError, extra: str, what: str = "trek trace export --to") -> MissingExtra:
    """The one-line error for an ``ImportError`` of the ``extra``'s package."""
    return MissingExtra(f"{what} needs the {extra!r} extra ({e.name or 'a package'} is not installed): "
                        f"pip install 'trek[{extra}]'")


def phoenix_client_module() -> Any:
    """``phoenix.client``, loaded without the rest of ``phoenix``. The ``arize-phoenix`` package's
    ``__init__`` imports the whole server application (about 7,000 modules, some 10 s of CPU),
    while the client, which lives in the same namespace package, needs none of it: when
    ``phoenix`` is not imported yet it is registered as the bare namespace package it also is, so
    only the client loads (about 1,100 modules)."""
    import importlib.util
    import sys

    if "phoenix" not in sys.modules:
        try:
            spec = importlib.util.find_spec("phoenix")
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            # the package's module, its __init__ not run: __path__ and __spec__ as the import made them
            sys.modules["phoenix"] = importlib.util.module_from_spec(spec)
    try:
        import phoenix.client
    except ImportError as e:
        raise missing(e, "phoenix") from None
    return phoenix.client


def _cases(items: list[Score]) -> int:
    return len({s.trace_id for s in items})


def _root(s: Score, run_dir: Path) -> str:
    if not s.root_span_id:
        raise ValueError(f"{run_dir}: question {s.question_id!r}: the imported trace has no root span id to "
                         "annotate")
    return s.root_span_id


# -- Phoenix ---------------------------------------------------------------------------------------
def phoenix_annotations(items: list[Score], run_dir: Path) -> list[dict[str, Any]]:
    """The span annotations (Phoenix's ``SpanAnnotationData``) of ``items``."""
    out = []
    for s in items:
        result: dict[str, Any] = ({"score": float(s.value), "label": "yes" if s.value else "no"}
                                  if s.value is not None else {"label": s.status})
        result["explanation"] = s.comment
        out.append({"name": s.name, "span_id": _root(s, run_dir), "annotator_kind": "LLM", "result": result,
                    "metadata": {"question_id": s.question_id, "trek_version": __version__}, "identifier": ""})
    return out


def to_phoenix(run_dir: str | os.PathLike[str], url: str) -> Sent:
    """Write the labels of a traced run imported from traces as span annotations on Phoenix."""
    rd = Path(run_dir)
    items = scores(rd)
    rows = phoenix_annotations(items, rd)
    client = phoenix_client_module().Client(base_url=url.rstrip("/"))
    try:
        for i in range(0, len(rows), 100):
            client.spans.log_span_annotations(span_annotations=rows[i:i + 100], sync=True)
    except Exception as e:  # the client's httpx errors
        raise _one_line(url, "writing span annotations", e) from None
    return Sent(len(rows), _cases(items), "phoenix", _shown(url))


# -- MLflow ----------------------------------------------------------------------------------------
def mlflow_trace_id(trace_id: str) -> str:
    """The MLflow trace id of an imported trace id: ``tr-`` before an OTel hex id."""
    return f"tr-{trace_id.lower()}" if re.fullmatch(r"[0-9a-fA-F]{32}", trace_id or "") else trace_id


@contextmanager
def mlflow_tracking(uri: str) -> Iterator[Any]:
    """``mlflow`` with its tracking URI set to ``uri`` inside the block (what was set before,
    or nothing, is restored after)."""
    try:
        import mlflow
        from mlflow.tracking import _tracking_service
    except ImportError as e:
        raise missing(e, "mlflow") from None

    utils = _tracking_service.utils
    before = getattr(utils, "_tracking_uri", None)
    mlflow.set_tracking_uri(uri)
    try:
        yield mlflow
    finally:
        if before is None and hasattr(utils, "_tracking_uri"):
            utils._tracking_uri = None
        elif before is not None:
            mlflow.set_tracking_uri(before)


def to_mlflow(run_dir: str | os.PathLike[str], uri: str) -> Sent:
    """Write the labels of a traced run imported from traces as MLflow feedback assessments."""
    rd = Path(run_dir)
    items = scores(rd)
    with mlflow_tracking(uri) as mlflow:
        from mlflow.entities import AssessmentSource

        source = AssessmentSource(source_type="LLM_JUDGE", source_id=_SOURCE)
        done: set[str] = set()
        for s in items:
            tid = mlflow_trace_id(s.trace_id)
            try:
                if tid not in done:
                    _clear(mlflow, tid)
                    done.add(tid)
                mlflow.log_feedback(trace_id=tid, name=s.name, value=s.value if s.value is not None else s.status,
                                    source=source, rationale=s.comment,
                                    metadata={"question_id": s.question_id, "trek_version": __version__})
            except Exception as e:
                raise _one_line(uri, f"writing feedback to trace {tid} (question {s.question_id!r})", e) from None
    return Sent(len(items), _cases(items), "mlflow", _shown(uri))


def _clear(mlflow: Any, trace_id: str) -> None:
    """Delete the trektrace feedback an earlier export wrote on ``trace_id``."""
    trace = mlflow.get_trace(trace_id)
    if trace is None:
        raise LookupError(f"no trace {trace_id} on the server")
    for a in getattr(trace.info, "assessments", None) or []:
        src = getattr(a, "source", None)
        if str(a.name).startswith("trektrace.") and getattr(src, "source_id", None) == _SOURCE:
            mlflow.delete_assessment(trace_id=trace_id, assessment_id=a.assessment_id)


# -- OTLP/HTTP protobuf ----------------------------------------------------------------------------
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def otlp_protobuf(request: dict[str, Any]) -> bytes:
    """An OTLP/JSON ``ExportTraceServiceRequest`` (hex ids) as protobuf bytes with the same ids."""
    try:
        from google.protobuf import json_format
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError as e:
        raise missing(e, "otlp") from None

    req = copy.deepcopy(request)
    for rs in req.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for k in _ID_FIELDS:
                    if span.get(k):
                        span[k] = base64.b64encode(bytes.fromhex(span[k])).decode("ascii")
    return json_format.ParseDict(req, ExportTraceServiceRequest()).SerializeToString()


def _traces_url(url: str) -> str:
    parts = urlsplit(url)
    return url.rstrip("/") + "/v1/traces" if parts.path in ("", "/") else url


def to_otlp(run_dir: str | os.PathLike[str], url: str, *, headers: dict[str, str] | None = None,
            timeout: float = 30.0) -> Sent:
    """POST the labels' OTLP request as protobuf to a collector's OTLP/HTTP receiver."""
    import httpx

    rd = Path(run_dir)
    items = scores(rd)
    req = otlp_request(items, rd)
    body = otlp_protobuf(req)
    target = _traces_url(url)
    try:
        r = httpx.post(target, content=body, timeout=timeout,
                       headers={"Content-Type": "application/x-protobuf", **(headers or {})})
    except httpx.HTTPError as e:
        raise _one_line(target, "sending OTLP/HTTP protobuf", e) from None
    if r.status_code // 100 != 2:
        raise RuntimeError(f"{_shown(target)}: the collector answered HTTP {r.status_code}: "
                           f"{' '.join(r.text.split())[:200]}")
    return Sent(sum(len(s["events"]) for rs in req["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]),
                _cases(items), "otlp", _shown(target))


_SENDERS: dict[str, Callable[[str | os.PathLike[str], str], Sent]] = {
    "phoenix": to_phoenix, "mlflow": to_mlflow, "otlp": to_otlp}


def send_labels(run_dir: str | os.PathLike[str], destination: str, url: str) -> Sent:
    """Send the labels of a traced imported run to ``destination`` (one of :data:`DESTINATIONS`)."""
    if destination not in _SENDERS:
        raise ValueError(f"unknown destination {destination!r} (--to takes one of: {', '.join(DESTINATIONS)})")
    return _SENDERS[destination](run_dir, url)
