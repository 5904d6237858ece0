"""A small search agent on the openai SDK, instrumented with OpenInference, that sends its spans
to a trace server over OTLP/HTTP protobuf. Run as a script (its own process, so the OpenAI
instrumentation never patches the test process):

    python tests/_search_agent.py PLAN.json

PLAN holds ``base_url`` and ``model`` (the scripted fake OpenAI server), ``otlp`` (the traces
endpoint), ``headers`` (e.g. MLflow's ``x-mlflow-experiment-id``), ``resource`` (e.g. Phoenix's
``openinference.project.name``), ``questions`` (each ``question``, an optional ``id`` named in
the root span's metadata, and ``results``: query -> hits of the fake search tool) and ``log``,
where the agent writes what it did: per question its id, question, queries, result URLs, answer
and OTel trace id. The model decides the queries (the fake server's script); OpenInference records
the model calls, the agent its own root AGENT span and a TOOL span per search.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from openai import OpenAI
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

TOOLS = [{"type": "function", "function": {
    "name": "web_search", "description": "Search the web.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]


def answer(client: OpenAI, tracer: Any, model: str, q: dict[str, Any]) -> dict[str, Any]:
    meta = {"question_id": q["id"]} if q.get("id") else {}
    done: dict[str, Any] = {"id": q.get("id"), "question": q["question"], "queries": [], "urls": []}
    with tracer.start_as_current_span("search-agent", attributes={
            "openinference.span.kind": "AGENT", "input.value": q["question"], "metadata": json.dumps(meta)}) as root:
        messages: list[dict[str, Any]] = [{"role": "system", "content": "Answer with a web search."},
                                          {"role": "user", "content": q["question"]}]
        for _ in range(4):
            msg = client.chat.completions.create(model=model, messages=messages, tools=TOOLS).choices[0].message
            messages.append(msg.model_dump(exclude_none=True))
            if not msg.tool_calls:
                done["answer"] = msg.content
                root.set_attribute("output.value", msg.content or "")
                break
            for call in msg.tool_calls:
                query = json.loads(call.function.arguments)["query"]
                hits = q["results"].get(query, [])
                with tracer.start_as_current_span("web_search", attributes={
                        "openinference.span.kind": "TOOL", "tool.name": "web_search",
                        "input.value": call.function.arguments}) as span:
                    span.set_attribute("output.value", json.dumps(hits))
                done["queries"].append(query)
                done["urls"] += [h["url"] for h in hits]
                messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(hits)})
        done["trace_id"] = format(root.get_span_context().trace_id, "032x")
    return done


def main(plan_file: str) -> None:
    with open(plan_file, encoding="utf-8") as f:
        plan = json.load(f)
    provider = TracerProvider(resource=Resource.create({"service.name": "search-agent", **plan.get("resource", {})}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=plan["otlp"],
                                                                     headers=plan.get("headers") or None)))
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer("search-agent")
    client = OpenAI(base_url=plan["base_url"], api_key="sk-test", max_retries=0)
    log = [answer(client, tracer, plan["model"], q) for q in plan["questions"]]
    provider.force_flush()
    provider.shutdown()
    with open(plan["log"], "w", encoding="utf-8") as f:
        json.dump(log, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
