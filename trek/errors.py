"""Errors that decide whether a run goes on: one home, below every stage.

A stage (:mod:`trek.stage`) runs many independent items. When one item breaks, the item gets a
``failed`` record and the run goes on; when the error would break *every* item (a rejected
key, an unknown model, a wrong base URL, a parameter the server does not support, a search
backend without a key, a local model that cannot start) the run stops at once.
:func:`is_run_fatal` is that decision, in one place for every stage.

* :class:`RunFatalError` is the marker base class of errors that always stop a run
  (:class:`~trek.search.base.FatalSearchError`,
  :class:`~trek.local.LocalModelUnavailable`).
* :class:`FatalLLMError` is a request the endpoint rejected in a way no retry can fix. Whether
  it stops the run depends on what was rejected (see :func:`is_run_fatal`).
"""

from __future__ import annotations

import os
import re

__all__ = ["RunFatalError", "FatalLLMError", "RecordError", "error_status", "is_run_fatal"]


class RunFatalError(RuntimeError):
    """An error that dooms every item of a run: the stage stops instead of recording failures."""


class FatalLLMError(RuntimeError):
    """A request the endpoint rejected in a way no retry can fix (400, 401, 403, 404, 422).

    ``status_code`` is the HTTP status (``None`` for errors raised before a request, e.g. a
    budget without a price); ``api_message`` the endpoint's own error message and ``param``
    the parameter it names, when it names one (both scrubbed of the key). A caller can map an
    "Unsupported parameter" / "Unsupported value" 400 to the option that sets it.
    """

    def __init__(
        self, message: str, *, status_code: int | None = None, api_message: str | None = None,
        param: str | None = None,
    ):
        super().__init__(message)
        self.status_code = status_code
        self.api_message = api_message
        self.param = param


_RUN_FATAL_STATUS = (401, 403, 404)
_UNSUPPORTED = re.compile(
    r"unsupported[ _](parameter|value)|unrecognized request argument|unknown parameter|"
    r"does not support (the )?(parameter|tools|function)|tool.choice requires|tool-call-parser",
    re.IGNORECASE,
)


def error_status(exc: BaseException) -> int | None:
    """The HTTP status behind a :class:`FatalLLMError` (its ``status_code`` attribute when
    present, else the ``"<status> from <endpoint>"`` prefix of its message)."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status
    m = re.match(r"^(\d{3}) from ", str(exc))
    return int(m.group(1)) if m else None


def is_run_fatal(exc: BaseException) -> bool:
    """True for an error that dooms every item, so the run must stop.

    * any :class:`RunFatalError` (a search backend without a valid key, a local model that
      cannot start);
    * a :class:`FatalLLMError` with status 401, 403 or 404 (a rejected key, an unknown model or
      a wrong base URL), a 400 naming an unsupported parameter or a tool support the server
      lacks (every item sends the same request shape), or no status at all (raised before any
      request, e.g. a budget without a price).

    Other 400/422 replies (an over-long context, a refused input) fail one item only.
    """
    if isinstance(exc, RunFatalError):
        return True
    if not isinstance(exc, FatalLLMError):
        return False
    status = error_status(exc)
    if status is None or status in _RUN_FATAL_STATUS:
        return True
    return bool(_UNSUPPORTED.search(str(exc)))


class RecordError(ValueError):
    """A record file could not be read; the message names the file, line and field (also
    importable from :mod:`trek.types`, where the record readers are)."""

    def __init__(self, path: str | os.PathLike[str], line: int | None, message: str):
        self.path = str(path)
        self.line = line
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")
