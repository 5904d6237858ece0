"""What the TrekTrace judge and probe modules share: model roles, one JSON call, page rendering.

* :class:`RoleModel` is one of the three roles of appendix C.1 (the diagnostic judge, the
  analysis judge, the evaluated model): an :class:`~trek.llm.client.LLMClient` (endpoint and
  cache), the model name and the sampling parameters sent with every call of that role.
* :func:`ask` renders a named template, asks for JSON through
  :func:`~trek.llm.structured.achat_json` (re-asking a capped number of times) and returns the
  :class:`~trek.trace.records.Step`: ``ok`` with the validated value, ``unknown`` when the reply
  stayed unreadable, ``pending`` when the call failed (or the budget is used up).
* :func:`render_pages` shows pages to a model as in appendix C.5: index, URL (title, date) and
  head-truncated text, 50,000 characters for gold pages and 3,500 for the others, and an
  explicit placeholder for a page that is not available.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from trek.llm.client import LLMClient
from trek.llm.structured import achat_json
from trek.pages import GOLD_CHARS, NON_GOLD_CHARS, Page, PageStore, normalize_url
from trek.templates import render, template_version
from trek.trace.records import Step

__all__ = [
    "RoleModel",
    "Budget",
    "ask",
    "as_bool",
    "as_text",
    "as_urls",
    "flag_and_reason",
    "render_pages",
    "fetch_pages",
    "PAGE_SEPARATOR",
    "NOT_GIVEN",
    "JUDGE_CASE",
    "REPLY_JSON",
]

PAGE_SEPARATOR = "\n\n-----\n\n"
NOT_GIVEN = "not given"
#: How a case is shown to a judge (the evaluated model's probes never get the references).
JUDGE_CASE = "Question: {question}\nEffective year: {effective_year}\nReference answer(s): {answers}\n"
#: The line before the JSON shape every TrekTrace prompt asks for.
REPLY_JSON = "Reply with one JSON object and nothing else:\n"


@dataclass
class RoleModel:
    """One model role: its client (endpoint, cache), model name and sampling parameters."""

    role: str
    client: LLMClient
    model: str
    params: dict[str, Any] = field(default_factory=dict)
    max_reasks: int = 2

    @property
    def endpoint(self) -> str:
        return self.client.base_url

    def describe(self) -> str:
        return f"{self.model} @ {self.endpoint}"

    async def aclose(self) -> None:
        """Close the role's client (a client shared by several roles can be closed more than once)."""
        await self.client.aclose()


@dataclass
class Budget:
    """A soft cap on dollars spent on fresh calls by all role clients together.

    Once the clients' spending reaches ``usd`` no new step is started; the case is left pending.
    """

    usd: float | None
    clients: Sequence[LLMClient] = ()
    start: float = 0.0

    def __post_init__(self) -> None:
        self.start = self.spent_total()

    def spent_total(self) -> float:
        seen: dict[int, LLMClient] = {id(c): c for c in self.clients}
        return sum(c.spent_usd for c in seen.values())

    @property
    def spent(self) -> float:
        return self.spent_total() - self.start

    def exhausted(self) -> bool:
        return self.usd is not None and self.spent >= self.usd


def as_bool(value: Any, name: str) -> bool:
    """A JSON boolean (also ``"true"``/``"false"``/``"yes"``/``"no"``); anything else is unreadable."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "no"):
        return False
    raise ValueError(f"field {name!r} must be true or false, got {value!r}")


def as_text(value: Any, name: str, *, required: bool = False) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise ValueError(f"field {name!r} must be a string, got {type(value).__name__}")
    text = str(value).strip()
    if required and not text:
        raise ValueError(f"field {name!r} is empty")
    return text


def as_urls(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(u, str) for u in value):
        raise ValueError(f"field {name!r} must be a list of URLs")
    return [u.strip() for u in value if u.strip()]


def flag_and_reason(value: dict[str, Any], name: str) -> dict[str, Any]:
    """``{name: bool, "reason": str}`` from a judge's JSON reply (``name`` must be present)."""
    if name not in value:
        raise ValueError(f"field {name!r} is missing")
    return {name: as_bool(value[name], name), "reason": as_text(value.get("reason"), "reason")}


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    return value


async def ask(
    who: RoleModel,
    step: str,
    template: str,
    default: str,
    version: str,
    fields: dict[str, Any],
    validate: Callable[[dict[str, Any]], dict[str, Any]],
    budget: Budget | None = None,
    schema: dict[str, Any] | None = None,
) -> Step:
    """One structured call of ``who`` with template ``template`` (see the module docstring);
    ``schema`` is the reply's JSON schema, sent to endpoints that enforce one."""
    common = {
        "name": step,
        "role": who.role,
        "model": who.model,
        "endpoint": who.endpoint,
        "template": template,
        "version": template_version(template, default, version),
    }
    if budget is not None and budget.exhausted():
        return Step(status="pending", error=f"budget of ${budget.usd:.2f} used up; raise it and run again",
                    **common)
    prompt = render(template, default, **fields)
    res = await achat_json(
        who.client,
        [{"role": "user", "content": prompt}],
        validate=lambda v: validate(_object(v)),
        max_reasks=who.max_reasks,
        schema=schema,
        model=who.model,
        **who.params,
    )
    status = {"ok": "ok", "unparsed": "unknown"}.get(res.status, "pending")
    return Step(
        status=status,
        value=res.value if res.ok else {},
        raw=list(res.raw_texts),
        error=res.error,
        usage=res.usage,
        **common,
    )


async def fetch_pages(store: PageStore, urls: Iterable[str]) -> list[Page]:
    """The pages of ``urls`` from the store (fetched when the store fetches; else placeholders)."""
    return [await store.aget(u) for u in urls]


def render_pages(pages: Sequence[Page], gold_keys: Iterable[str] = (), *, gold_chars: int = GOLD_CHARS,
                 other_chars: int = NON_GOLD_CHARS) -> str:
    """Pages as shown to a model: ``[i]`` then URL, title, date and head-truncated text.

    A page whose URL identity is in ``gold_keys`` keeps its first ``gold_chars`` characters
    (default 50,000), any other page its first ``other_chars`` (default 3,500); an unavailable
    page is shown as its placeholder. ``(none)`` when there are no pages.
    """
    gold = set(gold_keys)
    parts = []
    for i, p in enumerate(pages, start=1):
        limit = gold_chars if normalize_url(p.url) in gold else other_chars
        parts.append(f"[{i}] " + p.render(limit))
    return PAGE_SEPARATOR.join(parts) if parts else "(none)"
