"""Token usage from raw provider replies, and the price table that turns it into dollars."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from trek.types import Usage

__all__ = ["BATCH_PRICE_FACTOR", "Price", "PriceTable", "price_factor", "recorded_dollars", "usage_dollars", "usage_from_raw"]

#: OpenAI's Batch API bills input and output tokens at half price (24 h completion window).
BATCH_PRICE_FACTOR = 0.5


@dataclass(frozen=True)
class Price:
    """Dollars per one million tokens."""

    input: float
    output: float
    cached_input: float | None = None

    def cost(self, usage: Usage) -> float:
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        cached_rate = self.cached_input if self.cached_input is not None else self.input
        fresh_in = usage.prompt_tokens - cached
        # Reasoning tokens are part of completion_tokens on OpenAI-style usage blocks.
        return (fresh_in * self.input + cached * cached_rate + usage.completion_tokens * self.output) / 1e6


class PriceTable:
    """Per-model prices: the bundled ``trek/prices.json`` merged with an optional user file.

    Lookup is by exact model name, then by the longest listed name that prefixes the model
    (so ``gpt-4o-2024-08-06`` uses ``gpt-4o``). Unknown models get ``None``: tokens only.

    The entry ``"search"`` is not a model: it maps a search backend (``tavily``, ``openai``,
    ``duckduckgo``, ``local``, ``proxy``) to US dollars per search call (:meth:`search_fee`),
    as a number or as ``{"usd_per_call": ..., "source": ..., "date": ...}``. Fields other than
    the prices (``source``, ``date``, ``verified``, ``note``) document an entry and are not read.
    """

    def __init__(self, prices: dict[str, Price], search: dict[str, float] | None = None):
        self.prices = dict(prices)
        self.search = dict(search or {})

    def search_fee(self, backend: str | None) -> float | None:
        """Dollars per call of ``backend`` (``proxy:MODEL`` looks up ``proxy``); ``None`` when unlisted."""
        if not backend or backend == "none":
            return 0.0
        name = backend.split(":", 1)[0]
        return self.search.get(backend, self.search.get(name))

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> PriceTable:
        bundled = json.loads(resources.files("trek").joinpath("prices.json").read_text())
        table = _parse(bundled, "trek/prices.json")
        search = _parse_search(bundled, "trek/prices.json")
        user = path or os.environ.get("TREK_PRICES")
        if user:
            p = Path(user)
            from trek import jsonio
            from trek.types import RecordError

            try:
                data = jsonio.load_json(p, "price table (JSON)")
            except RecordError as e:
                raise ValueError(f"price table {e}") from None
            table.update(_parse(data, str(p)))
            search.update(_parse_search(data, str(p)))
        return cls(table, search)

    def get(self, model: str | None) -> Price | None:
        if not model:
            return None
        if model in self.prices:
            return self.prices[model]
        best = None
        for name in self.prices:
            if model.startswith(name) and (best is None or len(name) > len(best)):
                best = name
        return self.prices[best] if best else None

    def cost(self, model: str | None, usage: Usage) -> float | None:
        price = self.get(model)
        return None if price is None else price.cost(usage)


def _parse(data: Any, where: str) -> dict[str, Price]:
    if not isinstance(data, dict):
        raise ValueError(f"price table {where}: expected a JSON object of model -> prices")
    out: dict[str, Price] = {}
    for model, spec in data.items():
        if model.startswith("_") or model == "search":
            continue
        if not isinstance(spec, dict) or "input" not in spec or "output" not in spec:
            raise ValueError(f"price table {where}: model '{model}' needs numeric 'input' and 'output' fields")
        try:
            price = Price(
                input=float(spec["input"]),
                output=float(spec["output"]),
                cached_input=None if spec.get("cached_input") is None else float(spec["cached_input"]),
            )
        except (TypeError, ValueError):
            raise ValueError(f"price table {where}: model '{model}' has a non-numeric price") from None
        values = [price.input, price.output] + ([] if price.cached_input is None else [price.cached_input])
        if not all(math.isfinite(v) and v >= 0 for v in values):
            raise ValueError(f"price table {where}: model '{model}' needs finite, non-negative prices")
        out[model] = price
    return out


def _parse_search(data: Any, where: str) -> dict[str, float]:
    spec = data.get("search", {}) if isinstance(data, dict) else {}
    if not isinstance(spec, dict):
        raise ValueError(f"price table {where}: 'search' must map a search backend to dollars per call")
    out: dict[str, float] = {}
    for name, v in spec.items():
        if name.startswith("_"):
            continue
        if isinstance(v, dict):  # {"usd_per_call": 0.008, "source": ..., "date": ...}
            if "usd_per_call" not in v:
                raise ValueError(f"price table {where}: search backend '{name}' needs a 'usd_per_call' field")
            v = v["usd_per_call"]
        try:
            fee = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"price table {where}: search backend '{name}' has a non-numeric fee") from None
        if not math.isfinite(fee) or fee < 0:
            raise ValueError(f"price table {where}: search backend '{name}' needs a finite, non-negative fee")
        out[name] = fee
    return out


def _int(d: Any, *path: str) -> int:
    for p in path:
        if not isinstance(d, dict):
            return 0
        d = d.get(p)
    try:
        return int(d or 0)
    except (TypeError, ValueError):
        return 0


def usage_from_raw(raw: dict[str, Any]) -> Usage:
    """Read a Chat Completions or Responses API usage block into a :class:`Usage` (cost unset)."""
    u = raw.get("usage") if isinstance(raw, dict) else None
    if not isinstance(u, dict):
        return Usage(calls=1, cost_usd=None)
    responses = "input_tokens" in u or "output_tokens" in u  # the Responses API names them so
    inp, out = ("input_tokens", "output_tokens") if responses else ("prompt_tokens", "completion_tokens")
    return Usage(
        prompt_tokens=_int(u, inp),
        completion_tokens=_int(u, out),
        reasoning_tokens=_int(u, f"{out}_details", "reasoning_tokens"),
        cached_tokens=_int(u, f"{inp}_details", "cached_tokens"),
        calls=1,
    )


def price_factor(raw: Any) -> float | None:
    """The share of the table price a stored reply was billed at: ``0.5`` for a reply loaded
    from the Batch API (its ``"_trek": {"price_factor"}`` stamp), ``None`` for a live call."""
    stamp = raw.get("_trek") if isinstance(raw, dict) else None
    factor = stamp.get("price_factor") if isinstance(stamp, dict) else None
    return None if factor is None else float(factor)


def usage_dollars(
    prices: PriceTable, model: str | None, usage: Usage, factor: float | None = None
) -> float | None:
    """Dollars of one usage at ``model``'s table price times ``factor`` (the billed share,
    ``None`` = full price); ``None`` when the model has no price. The client prices every reply
    with it at run time; :func:`recorded_dollars` falls back to it for records without dollars."""
    cost = prices.cost(model, usage)
    if cost is None:
        return None
    return cost if factor is None else cost * factor


def recorded_dollars(usage: Usage, model: str | None, prices: PriceTable) -> float | None:
    """The dollars of a usage a record holds: the one cost rule of ``trek cost`` and Table 12.

    The dollars recorded with it at run time (``cost_usd``: the price then, a Batch API reply at
    its discounted share) when the record has them; else ``model``'s price in ``prices`` now
    (full price: a discount is not recorded apart from the dollars); ``None`` when neither is
    known. A record's usage without a ``cost_usd`` field must be read with ``cost_usd=None``.
    """
    if usage.cost_usd is not None:
        return float(usage.cost_usd)
    return usage_dollars(prices, model, usage)
