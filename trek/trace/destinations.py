"""TrekTrace's labels sent to where the traces live (``trek trace export RUN --to DEST URL``).

The scores are those of :func:`trek.trace.export.scores` (one per label whose side of C.4 ran,
value 1 or 0, and one ``trektrace.status``), written with each destination's own client:

* ``phoenix``: one span annotation per score on the trace's root span
  (``client.spans.log_span_annotations``): ``name`` ``trektrace.<label>``, ``annotator_kind``
  ``LLM``, ``result`` ``{score: 1|0, label: yes|no, explanation: why}`` (the status:
  ``{label: done|incomplete|pending|failed, explanation}``), ``metadata`` the question id and
  Trek's version. Phoenix keys an annotation by span, name and identifier, so sending again
  updates instead of adding; a label a case has no score for now is sent as ``not tested``
  (:func:`phoenix_untested`), so no value of an earlier export stays beside the current ones;
* ``mlflow``: one feedback assessment per score on the trace ``tr-<trace id>``
  (``mlflow.log_feedback``, source ``LLM_JUDGE`` ``trektrace``, value 1/0 or the status,
  ``rationale`` why). Earlier ``trektrace.*`` feedback of source ``trektrace`` on the trace is
  deleted first, so sending again replaces;
* ``otlp``: the OTLP request of :func:`trek.trace.export.otlp_request` (a ``trektrace`` span in
  each imported trace with its ``gen_ai.evaluation.result`` events) as OTLP/HTTP protobuf
  (``POST URL``, ``/v1/traces`` added when URL has no path), ids as bytes.

Every conversation with a server (these exports and ``trek import phoenix|mlflow``) runs under a
:class:`Deadline`, not only per-read timeouts: a server that sends its headers and then a byte a
second, or that always offers another page, ends with one line once :func:`server_deadline`
seconds have passed (``TREK_SERVER_DEADLINE``, default 300), and a line on standard error says
every 10 s what is being waited for. The httpx clients (Phoenix, OTLP) go through
:class:`DeadlineTransport`, which also refuses a redirect to another host; MLflow's client
(``requests``, with its own retries, capped at :data:`MLFLOW_RETRIES`) runs under
:func:`call_within`, with redirects to another host refused by :func:`mlflow_tracking`. Two
exports of one run to one destination at once are refused (a lock in the run folder), so they
cannot write the same labels twice.

Ids in the two OTLP encodings: OTLP/JSON (``trek trace export --format otlp``) writes trace and
span ids as hex, as the specification says; protobuf's own JSON mapping (Python's
``json_format``) reads every ``bytes`` field as base64 and would silently get other ids from
hex. :func:`otlp_protobuf` therefore builds the message from the ids' bytes, and the OTLP
importer reads ids in either encoding.
"""

from __future__ import annotations

import base64
import copy
import json
import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from trek import __version__
from trek.trace.export import Score, otlp_request, scores

__all__ = ["DESTINATIONS", "Deadline", "DeadlineExceeded", "DeadlineTransport", "call_within", "server_deadline",
           "deadline_client", "MLFLOW_RETRIES", "MissingExtra", "Sent", "missing", "mlflow_trace_id", "mlflow_tracking", "phoenix_client_module", "otlp_protobuf", "send_labels", "to_mlflow", "to_otlp", "to_phoenix"]

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
    #: Phoenix: labels a case has no score for now, sent as ``not tested`` over an earlier value.
    untested: int = 0

    def describe(self) -> str:
        what = {"phoenix": "span annotation(s)", "mlflow": "feedback assessment(s)",
                "otlp": "evaluation event(s)"}[self.destination]
        more = (f"; {self.untested} label(s) of no current test marked 'not tested' over any earlier value"
                if self.untested else "")
        return f"sent {self.scores} {what} of {self.cases} traced case(s) to {self.destination} at {self.url}{more}"


def _shown(url: str) -> str:
    from trek.llm.client import endpoint_identity

    return endpoint_identity(url)


def _one_line(url: str, what: str, exc: BaseException) -> RuntimeError:
    """One line for a failed call to ``url``, without the URL's credentials."""
    from trek.llm.client import scrub, url_secrets

    text = scrub(" ".join(str(exc).split()) or type(exc).__name__, url_secrets(url))
    return RuntimeError(f"{_shown(url)}: {what}: {type(exc).__name__}: {text[:300]}")


# -- deadlines -------------------------------------------------------------------------------------
#: Seconds a whole conversation with a trace server may take unless TREK_SERVER_DEADLINE says.
SERVER_DEADLINE = 300.0
#: Retries MLflow's client makes of a failed request (its own default, 7 with a growing backoff,
#: keeps a command silent for many minutes against a failing server).
MLFLOW_RETRIES = 2
#: Seconds between the lines that say a command is still waiting for a server.
PROGRESS_EVERY = 10.0


class DeadlineExceeded(RuntimeError):
    """A server conversation took longer than its deadline."""


def server_deadline() -> float:
    """The deadline of a server conversation in seconds: ``TREK_SERVER_DEADLINE`` (a positive
    number) or :data:`SERVER_DEADLINE`."""
    raw = os.environ.get("TREK_SERVER_DEADLINE", "").strip()
    if not raw:
        return SERVER_DEADLINE
    try:
        v = float(raw)
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"TREK_SERVER_DEADLINE={raw!r}: give a positive number of seconds")
    return v


class Deadline:
    """The end of one conversation with the server at ``url`` (``what`` names it in messages)."""

    def __init__(self, url: str, what: str, seconds: float | None = None):
        self.url, self.what = url, what
        self.seconds = server_deadline() if seconds is None else seconds
        self.start = time.monotonic()
        self.end = self.start + self.seconds
        self._said = self.start

    def left(self) -> float:
        return self.end - time.monotonic()

    def exceeded(self) -> DeadlineExceeded:
        """The error of a conversation that ran past this deadline."""
        return DeadlineExceeded(f"{_shown(self.url)}: {self.what}: the server did not finish within "
                                f"{self.seconds:g} s (a deadline for the whole conversation; TREK_SERVER_DEADLINE "
                                "sets it)")

    def check(self) -> None:
        """Raise :class:`DeadlineExceeded` once the deadline has passed; else say, every
        :data:`PROGRESS_EVERY` seconds, that the command is still waiting."""
        now = time.monotonic()
        if now >= self.end:
            raise self.exceeded()
        if now - self._said >= PROGRESS_EVERY:
            self._said = now
            print(f"... still waiting for {_shown(self.url)} ({self.what}): {now - self.start:.0f} s of "
                  f"{self.seconds:g} s", file=sys.stderr, flush=True)


def _origin(url: Any) -> tuple[str, str, int | None]:
    import httpx

    u = httpx.URL(str(url))
    return (u.scheme, u.host, u.port)


class DeadlineTransport:
    """An httpx transport around ``inner`` that keeps every request and every byte of every
    answer within ``deadline`` (each timeout cut to what is left, the answer's body checked as
    it arrives) and refuses a redirect to another host (scheme, host or port)."""

    def __init__(self, inner: Any, deadline: Deadline):
        self.inner, self.deadline = inner, deadline

    def handle_request(self, request: Any) -> Any:
        import httpx

        self.deadline.check()
        left = max(0.001, self.deadline.left())
        timeout = dict(request.extensions.get("timeout") or {})
        request.extensions["timeout"] = {k: min(timeout.get(k) or left, left)
                                         for k in ("connect", "read", "write", "pool")}
        # a timeout cut to what was left of the deadline fires at the deadline itself: said as the
        # deadline (a loaded machine could otherwise show the client's own timeout error first)
        cut = any((timeout.get(k) or left) >= left for k in ("connect", "read", "write", "pool"))
        try:
            response = self.inner.handle_request(request)
        except httpx.TimeoutException:
            if cut or self.deadline.left() <= 0:
                raise self.deadline.exceeded() from None
            raise
        location = response.headers.get("location")
        if response.is_redirect and location:
            target = request.url.join(location)
            if _origin(target) != _origin(request.url):
                response.close()
                raise httpx.UnsupportedProtocol(f"refused a redirect to another host ({_shown(str(target))}): "
                                                "give the server's own URL")
        response.stream = _DeadlineStream(response.stream, self.deadline, cut)
        return response

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> DeadlineTransport:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _DeadlineStream(httpx.SyncByteStream):
    """An answer's body, checked against the deadline after every chunk."""

    def __init__(self, inner: Any, deadline: Deadline, cut: bool = False):
        self.inner, self.deadline, self.cut = inner, deadline, cut

    def __iter__(self) -> Iterator[bytes]:
        import httpx

        chunks = iter(self.inner)
        while True:
            try:
                chunk = next(chunks)
            except StopIteration:
                return
            except httpx.TimeoutException:
                # a read timeout cut to the deadline's remainder when the request began ends past it
                if self.cut or self.deadline.left() <= 0:
                    raise self.deadline.exceeded() from None
                raise
            self.deadline.check()
            yield chunk

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


def deadline_client(url: str, deadline: Deadline, *, headers: Any = None, timeout: Any = 30.0) -> Any:
    """An ``httpx.Client`` for ``url`` whose every request runs under ``deadline``
    (:class:`DeadlineTransport`); redirects are not followed."""
    import httpx

    transport = DeadlineTransport(httpx.HTTPTransport(), deadline)
    return httpx.Client(base_url=url, headers=headers, timeout=timeout, transport=transport,  # type: ignore[arg-type]
                        follow_redirects=False)


def call_within(deadline: Deadline, fn: Callable[[], Any]) -> Any:
    """``fn()`` in a worker thread, waited for until ``deadline`` (saying every
    :data:`PROGRESS_EVERY` seconds that it waits): for a client whose reads cannot be cut short
    (MLflow's). Past the deadline :class:`DeadlineExceeded` is raised and the worker is left to
    end on its own (a daemon thread: it never keeps the process alive)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = e

    worker = threading.Thread(target=run, name="trek-server-call", daemon=True)
    worker.start()
    while True:
        worker.join(max(0.01, min(1.0, PROGRESS_EVERY / 2, deadline.left())))
        if not worker.is_alive():
            break
        deadline.check()
    if "error" in box:
        raise box["error"]
    return box.get("value")


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


def phoenix_client(url: str, deadline: Deadline) -> Any:
    """Phoenix's client for the server at ``url`` whose requests run under ``deadline`` (with the
    headers and timeouts the client would use by itself, e.g. from ``PHOENIX_API_KEY``)."""
    mod = phoenix_client_module()
    base = url.rstrip("/")
    plain = getattr(mod.Client(base_url=base), "_client", None)
    headers = getattr(plain, "headers", None)
    timeout = getattr(plain, "timeout", 30.0)
    if plain is not None:
        plain.close()
    return mod.Client(base_url=base, http_client=deadline_client(base, deadline, headers=headers, timeout=timeout))


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
                    "metadata": {"question_id": s.question_id, "trek_version": __version__, **(s.details or {})},
                    "identifier": ""})
    return out


def phoenix_untested(items: list[Score], run_dir: Path) -> list[dict[str, Any]]:
    """For each case of ``items``, an annotation ``not tested`` (no score) of every TrekTrace label
    it has no score for now: Phoenix keeps one annotation per span and name and its client
    deletes none, so this replaces what an earlier export wrote under that name (a label whose
    side of C.4 ran then, and not now) instead of leaving it beside the current ones. A run with a
    ``verify.jsonl`` does the same for the verification scores (an experiment whose record is
    stale now, or that the case's labels no longer call for)."""
    from trek.trace.export import VERIFY_SCORE_NAMES, score_name
    from trek.trace.labels import LABELS
    from trek.trace.verified import has_verify

    extra = VERIFY_SCORE_NAMES if has_verify(run_dir) else ()

    have: dict[str, set[str]] = {}
    first: dict[str, Score] = {}
    status: dict[str, str] = {}
    for s in items:
        have.setdefault(s.trace_id, set()).add(s.name)
        first.setdefault(s.trace_id, s)
        if s.status is not None:
            status[s.trace_id] = s.status
    out = []
    for tid, names in have.items():
        s = first[tid]
        for label in LABELS:
            name = score_name(label)
            if name not in names:
                out.append({"name": name, "span_id": _root(s, run_dir), "annotator_kind": "LLM",
                            "result": {"label": "not tested", "explanation": f"{label} was not tested in the "
                                       f"current trace of this case (status {status.get(tid, 'unknown')})"},
                            "metadata": {"question_id": s.question_id, "trek_version": __version__},
                            "identifier": ""})
        for name in extra:
            if name not in names:
                out.append({"name": name, "span_id": _root(s, run_dir), "annotator_kind": "LLM",
                            "result": {"label": "not tested", "explanation": "trek trace verify has no current "
                                       "record of this experiment for this case's labels"},
                            "metadata": {"question_id": s.question_id, "trek_version": __version__},
                            "identifier": ""})
    return out


def to_phoenix(run_dir: str | os.PathLike[str], url: str) -> Sent:
    """Write the labels of a traced run imported from traces as span annotations on Phoenix
    (and ``not tested`` over the labels a case has no score for now, :func:`phoenix_untested`)."""
    rd = Path(run_dir)
    items = scores(rd)
    rows = phoenix_annotations(items, rd)
    untested = phoenix_untested(items, rd)
    client = phoenix_client(url, Deadline(url, "writing span annotations"))
    every = rows + untested
    try:
        for i in range(0, len(every), 100):
            client.spans.log_span_annotations(span_annotations=every[i:i + 100], sync=True)
    except Exception as e:  # the client's httpx errors
        raise _one_line(url, "writing span annotations", e) from None
    return Sent(len(rows), _cases(items), "phoenix", _shown(url), len(untested))


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
    env = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": str(MLFLOW_RETRIES), "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
           "MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, min(120, int(server_deadline()))))}
    saved = {k: os.environ.get(k) for k in env}
    for k, v in env.items():
        if saved[k] is None:  # the user's own setting wins
            os.environ[k] = v
    mlflow.set_tracking_uri(uri)
    try:
        with _same_host_redirects():
            yield mlflow
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
        if before is None and hasattr(utils, "_tracking_uri"):
            utils._tracking_uri = None
        elif before is not None:
            mlflow.set_tracking_uri(before)


@contextmanager
def _same_host_redirects() -> Iterator[None]:
    """Inside the block, ``requests`` (MLflow's HTTP client) refuses a redirect to another host
    instead of following it there."""
    import requests
    from requests.sessions import SessionRedirectMixin

    class RedirectRefused(requests.exceptions.RequestException):
        """A redirect to another host, not followed."""

    original = SessionRedirectMixin.get_redirect_target

    def guarded(self: Any, resp: Any) -> Any:
        target = original(self, resp)
        if target:
            there = urlsplit(requests.compat.urljoin(resp.url, target))
            here = urlsplit(resp.url)
            if (there.scheme, there.hostname, there.port) != (here.scheme, here.hostname, here.port):
                raise RedirectRefused(f"refused a redirect to another host ({_shown(there.geturl())}): give the "
                                      "server's own URL")
        return target

    SessionRedirectMixin.get_redirect_target = guarded  # type: ignore[method-assign]
    try:
        yield
    finally:
        SessionRedirectMixin.get_redirect_target = original  # type: ignore[method-assign]


def to_mlflow(run_dir: str | os.PathLike[str], uri: str) -> Sent:
    """Write the labels of a traced run imported from traces as MLflow feedback assessments."""
    rd = Path(run_dir)
    items = scores(rd)
    deadline = Deadline(uri, "writing feedback assessments")
    with mlflow_tracking(uri) as mlflow:
        from mlflow.entities import AssessmentSource

        source = AssessmentSource(source_type="LLM_JUDGE", source_id=_SOURCE)

        def send() -> None:
            done: set[str] = set()
            for s in items:
                tid = mlflow_trace_id(s.trace_id)
                try:
                    if tid not in done:
                        _clear(mlflow, tid)
                        done.add(tid)
                    mlflow.log_feedback(trace_id=tid, name=s.name,
                                        value=s.value if s.value is not None else s.status, source=source,
                                        rationale=s.comment,
                                        metadata={"question_id": s.question_id, "trek_version": __version__,
                                                  **_string_details(s)})
                except Exception as e:
                    raise _one_line(uri, f"writing feedback to trace {tid} (question {s.question_id!r})", e) from None

        try:
            call_within(deadline, send)
        except DeadlineExceeded as e:
            raise RuntimeError(str(e)) from None
    return Sent(len(items), _cases(items), "mlflow", _shown(uri))


def _string_details(s: Score) -> dict[str, str]:
    """A verification's details as MLflow assessment metadata (string values: JSON for lists
    and other values)."""
    return {k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in (s.details or {}).items()}


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
        with deadline_client(target, Deadline(target, "sending OTLP/HTTP protobuf"), timeout=timeout) as client:
            r = client.post(target, content=body, headers={"Content-Type": "application/x-protobuf", **(headers or {})})
            r.read()
    except (httpx.HTTPError, DeadlineExceeded) as e:
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
    from contextlib import ExitStack

    from trek.errors import RecordError
    from trek.runs import RunDir

    with ExitStack() as held:
        # one export of a run to a destination at a time: two at once would each write every label
        try:
            held.enter_context(RunDir(run_dir).output_lock(
                f"export-{destination}", hint=f"another export of this run to {destination} is under way; wait for it"))
        except RecordError:
            pass  # a run folder nobody can write to (read-only): no lock file, and no second writer of it either
        return _SENDERS[destination](run_dir, url)
