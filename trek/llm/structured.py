"""Ask for JSON, read it leniently, re-ask a capped number of times, or say ``unparsed``.

A reply that cannot be read is its own outcome: :class:`StructuredResult` with
``status="unparsed"`` carries every raw reply so that it can be counted, shown and reviewed.
It never turns into a default value.

An endpoint that constrains replies to a JSON schema (``LLMClient.json_schema_replies``: the
embedded llama.cpp model) is sent the schema of the expected reply as ``response_format``, so a
small model cannot wander off the shape; other endpoints get the prompt alone, as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from trek.llm.client import LLMClient, run_sync
from trek.types import Usage

__all__ = [
    "StructuredResult", "parse_json_lenient", "achat_json", "chat_json", "REASK_TEMPLATE",
    "object_schema", "json_reply_format",
]

REASK_TEMPLATE = (
    "I could not read your previous reply as the requested JSON ({error}). "
    "Send the answer again as one JSON value only, with no code fence and no other text."
)

#: Longest free-text field a schema-constrained reply may write (characters).
TEXT_MAX = 120
_FIELD_TYPES: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "text": {"type": "string", "maxLength": TEXT_MAX},
    "boolean": {"type": "boolean"},
    "integer": {"type": "integer"},
    "strings": {"type": "array", "items": {"type": "string", "maxLength": TEXT_MAX}},
    "integers": {"type": "array", "items": {"type": "integer"}},
}


def object_schema(fields: dict[str, str | dict[str, Any]]) -> dict[str, Any]:
    """A JSON schema for an object holding exactly ``fields``, all required, in that order.

    A field's type is a schema or one of ``string``, ``text`` (a string of at most
    :data:`TEXT_MAX` characters), ``boolean``, ``integer``, ``strings`` or ``integers`` (lists).
    """
    props = {}
    for name, kind in fields.items():
        if isinstance(kind, str) and kind not in _FIELD_TYPES:
            raise ValueError(f"field {name!r}: unknown type {kind!r} (use one of {', '.join(_FIELD_TYPES)} or a schema)")
        props[name] = _FIELD_TYPES[kind] if isinstance(kind, str) else kind
    return {"type": "object", "properties": props, "required": list(fields)}


def json_reply_format(schema: dict[str, Any]) -> dict[str, Any]:
    """The ``response_format`` that constrains a reply to ``schema``, in the ``json_object`` +
    ``schema`` form llama.cpp's server accepts (it rejects ``json_schema``)."""
    return {"type": "json_object", "schema": schema}


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def parse_json_lenient(text: str | None) -> Any:
    """Read the first JSON object or array in ``text``.

    Accepts code fences, leading or trailing prose, a JSON value embedded in a sentence, and raw
    control characters (a line break) inside strings, which small models write and which strict
    JSON forbids: read strictly, ``{"a": "x<newline>", "b": []}`` would yield the inner ``[]``.
    A reply that is one JSON value as a whole is read as that value even when a string in it
    quotes a code fence (a small model's answer may show "an example" of the JSON it writes).
    Raises ``ValueError`` with a short reason when nothing readable is there.
    """
    if text is None or not text.strip():
        raise ValueError("empty reply")
    # the whole reply first: a valid JSON value may quote a code fence inside one of its strings
    candidates = [text] + [m.group(1) for m in _FENCE.finditer(text)]
    decoder = json.JSONDecoder(strict=False)
    for cand in candidates:
        try:
            return decoder.decode(cand.strip())
        except json.JSONDecodeError:
            pass
    for cand in candidates[1:] + candidates[:1]:  # then a value embedded in a fence, else in prose
        s = cand.strip()
        for i, ch in enumerate(s):
            if ch in "{[":
                try:
                    value, _ = decoder.raw_decode(s, i)
                    return value
                except json.JSONDecodeError:
                    continue
    raise ValueError("no JSON object or array found")


@dataclass
class StructuredResult:
    """``ok`` with ``value``; ``unparsed`` with the raw replies; or ``pending`` (call failed)."""

    status: str
    value: Any = None
    raw_texts: list[str] = field(default_factory=list)
    attempts: int = 0
    error: str | None = None
    usage: Usage = field(default_factory=Usage)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


async def achat_json(
    client: LLMClient,
    messages: Sequence[dict[str, Any]],
    *,
    validate: Callable[[Any], Any] | None = None,
    max_reasks: int = 2,
    reask_template: str = REASK_TEMPLATE,
    schema: dict[str, Any] | None = None,
    **params: Any,
) -> StructuredResult:
    """Chat call expecting JSON.

    ``validate(value)`` may check or convert the parsed value and raise ``ValueError`` (or a
    pydantic ``ValidationError``) to trigger a re-ask. At most ``max_reasks`` follow-up calls
    are made; each is a new cached request (the conversation so far plus the re-ask).
    ``schema`` (see :func:`object_schema`) is sent as ``response_format`` to an endpoint that
    enforces schemas, unless ``params`` already set one.
    """
    if schema is not None and getattr(client, "json_schema_replies", False) and "response_format" not in params:
        params = {**params, "response_format": json_reply_format(schema)}
    convo = list(messages)
    raws: list[str] = []
    usage = Usage()
    last_error = ""
    for attempt in range(max_reasks + 1):
        res = await client.achat(convo, **params)
        usage = usage + res.usage.model_copy(update={"cost_usd": res.usage.cost_usd or 0.0})
        if not res.ok:
            return StructuredResult("pending", raw_texts=raws, attempts=attempt + 1, error=res.error, usage=usage)
        text = res.content or ""
        raws.append(text)
        try:
            value = parse_json_lenient(text)
            if validate is not None:
                value = validate(value)
            return StructuredResult("ok", value=value, raw_texts=raws, attempts=attempt + 1, usage=usage)
        except Exception as e:  # noqa: BLE001 - any validation failure leads to a re-ask
            last_error = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        convo = convo + [
            {"role": "assistant", "content": text},
            {"role": "user", "content": reask_template.format(error=last_error)},
        ]
    return StructuredResult("unparsed", raw_texts=raws, attempts=max_reasks + 1, error=last_error, usage=usage)


def chat_json(client: LLMClient, messages: Sequence[dict[str, Any]], **kw: Any) -> StructuredResult:
    """Synchronous :func:`achat_json`."""
    return run_sync(client._closing(achat_json(client, messages, **kw)))
