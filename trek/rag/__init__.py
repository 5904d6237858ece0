"""TrekBench-Ctrl baselines (paper §4.3, D.6): Direct, Rerank, Filter and Structured.

Every method reads only the documents of a frozen context (no retrieval, no training) and
returns a :class:`~trek.rag.answer.MethodOutput` whose ``details`` say why it answered as it did.
``trek ctrl run`` (:mod:`trek.rag.runner`) runs a grid of (method, condition) over a
``contexts.jsonl`` into standard run directories. Gold-only is Direct on the ``GOLD`` condition.
"""

from __future__ import annotations

from typing import Any

from trek.rag.direct import Direct
from trek.rag.filter import Filter
from trek.rag.rerank import Rerank
from trek.rag.structured import Structured

__all__ = ["METHODS", "Method", "make_method", "Direct", "Rerank", "Filter", "Structured"]

#: name -> class; ``calls`` on each is the number of model calls per question (re-asks aside).
METHODS: dict[str, Any] = {"direct": Direct, "rerank": Rerank, "filter": Filter, "structured": Structured}

Method = Direct | Rerank | Filter | Structured


def make_method(name: str, **settings: Any) -> Method:
    """A method by name with its settings (unknown settings raise ``TypeError``)."""
    try:
        cls = METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; choose from {', '.join(METHODS)}") from None
    return cls(**settings)
