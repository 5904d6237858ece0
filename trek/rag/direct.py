"""Direct generation (paper §4.3, D.6): the shared answer prompt over every document of the context.

One model call per question. Gold-only is this method on the ``GOLD`` condition.
"""

from __future__ import annotations

from typing import Any

from trek.contexts import Context
from trek.llm.client import LLMClient
from trek.rag.answer import MethodOutput, aanswer, answer_version
from trek.types import Question

__all__ = ["VERSION", "Direct"]

VERSION = "rag.direct/1"


class Direct:
    """Answer from all supplied documents, exactly as rendered in the context."""

    name = "direct"
    calls = 1  # model calls per question

    def config(self) -> dict[str, Any]:
        return {"method": self.name, "version": VERSION}

    def versions(self) -> dict[str, str]:
        return {"rag.direct": VERSION, "rag.answer": answer_version()}

    async def arun(self, q: Question, ctx: Context, client: LLMClient, params: dict[str, Any]) -> MethodOutput:
        out = MethodOutput(details={"documents": len(ctx.documents)})
        return await aanswer(client, q, ctx.rendered, out, params)
