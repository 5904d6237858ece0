"""A small search agent on the openai SDK whose spans go to a trace server: instrumented with
OpenInference and sent over OTLP/HTTP protobuf, or (``"sdk": "mlflow"``) traced by MLflow's own
SDK (``mlflow.openai.autolog`` and ``mlflow.start_span``). Run as a script (its own process, so
the instrumentation never patches the test process):

    python tests/_search_agent.py PLAN.json

PLAN holds ``base_url`` and ``model`` (the scripted fake OpenAI server), ``otlp`` (the traces
endpoint), ``headers`` (e.g. MLflow's ``x-mlflow-experiment-id``), ``resource`` (e.g. Phoenix's
``openinference.project.name``), or ``sdk`` ``mlflow`` with ``tracking_uri`` and
``experiment_id``; ``questions`` (each ``question``, an optional ``id`` named in
the root span's metadata, and ``results``: query -> hits of the fake search tool) and ``log``,
where the agent writes what it did: per question its id, question, queries, result URLs, answer
and OTel trace id. The model decides the queries (the fake server's script); the instrumentation
records the model calls, the agent its own root AGENT span and a TOOL span per search.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from openai import OpenAI

TOOLS = [{"type": "function", "function": {
    "name": "web_search", "description": "Search the web.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]


class OpenInference:
    """OTel spans with OpenInference attributes, the model calls by OpenInference's instrumentor,
    sent over OTLP/HTTP protobuf."""

    def __init__(self, plan: dict[str, Any]):
        from openinference.instrumentation.openai import OpenAIInstrumentor
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        resource = Resource.create({"service.name": "search-agent", **plan.get("resource", {})})
        self.provider = TracerProvider(resource=resource)
        self.provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=plan["otlp"],
                                                                              headers=plan.get("headers") or None)))
        OpenAIInstrumentor().instrument(tracer_provider=self.provider)
        self.tracer = self.provider.get_tracer("search-agent")

    @contextmanager
    def agent(self, question: str, qid: str | None) -> Iterator[Any]:
        meta = json.dumps({"question_id": qid} if qid else {})
        with self.tracer.start_as_current_span("search-agent", attributes={
                "openinference.span.kind": "AGENT", "input.value": question, "metadata": meta}) as span:
            yield span

    def answered(self, span: Any, text: str) -> None:
        span.set_attribute("output.value", text)

    @contextmanager
    def tool(self, arguments: str, hits: list[dict[str, Any]]) -> Iterator[None]:
        with self.tracer.start_as_current_span("web_search", attributes={
                "openinference.span.kind": "TOOL", "tool.name": "web_search", "input.value": arguments}) as span:
            span.set_attribute("output.value", json.dumps(hits))
            yield

    def trace_id(self, span: Any) -> str:
        return format(span.get_span_context().trace_id, "032x")

    def close(self) -> None:
        self.provider.force_flush()
        self.provider.shutdown()


class MLflowTracing:
    """MLflow's own tracing: ``mlflow.openai.autolog()`` for the model calls, ``mlflow.start_span``
    for the agent and its tool, the question id as a trace tag."""

    def __init__(self, plan: dict[str, Any]):
        import mlflow

        self.mlflow = mlflow
        mlflow.set_tracking_uri(plan["tracking_uri"])
        mlflow.set_experiment(experiment_id=plan["experiment_id"])
        mlflow.openai.autolog()

    @contextmanager
    def agent(self, question: str, qid: str | None) -> Iterator[Any]:
        with self.mlflow.start_span(name="search-agent", span_type="AGENT") as span:
            span.set_inputs({"question": question})
            if qid:
                self.mlflow.update_current_trace(tags={"question_id": qid})
            yield span

    def answered(self, span: Any, text: str) -> None:
        span.set_outputs(text)

    @contextmanager
    def tool(self, arguments: str, hits: list[dict[str, Any]]) -> Iterator[None]:
        with self.mlflow.start_span(name="web_search", span_type="TOOL") as span:
            span.set_inputs(json.loads(arguments))
            span.set_outputs(hits)
            yield

    def trace_id(self, span: Any) -> str:
        return span.trace_id.removeprefix("tr-")

    def close(self) -> None:
        flush = getattr(self.mlflow, "flush_trace_async_logging", None)
        if flush is not None:
            flush()


def answer(client: OpenAI, tracing: Any, model: str, q: dict[str, Any]) -> dict[str, Any]:
    done: dict[str, Any] = {"id": q.get("id"), "question": q["question"], "queries": [], "urls": []}
    with tracing.agent(q["question"], q.get("id")) as root:
        messages: list[dict[str, Any]] = [{"role": "system", "content": "Answer with a web search."},
                                          {"role": "user", "content": q["question"]}]
        for _ in range(4):
            msg = client.chat.completions.create(model=model, messages=messages, tools=TOOLS).choices[0].message
            messages.append(msg.model_dump(exclude_none=True))
            if not msg.tool_calls:
                done["answer"] = msg.content
                tracing.answered(root, msg.content or "")
                break
            for call in msg.tool_calls:
                query = json.loads(call.function.arguments)["query"]
                hits = q["results"].get(query, [])
                with tracing.tool(call.function.arguments, hits):
                    pass
                done["queries"].append(query)
                done["urls"] += [h["url"] for h in hits]
                messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(hits)})
        done["trace_id"] = tracing.trace_id(root)
    return done


def main(plan_file: str) -> None:
    with open(plan_file, encoding="utf-8") as f:
        plan = json.load(f)
    tracing = MLflowTracing(plan) if plan.get("sdk") == "mlflow" else OpenInference(plan)
    client = OpenAI(base_url=plan["base_url"], api_key="sk-test", max_retries=0)
    log = [answer(client, tracing, plan["model"], q) for q in plan["questions"]]
    tracing.close()
    with open(plan["log"], "w", encoding="utf-8") as f:
        json.dump(log, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
