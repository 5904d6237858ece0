"""The LLM layer: one cached, concurrent, retrying OpenAI-compatible client."""

from trek.limits import EndpointLimits, StartLimits
from trek.llm.cache import LLMCache, request_key
from trek.llm.client import ChatRequest, FatalLLMError, LLMClient, LLMResult, run_sync, scrub
from trek.llm.structured import StructuredResult, achat_json, chat_json, parse_json_lenient
from trek.llm.usage import Price, PriceTable, usage_from_raw

__all__ = [
    "ChatRequest",
    "EndpointLimits",
    "FatalLLMError",
    "LLMCache",
    "LLMClient",
    "LLMResult",
    "Price",
    "PriceTable",
    "StartLimits",
    "StructuredResult",
    "achat_json",
    "chat_json",
    "parse_json_lenient",
    "request_key",
    "run_sync",
    "scrub",
    "usage_from_raw",
]
