"""``proxy:MODEL``: model-mediated search (paper appendix B.3).

Many built-in search tools cannot be called directly. Here another model (the proxy) runs its own
web search for the requesting model and returns only a JSON list of results
``{url, title, snippet, date}``: no answer and no reasoning, so the requesting model alone
interprets the evidence. The reply is read with :func:`trek.llm.structured.achat_json` (lenient
JSON parsing, a capped number of re-asks); a reply that stays unreadable, or a proxy call that
fails, makes the search unavailable (the question is then pending).

``api="chat"`` (default) uses Chat Completions with ``web_search_options`` (OpenAI's search models
and compatible servers); ``api="responses"`` uses the Responses API with the hosted
``web_search`` tool (e.g. a GPT-5 model), with the same prompt, parser and re-asks.
"""

from __future__ import annotations

from typing import Any

from trek.llm.client import LLMClient
from trek.llm.structured import REASK_TEMPLATE, StructuredResult, achat_json, parse_json_lenient
from trek.search.base import SearchBackend, SearchUnavailable
from trek.templates import register, render, template_version
from trek.types import SearchResult, Usage

__all__ = ["ProxySearch", "PROXY_PROMPT", "PROXY_VERSION", "validate_results"]

PROXY_VERSION = "proxy-1"
PROXY_PROMPT = register(
    "search.proxy",
    """\
You are a web search service working for another AI system. Run a web search for the query \
below with your search tool and report what the search returned.

Rules:
- Do not answer the query, do not summarise, and do not explain your reasoning.
- Reply with one JSON array and nothing else: at most {k} objects, most relevant first.
- Each object has exactly these keys: "url" (the page address as returned by the search), \
"title" (the page title), "snippet" (a short excerpt copied from the page or the search result) \
and "date" (the page's publication or last-update date as YYYY-MM-DD, or null when unknown).
- If the search returns nothing useful, reply with [].

Query: {query}""",
)


def validate_results(value: Any, k: int) -> list[SearchResult]:
    """Check a proxy reply and turn it into results; raise ``ValueError`` to trigger a re-ask."""
    if isinstance(value, dict):
        for key in ("results", "search_results", "items"):
            if isinstance(value.get(key), list):
                value = value[key]
                break
        else:
            raise ValueError("expected a JSON array of result objects")
    if not isinstance(value, list):
        raise ValueError("expected a JSON array of result objects")
    out: list[SearchResult] = []
    for item in value:
        if not isinstance(item, dict):
            continue
        url = item.get("url") or item.get("link") or item.get("href")
        if not isinstance(url, str) or not url.strip():
            continue
        date = item.get("date")
        out.append(
            SearchResult(
                url=url.strip(),
                title=str(item.get("title") or ""),
                snippet=str(item.get("snippet") or item.get("content") or ""),
                date=str(date) if date not in (None, "", "null", "unknown") else None,
            )
        )
    if value and not out:
        raise ValueError('no element of the array has a "url" string')
    return out[:k]


class ProxySearch(SearchBackend):
    """Search through another model's built-in web search."""

    def __init__(
        self,
        client: LLMClient,
        model: str,
        *,
        api: str = "chat",
        web_search_options: dict[str, Any] | None = None,
        max_reasks: int = 2,
        **kw: Any,
    ):
        super().__init__(**kw)
        if api not in ("chat", "responses"):
            raise ValueError("api must be 'chat' or 'responses'")
        if not model:
            raise ValueError("proxy search needs a model name (proxy:MODEL)")
        self.client = client
        self.model = model
        self.api = api
        self.web_search_options = {} if web_search_options is None and api == "chat" else web_search_options
        self.max_reasks = max_reasks
        self.name = f"proxy:{model}"

    def prompt_version(self) -> str:
        return template_version("search.proxy", PROXY_PROMPT, PROXY_VERSION)

    def cache_params(self) -> dict[str, Any]:
        return {
            "endpoint": self.client.cache_endpoint,
            "model": self.model,
            "api": self.api,
            "web_search_options": self.web_search_options,
            "prompt": self.prompt_version(),
        }

    def describe(self) -> dict[str, Any]:
        return {
            "search": self.name,
            "proxy_model": self.model,
            "proxy_api": self.api,
            "proxy_prompt": self.prompt_version(),
        }

    async def _search_once(self, query: str, k: int) -> tuple[list[SearchResult], Usage]:
        prompt = render("search.proxy", PROXY_PROMPT, query=query, k=k)
        messages = [{"role": "user", "content": prompt}]
        if self.api == "chat":
            params: dict[str, Any] = {"model": self.model}
            if self.web_search_options is not None:
                params["web_search_options"] = self.web_search_options
            sr = await achat_json(
                self.client,
                messages,
                validate=lambda v: validate_results(v, k),
                max_reasks=self.max_reasks,
                **params,
            )
        else:
            sr = await self._responses_json(messages, k)
        if sr.status == "pending":
            raise SearchUnavailable(f"proxy model call failed: {sr.error}")
        if not sr.ok:
            raise SearchUnavailable(
                f"proxy reply could not be read as a result list after {sr.attempts} tries: {sr.error}"
            )
        return list(sr.value), sr.usage

    async def _responses_json(self, messages: list[dict[str, Any]], k: int) -> StructuredResult:
        convo = list(messages)
        raws: list[str] = []
        usage = Usage(cost_usd=0.0)
        error = ""
        for attempt in range(self.max_reasks + 1):
            res = await self.client.aresponses(convo, model=self.model, tools=[{"type": "web_search"}])
            usage = usage + res.usage.model_copy(update={"cost_usd": res.usage.cost_usd or 0.0})
            if not res.ok:
                return StructuredResult(
                    "pending", raw_texts=raws, attempts=attempt + 1, error=res.error, usage=usage
                )
            text = res.content or ""
            raws.append(text)
            try:
                value = validate_results(parse_json_lenient(text), k)
                return StructuredResult("ok", value=value, raw_texts=raws, attempts=attempt + 1, usage=usage)
            except ValueError as e:
                error = str(e)[:200]
            convo = convo + [
                {"role": "assistant", "content": text},
                {"role": "user", "content": REASK_TEMPLATE.format(error=error)},
            ]
        return StructuredResult(
            "unparsed", raw_texts=raws, attempts=self.max_reasks + 1, error=error, usage=usage
        )

    async def aclose(self) -> None:
        await self.client.aclose()
