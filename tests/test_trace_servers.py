"""Round trips against real trace servers: ``phoenix serve`` and ``mlflow server`` (sqlite in a
temporary folder, loopback, telemetry off, started once per session). An openai-SDK search agent
(tests/_search_agent.py, its own process) answers the example questions against the scripted fake
OpenAI server; its spans go to the server from OpenInference over OTLP/HTTP protobuf, or from
MLflow's own tracing SDK; ``trek import phoenix|mlflow`` must give exactly the agent's questions,
queries, result URLs and answers, in whatever order the server returns the traces; the run is
graded and traced with scripted judges; ``trek trace export --to phoenix|mlflow`` writes the
labels, which are read back with the server's own client. A test skips only when its extra
(phoenix, mlflow) is not installed; the ``test`` extra installs both."""

from __future__ import annotations

import csv
import functools
import importlib.util
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _import_script import EVALUATED, script
from _trace_servers import TraceServer, mlflow_server, phoenix_server
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.testing.fake_openai import FakeOpenAIServer
from trek.trace.destinations import phoenix_client_module
from trek.trace.export import scores

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
EX = HERE.parent / "examples"
MAP = "id=qid,question=text,answers=gold,gold_urls=sources,effective_year=year"
AGENT_DEPS = ("openinference.instrumentation.openai", "opentelemetry.exporter.otlp.proto.http")
EXTRAS = {"phoenix": ("phoenix.server", "phoenix.client"), "mlflow": ("mlflow",)}
SERVERS = {"phoenix": phoenix_server, "mlflow": mlflow_server}


def _have(modules: tuple[str, ...]) -> bool:
    """Whether every module is installed, found on disk without importing anything (importing
    ``phoenix.server`` would load the whole Phoenix application into the test process)."""
    def found(name: str) -> bool:
        top, *rest = name.split(".")
        spec = importlib.util.find_spec(top)
        places = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
        for i, part in enumerate(rest):
            last = i == len(rest) - 1
            if last and any((p / f"{part}.py").is_file() for p in places):
                return True
            places = [p / part for p in places if (p / part).is_dir()]
        return bool(places) if rest else spec is not None

    return all(found(m) for m in modules)


@pytest.fixture(scope="session")
def trace_servers(request, tmp_path_factory) -> dict[str, TraceServer]:
    """The servers the selected tests use, started side by side once per session (each only when
    its extra is there)."""
    wanted = {n for n in SERVERS if any(item.name.startswith(f"test_{n}_") for item in request.session.items)}
    started = {name: make(tmp_path_factory.mktemp(name)).start()
               for name, make in SERVERS.items() if name in wanted and _have(EXTRAS[name] + AGENT_DEPS)}
    try:
        for s in started.values():
            s.wait()
            print(f"\n{s.name} started in {s.startup:.1f} s at {s.url}")
        yield started
    finally:
        for s in started.values():  # both stop side by side
            s.terminate()
        for s in started.values():
            s.stop()


def server(trace_servers: dict[str, TraceServer], name: str) -> TraceServer:
    if name not in trace_servers:
        pytest.skip(f"the {name!r} extra (or the agent's OpenInference/OTLP packages) is not installed: "
                    f"pip install -e '.[test]'")
    return trace_servers[name]


# -- the agent -------------------------------------------------------------------------------------
def _questions() -> dict[str, dict[str, str]]:
    with open(EX / "questions.csv", encoding="utf-8") as f:
        return {r["qid"]: r for r in csv.DictReader(f)}


#: What the agent does per question (asked in this order, not the questions file's): the query the
#: model asks for, the search hits, the answer; ``named``: whether its trace names the question id
#: (the others are matched by the question text they hold).
PLAN = [
    {"qid": "lake-3", "query": "Riverbend Cup 2025 final winner", "named": True,
     "hits": [{"url": "https://riverbend-sports.example/cup-final", "title": "Riverbend Cup final",
               "snippet": "The Pinecrest Otters beat the Riverside Herons 3-1."},
              {"url": "https://riverbend-sports.example/standings", "title": "Standings", "snippet": "Table."}],
     "answer": "The Pinecrest Otters won the 2025 Riverbend Cup."},
    {"qid": "lake-1", "query": "Lakeside Marathon 2025 winner", "named": False,
     "hits": [{"url": "https://lakeside-news.example/marathon-2025", "title": "Lakeside Marathon 2025 results",
               "snippet": "Mara Quill won the overall race."}],
     "answer": "Mara Quill won the 2025 Lakeside Marathon."},
    {"qid": "lake-2", "query": "new Harbor Bridge number of lanes", "named": False,
     "hits": [{"url": "https://harbor-city.example/old-plans", "title": "Harbor Bridge plans",
               "snippet": "Plans for a new Harbor Bridge with four lanes."}],
     "answer": "The Harbor Bridge has four lanes."},
]


def fake_script() -> list[dict[str, Any]]:
    """The judges' rules of the README test, then the agent's: a search first, then the answer."""
    qs = _questions()
    agent = []
    for p in PLAN:
        text = re.escape(qs[p["qid"]]["text"])
        agent += [{"model": EVALUATED, "any_pattern": text, "tool_results": 0,
                   "tool_calls": [{"name": "web_search", "arguments": {"query": p["query"]}}]},
                  {"model": EVALUATED, "any_pattern": text, "tool_results": 1, "reply": p["answer"]}]
    return [*script(), *agent]


def run_agent(tmp: Path, llm: FakeOpenAIServer, **how: Any) -> list[dict[str, Any]]:
    """Run tests/_search_agent.py; ``how``: where its spans go (``otlp``, ``headers``,
    ``resource``; or ``sdk="mlflow"``, ``tracking_uri``, ``experiment_id``)."""
    qs = _questions()
    tmp.mkdir(parents=True, exist_ok=True)
    plan = {"base_url": llm.base_url, "model": EVALUATED, **how, "log": str(tmp / "agent-log.json"),
            "questions": [{"id": p["qid"] if p["named"] else None, "question": qs[p["qid"]]["text"],
                           "results": {p["query"]: p["hits"]}} for p in PLAN]}
    (tmp / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    r = subprocess.run([sys.executable, str(HERE / "_search_agent.py"), str(tmp / "plan.json")], capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    log = json.loads((tmp / "agent-log.json").read_text(encoding="utf-8"))
    assert [d["answer"] for d in log] == [p["answer"] for p in PLAN]  # the agent ran as scripted
    return log


def wait_until(what: str, ready: Callable[[], bool], timeout: float = 90.0) -> None:
    """Poll the server (its ingestion is asynchronous) until ``ready()``; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"the server did not show {what} within {timeout:.0f} s")
        time.sleep(0.5)  # the server offers nothing to wait on


# -- the checks shared by both servers -------------------------------------------------------------
def invoke(*args: str) -> str:
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 0, (args, r.output)
    return r.output


def check_import(run: Path, log: list[dict[str, Any]]) -> None:
    """The run holds exactly the agent's questions, queries, result URLs and answers."""
    by_text = {q["text"]: qid for qid, q in _questions().items()}
    answers = runs.load_answers(run)
    assert sorted(answers) == sorted(by_text[d["question"]] for d in log)
    for d in log:
        t = answers[by_text[d["question"]]]
        assert t.final_answer == d["answer"] and t.status == "ok"
        assert [c.query for c in t.search_calls] == d["queries"]
        assert [r.url for c in t.search_calls for r in c.results] == d["urls"]
        assert t.source.record_id == d["trace_id"] and t.model == EVALUATED


def same_run(a: Path, b: Path) -> bool:
    """The same trajectories (aside from when they were made and how the server was named)."""
    def rows(run: Path) -> dict[str, dict]:
        return {q: t.model_dump(exclude={"source": {"file"}, "created_at": True})
                for q, t in runs.load_answers(run).items()}
    return rows(a) == rows(b)


def grade_and_trace(run: Path, llm: FakeOpenAIServer, monkeypatch) -> None:
    """Grade and trace the run, and give its case the verdicts of trek trace verify (written by
    hand, tests/_verify_records.py: the export sends them beside the labels)."""
    from _verify_records import plant

    from trek.trace.pipeline import load_trace

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    invoke("pages", "add", str(run), str(EX / "pages.jsonl"))
    invoke("grade", str(run), "--judge", "gpt-4.1-mini", "--judge-base-url", llm.base_url, "--no-progress")
    invoke("trace", str(run), "--judge", "gpt-5.4", "--judge-base-url", llm.base_url, "--base-url", llm.base_url,
           "--no-progress")
    (rec,) = [json.loads(x) for x in (run / runs.TRACE).read_text().splitlines()]
    assert rec["question_id"] == "lake-2" and rec["status"] == "done" and rec["labels"]
    assert plant(run, load_trace(run)), f"no experiment for the labels {rec['labels']}"


def expected(run: Path) -> dict[tuple[str, str], Any]:
    """(trace id, score name) -> the 1/0 value or the status the export writes."""
    items = scores(run)
    assert any(s.value == 1 for s in items) and any(s.value == 0 for s in items)
    assert any(s.name.startswith("trektrace.verify_") for s in items)
    return {(s.trace_id, s.name): s.value if s.value is not None else s.status for s in items}


# -- Phoenix ---------------------------------------------------------------------------------------
def test_phoenix_round_trip(trace_servers, tmp_path, monkeypatch):
    px = server(trace_servers, "phoenix")
    client = phoenix_client_module().Client(base_url=px.url)
    project = "search-agent-test"
    with FakeOpenAIServer(script=fake_script()) as llm:
        log = run_agent(tmp_path, llm, otlp=px.url + "/v1/traces", resource={"openinference.project.name": project})

        def roots() -> list[dict]:
            try:
                found = client.spans.get_spans(project_identifier=project, parent_id="null", limit=100)
            except Exception:  # the project appears with its first span
                return []
            return [s for s in found if s["attributes"].get("output.value")]

        wait_until("the agent's 3 traces", lambda: len(roots()) == len(PLAN))
        run = tmp_path / "run"
        out = invoke("import", "phoenix", px.url, "--project", project, "--questions", str(EX / "questions.csv"),
                     "--map", MAP, "--out", str(run))
        assert "imported 3 trajectories (ok 3)" in out
        check_import(run, log)
        # whatever order the server returns: the same run from the spans in reverse
        from phoenix.client.resources.spans import Spans

        get_spans = Spans.get_spans
        monkeypatch.setattr(Spans, "get_spans", lambda self, **kw: list(reversed(get_spans(self, **kw))))
        invoke("import", "phoenix", px.url, "--project", project, "--questions", str(EX / "questions.csv"), "--map",
               MAP, "--out", str(tmp_path / "reversed"))
        monkeypatch.setattr(Spans, "get_spans", get_spans)
        assert same_run(tmp_path / "reversed", run)
        grade_and_trace(run, llm, monkeypatch)
    want = expected(run)
    out = invoke("trace", "export", str(run), "--to", "phoenix", px.url)
    assert f"sent {len(want)} span annotation(s) of 1 traced case(s)" in out
    answers = runs.load_answers(run)
    root_of = {t.source.record_id: t.details["trace"]["root_span_id"] for t in answers.values()}
    trace_of = {v: k for k, v in root_of.items()}
    got = {}
    for a in client.spans.get_span_annotations(span_ids=list(root_of.values()), project_identifier=project):
        if a["name"].startswith("trektrace."):
            res = a["result"]
            got[(trace_of[a["span_id"]], a["name"])] = int(res["score"]) if res.get("score") is not None else res["label"]
            assert res["explanation"] and a["annotator_kind"] == "LLM"
            if a["name"].startswith("trektrace.verify_"):  # the verdict's details came along
                assert a["metadata"]["label"] in ("Pre-retrieval", "Retrieval", "Distraction"), a["metadata"]
    assert got == want
    # a re-export after the case's trace changed (now pending: no label tested) leaves exactly
    # its current state on the server: no label value of the earlier export stays
    from trek.trace.pipeline import load_trace
    from trek.types import write_jsonl

    kept = (run / runs.TRACE).read_bytes()
    write_jsonl(run / runs.TRACE, [r.model_copy(update={"status": "pending", "labels": []}) for r in load_trace(run)])
    out = invoke("trace", "export", str(run), "--to", "phoenix", px.url)
    assert "sent 1 span annotation(s) of 1 traced case(s)" in out and "marked 'not tested'" in out
    again = {}
    for a in client.spans.get_span_annotations(span_ids=list(root_of.values()), project_identifier=project):
        if a["name"].startswith("trektrace."):
            again[(trace_of[a["span_id"]], a["name"])] = a["result"].get("score"), a["result"]["label"]
    assert again == {k: (None, "pending" if k[1] == "trektrace.status" else "not tested") for k in want}
    (run / runs.TRACE).write_bytes(kept)
    # the evaluation events as OTLP/HTTP protobuf: Phoenix is a collector too; the ids arrive right
    invoke("trace", "export", str(run), "--to", "otlp", px.url + "/v1/traces")

    def evaluation_spans() -> list[dict]:
        return client.spans.get_spans(project_identifier=project, name="trektrace", limit=100)

    wait_until("the trektrace spans", lambda: len(evaluation_spans()) == len({k[0] for k in want}))
    events = {}
    for s in evaluation_spans():
        assert s["parent_id"] == root_of[s["context"]["trace_id"]]
        for e in s["events"]:
            events[(s["context"]["trace_id"], e["attributes"]["gen_ai.evaluation.name"])] = e["attributes"].get(
                "gen_ai.evaluation.score.value", e["attributes"]["gen_ai.evaluation.score.label"])
    assert events == want


# -- MLflow ----------------------------------------------------------------------------------------
def test_mlflow_round_trip(trace_servers, tmp_path, monkeypatch):
    """The agent traced by MLflow's own SDK (autolog, start_span: mlflow.span* attributes) for the
    round trip, and by OpenInference over OTLP into a second experiment for the import."""
    ml = server(trace_servers, "mlflow")
    import mlflow

    from trek.trace.destinations import mlflow_tracking

    with mlflow_tracking(ml.url):
        client = mlflow.MlflowClient(ml.url)
        experiment, otlp_experiment = (client.create_experiment(n) for n in ("search-agent-sdk", "search-agent-otlp"))

        def traces(eid: str) -> list:
            return mlflow.search_traces(locations=[eid], return_type="list")

        with FakeOpenAIServer(script=fake_script()) as llm:
            log = run_agent(tmp_path / "sdk", llm, sdk="mlflow", tracking_uri=ml.url, experiment_id=experiment)
            otlp_log = run_agent(tmp_path / "otlp", llm, otlp=ml.url + "/v1/traces",
                                 headers={"x-mlflow-experiment-id": otlp_experiment})
            wait_until("the agent's traces", lambda: len(traces(experiment)) == len(traces(otlp_experiment)) == len(PLAN))
            run = tmp_path / "run"
            out = invoke("import", "mlflow", ml.url, "--experiment", "search-agent-sdk", "--questions",
                         str(EX / "questions.csv"), "--map", MAP, "--out", str(run))
            assert "imported 3 trajectories (ok 3)" in out
            check_import(run, log)
            invoke("import", "mlflow", ml.url, "--experiment", "search-agent-otlp", "--questions",
                   str(EX / "questions.csv"), "--map", MAP, "--out", str(tmp_path / "otlp-run"))
            check_import(tmp_path / "otlp-run", otlp_log)
            # by id the same; and whatever order search_traces returns
            search = mlflow.search_traces

            @functools.wraps(search)
            def reversed_search(*a, **kw):
                return list(reversed(search(*a, **kw)))

            monkeypatch.setattr(mlflow, "search_traces", reversed_search)
            invoke("import", "mlflow", ml.url, "--experiment", experiment, "--questions", str(EX / "questions.csv"),
                   "--map", MAP, "--out", str(tmp_path / "reversed"))
            monkeypatch.setattr(mlflow, "search_traces", search)
            assert same_run(tmp_path / "reversed", run)
            grade_and_trace(run, llm, monkeypatch)
        want = expected(run)
        for _ in range(2):  # sending again replaces Trek's feedback, it does not add to it
            out = invoke("trace", "export", str(run), "--to", "mlflow", ml.url)
            assert f"sent {len(want)} feedback assessment(s) of 1 traced case(s)" in out
        got: dict[tuple[str, str], Any] = {}
        for tid in {k[0] for k in want}:
            for a in mlflow.get_trace(f"tr-{tid}").info.assessments:
                assert (tid, a.name) not in got, f"{a.name} twice on trace {tid}"
                assert a.source.source_id == "trektrace" and a.rationale
                got[(tid, a.name)] = a.value if isinstance(a.value, str) else int(a.value)
                if a.name.startswith("trektrace.verify_"):  # the verdict's details came along
                    assert a.metadata["label"] in ("Pre-retrieval", "Retrieval", "Distraction"), a.metadata
    assert got == want
