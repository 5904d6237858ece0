"""Typed fields of imported records: every number, id and link a log hands to an importer goes
through one of these readers, checked by pydantic, so a log field that does not fit is refused
with its name (never ``int()``-ed, truncated or ``str()``-ed into something else).

* :func:`count`: a usage count (tokens, calls) or an epoch — a non-negative finite whole
  number of at most :data:`MAX_COUNT`; ``true``, ``12.7``, ``-3``, ``"many"``, ``"1e400"``,
  ``[1]``, ``Infinity`` and ``10**40`` are refused (``12.0`` is 12);
* :func:`ident`: an id (a sample's, a response's) — a string or an integer, nothing else;
* :func:`texts`: a list of strings (answers, gold URLs), never a structure turned into text;
* :func:`link_kind`: what a log's link is — an ``http(s)`` URL (a link and a page key), a bare
  document id (kept as an id, never a page key), or ``bad`` (another scheme such as
  ``javascript:`` or ``file:``, a ``..`` path, control characters, longer than
  :data:`MAX_URL`): dropped, with a coverage note.

A failed check raises :class:`FieldError`; the import names the file and the record.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, TypeAdapter, ValidationError

__all__ = ["FieldError", "count", "ident", "model_name", "texts", "link_kind", "MAX_URL", "MAX_COUNT"]

#: Longest link kept from a log (characters).
MAX_URL = 2048
#: Largest count a log may give (2**53 - 1, the largest whole number every JSON reader keeps
#: exactly); a larger one is a broken or hostile field, not a usage.
MAX_COUNT = 2**53 - 1

_COUNT = TypeAdapter(Annotated[int, Field(ge=0)])
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_CONTROL = re.compile(r"[\x00-\x20\x7f]")


class FieldError(ValueError):
    """A field of an imported record that does not fit its type; the message names the field."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"field '{field}': {message}")


def _show(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**60:
        return f"a number of about {int(value.bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_DIGITS = re.compile(r"^[0-9]{1,20}$")


def count(value: Any, field: str, *, minimum: int = 0, digits: bool = False) -> int:
    """``value`` as a count (``None`` is 0): see the module doc. ``digits``: a string of decimal
    digits is the number it writes (OTLP/JSON writes 64-bit integers as strings, Langfuse keeps
    span attributes as text); any other string (``"1e400"``, ``"12.7"``, ``"-5"``, ``"nan"``) is
    still refused."""
    if value is None:
        return 0
    if digits and isinstance(value, str) and _DIGITS.match(value.strip()):
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FieldError(field, f"expected a non-negative whole number, got {_show(value)}")
    try:
        n = _COUNT.validate_python(value)
    except ValidationError:
        raise FieldError(field, f"expected a non-negative whole number, got {_show(value)}") from None
    if n < minimum:
        raise FieldError(field, f"expected a whole number of at least {minimum}, got {_show(value)}")
    if n > MAX_COUNT:
        raise FieldError(field, f"expected a whole number of at most {MAX_COUNT:,}, got {_show(value)}")
    return n


def ident(value: Any, field: str, *, required: bool = True) -> str | None:
    """``value`` as an id: a non-empty string or an integer (``None`` when not ``required``)."""
    if value is None and not required:
        return None
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise FieldError(field, f"expected a string or an integer id, got {_show(value)}")


def model_name(value: Any, field: str) -> str | None:
    """An optional text field (a model name): a string or nothing, never a structure."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        return value
    raise FieldError(field, f"expected a text, got {_show(value)}")


def texts(value: Any, field: str) -> list[str]:
    """A list of strings (blank ones dropped); a string, number or structure among them is refused
    unless it is a string or a number."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise FieldError(field, f"expected a list of strings, got {_show(value)}")
    out = []
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise FieldError(f"{field}[{i}]", f"expected a string, got {_show(v)}")
        if str(v).strip():
            out.append(str(v).strip())
    return out


def link_kind(value: Any) -> Literal["http", "id", "bad"]:
    """What a log's link is (see the module doc)."""
    if not isinstance(value, str) or not value or len(value) > MAX_URL or _CONTROL.search(value):
        return "bad"
    if _SCHEME.match(value):
        try:
            parts = urlsplit(value)
        except ValueError:
            return "bad"
        return "http" if parts.scheme.lower() in ("http", "https") and parts.netloc else "bad"
    if value.startswith(("/", ".", "~")) or ".." in value.split("/") or "\\" in value:
        return "bad"
    return "id"
