"""inspect models in Trek's model roles.

:class:`InspectModelClient` stands where a Trek :class:`~trek.llm.client.LLMClient` stands (a
grader, a TrekTrace judge or the evaluated model of the probes), so Trek's graders and TrekTrace
run unchanged inside inspect: each call goes to an inspect ``Model`` (``get_model(role=...)``),
through inspect's own retries, connection limits, cache and transcript. A call that fails after
inspect's retries comes back ``pending`` with its error, as Trek's own client does.

Sampling parameters Trek sends (``temperature``, ``max_tokens``/``max_completion_tokens``,
``seed``, ``top_p``, ``reasoning_effort``) become inspect's ``GenerateConfig``; others are left
out (a schema in ``response_format`` is the embedded model's constraint and is not needed here).
"""

from __future__ import annotations

from typing import Any

from trek.llm.client import LLMClient, LLMResult
from trek.trace.common import RoleModel
from trek.types import Usage

__all__ = ["InspectModelClient", "role_model", "inspect_model"]

_PARAMS = {"temperature": "temperature", "max_tokens": "max_tokens", "max_completion_tokens": "max_tokens",
           "seed": "seed", "top_p": "top_p", "reasoning_effort": "reasoning_effort"}


def _messages(body: dict[str, Any]) -> list[Any]:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    kinds = {"system": ChatMessageSystem, "developer": ChatMessageSystem, "user": ChatMessageUser,
             "assistant": ChatMessageAssistant}
    out = []
    for m in body.get("messages") or []:
        content = m.get("content")
        if not isinstance(content, str):
            content = "".join(str(p.get("text") or "") for p in content or [] if isinstance(p, dict))
        out.append(kinds.get(str(m.get("role")), ChatMessageUser)(content=content))
    return out


class InspectModelClient(LLMClient):
    """A Trek model client whose calls are an inspect ``Model``'s ``generate`` (module docstring)."""

    def __init__(self, model: Any, role: str | None = None):
        name = str(getattr(model, "name", None) or model)
        # the endpoint as records name it: inspect's model string (provider/model), no credentials
        super().__init__(name, base_url=f"inspect://{model}", api_key="inspect", progress=False, max_retries=0,
                         max_connections=64, role=role)
        self.inspect_model = model

    async def _call(self, api: str, model: str, body: dict[str, Any], sample: int) -> LLMResult:
        from inspect_ai.model import GenerateConfig

        if api != "chat":
            return LLMResult(status="pending", model=model, api=api,
                             error=f"an inspect model answers chat requests only (asked for {api})")
        config = {dst: body[src] for src, dst in _PARAMS.items() if body.get(src) is not None}
        try:
            out = await self.inspect_model.generate(_messages(body), config=GenerateConfig(**config))
        except Exception as e:  # noqa: BLE001 - a failed call is pending, as with Trek's own client
            return LLMResult(status="pending", model=model, api=api, error=f"{type(e).__name__}: {e}"[:500])
        if getattr(out, "error", None):
            return LLMResult(status="pending", model=model, api=api, error=str(out.error)[:500])
        u = out.usage
        usage = Usage(prompt_tokens=int(getattr(u, "input_tokens", 0) or 0),
                      completion_tokens=int(getattr(u, "output_tokens", 0) or 0), cost_usd=None)
        self.http_calls += 1
        raw = {"choices": [{"message": {"role": "assistant", "content": out.completion}}],
               "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens},
               "model": str(getattr(out, "model", None) or model)}
        self.usage = self.usage + usage.model_copy(update={"cost_usd": 0.0})
        return LLMResult(status="ok", model=model, raw=raw, usage=usage, api=api)


def inspect_model(role: str | None = None, *, fallback: tuple[str, ...] = ()) -> Any:
    """The inspect model bound to ``role`` (else to the first bound role of ``fallback``, else the
    evaluated model)."""
    from inspect_ai.model import get_model, model_roles

    bound = model_roles()
    for r in (role, *fallback):
        if r is not None and r in bound:
            return get_model(role=r)
    return get_model()


def role_model(role: str, model: Any) -> RoleModel:
    """A TrekTrace :class:`~trek.trace.common.RoleModel` played by an inspect model."""
    client = InspectModelClient(model, role=role)
    return RoleModel(role, client, client.model or "inspect")
