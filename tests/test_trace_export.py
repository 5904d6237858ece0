"""trek trace export: TrekTrace's labels as Langfuse score rows and as OTLP evaluation events in
the imported traces; a trace without content traced end to end (no Pre-retrieval label, no
score from a test that did not run). No network: the judges are the scripted fake server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _import_script import script
from _otel_traces import Run, Tool, Turn, langfuse_export, request, spans, write_jsonl
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.imports import import_run, parse_mapping
from trek.testing.fake_openai import FakeOpenAIServer
from trek.trace import records as trace_records
from trek.trace.export import export_labels, langfuse_rows, otlp_request, score_name, scores
from trek.types import write_jsonl as write_records

EX = Path(__file__).resolve().parents[1] / "examples"
MAP = parse_mapping("id=qid,question=text,answers=gold,gold_urls=sources,effective_year=year")
LABEL_NAMES = ["trektrace.pre_retrieval", "trektrace.retrieval", "trektrace.interpretation",
               "trektrace.distraction", "trektrace.randomness"]


def record(qid: str, status: str, labels: list[str], tests: dict[str, str], **kw) -> trace_records.TraceRecord:
    return trace_records.TraceRecord(question_id=qid, dataset="custom", question="?", answers=["a"], original_outcome="incorrect",
                       status=status, labels=labels, tests={k: trace_records.TestRun(state=v, reason="why" if v == "skipped" else None)
                                                            for k, v in tests.items()}, **kw)


@pytest.fixture
def traced(tmp_path) -> Path:
    """The example Langfuse run with three hand-written trace records."""
    out = tmp_path / "run"
    import_run("langfuse", [EX / "langfuse.jsonl"], out, questions=EX / "questions.csv", mapping=MAP)
    done = {"retrieval": "ran", "queries": "ran", "gold_only": "ran", "noise": "ran"}
    recs = [record("lake-2", "done", ["Retrieval", "Distraction"], done, evidence_retrieved=False,
                   query_adequate=True, gold_only_correct=True, noise_was_run=True, noise_correct=False,
                   retrieval_basis="evidence-match", evidence_reason="The plans page gives four lanes.",
                   noise_grade_reason="Four is not six."),
            record("lake-1", "incomplete", ["Interpretation"],
                   {"retrieval": "skipped", "queries": "skipped", "gold_only": "ran", "noise": "not_needed"},
                   gold_only_correct=False, gold_only_grade_reason="Wrong from the gold page."),
            record("lake-3", "pending", [], {}, error="the judge did not answer")]
    write_records(out / runs.TRACE, recs)
    return out


def test_langfuse_rows_one_per_label_per_case_and_a_status(traced, tmp_path):
    path, n, cases = export_labels(traced, "langfuse", tmp_path / "scores.jsonl")
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    answers = runs.load_answers(traced)
    ids = {q: t.source.record_id for q, t in answers.items()}
    by = {}
    for r in rows:
        by.setdefault(r["traceId"], {})[r["name"]] = r
    assert (n, cases) == (len(rows), 3) and len(by) == 3
    done = by[ids["lake-2"]]
    assert sorted(done) == sorted([*LABEL_NAMES, "trektrace.status"])
    assert {k: v["value"] for k, v in done.items()} == {
        "trektrace.pre_retrieval": 0, "trektrace.retrieval": 1, "trektrace.interpretation": 0,
        "trektrace.distraction": 1, "trektrace.randomness": 0, "trektrace.status": "done"}
    assert done["trektrace.retrieval"]["dataType"] == "BOOLEAN" and done["trektrace.status"]["dataType"] == "CATEGORICAL"
    assert "four lanes" in done["trektrace.retrieval"]["comment"] and "E=F Q=T G=T N=F" in done["trektrace.retrieval"][
        "comment"]
    # incomplete: only the side whose tests ran; no upstream 0 from skipped tests, no Randomness
    part = by[ids["lake-1"]]
    assert sorted(part) == ["trektrace.distraction", "trektrace.interpretation", "trektrace.status"]
    assert part["trektrace.interpretation"]["value"] == 1 and part["trektrace.status"]["value"] == "incomplete"
    assert "retrieval: why" in part["trektrace.status"]["comment"]
    pending = by[ids["lake-3"]]
    assert list(pending) == ["trektrace.status"] and "did not answer" in pending["trektrace.status"]["comment"]
    # stable ids: a second export gives the same rows
    again = [json.loads(x) for x in export_labels(traced, "langfuse", tmp_path / "again.jsonl")[0].read_text()
             .splitlines()]
    assert [r["id"] for r in again] == [r["id"] for r in rows] and len({r["id"] for r in rows}) == len(rows)


def test_otlp_events_in_the_imported_trace_under_its_root(traced, tmp_path):
    path, n, _ = export_labels(traced, "otlp", tmp_path / "evals.json")
    req = json.loads(path.read_text())
    found = req["resourceSpans"][0]["scopeSpans"][0]["spans"]
    answers = runs.load_answers(traced)
    roots = {t.source.record_id: t.details["trace"]["root_span_id"] for t in answers.values()}
    assert {s["traceId"] for s in found} == set(roots)
    for s in found:
        assert s["parentSpanId"] == roots[s["traceId"]] and len(s["spanId"]) == 16
        assert {e["name"] for e in s["events"]} == {"gen_ai.evaluation.result"}
    assert sum(len(s["events"]) for s in found) == n
    lake2 = next(s for s in found if s["traceId"] == answers["lake-2"].source.record_id)
    events = {}
    for e in lake2["events"]:
        a = {kv["key"]: next(iter(kv["value"].values())) for kv in e["attributes"]}
        events[a["gen_ai.evaluation.name"]] = a
    assert events["trektrace.retrieval"]["gen_ai.evaluation.score.value"] == 1.0
    assert events["trektrace.retrieval"]["gen_ai.evaluation.score.label"] == "yes"
    assert events["trektrace.randomness"]["gen_ai.evaluation.score.label"] == "no"
    assert events["trektrace.status"]["gen_ai.evaluation.score.label"] == "done"
    assert "gen_ai.evaluation.score.value" not in events["trektrace.status"]
    assert "four lanes" in events["trektrace.retrieval"]["gen_ai.evaluation.explanation"]


def test_export_refuses_runs_it_cannot_write_back(traced, tmp_path):
    with pytest.raises(ValueError, match="unknown format 'csv'"):
        export_labels(traced, "csv", tmp_path / "x")
    # a Langfuse trace id that is not an OTel id cannot become OTLP (but can become scores)
    items = scores(traced)
    bad = [s.__class__(**{**s.__dict__, "trace_id": "lf-trace-1"}) for s in items]
    with pytest.raises(ValueError, match="not an OpenTelemetry trace id"):
        otlp_request(bad, traced)
    assert {r["traceId"] for r in langfuse_rows(bad)} == {"lf-trace-1"}
    # a run not imported from traces
    imported = tmp_path / "resp"
    import_run("openai-responses", [EX / "openai-responses.jsonl"], imported, questions=EX / "questions.csv",
               mapping=MAP)
    write_records(imported / runs.TRACE, [record("lake-2", "pending", [], {})])
    r = CliRunner().invoke(app, ["trace", "export", str(imported), "--format", "langfuse", "--out",
                                 str(tmp_path / "s.jsonl")])
    assert r.exit_code == 2 and "was not imported from a trace" in r.output and not (tmp_path / "s.jsonl").exists()
    # the output may not be a record file of the run
    r = CliRunner().invoke(app, ["trace", "export", str(traced), "--format", "langfuse", "--out",
                                 str(traced / "scores.jsonl")])
    assert r.exit_code == 2


def test_score_names():
    assert [score_name(x) for x in ("Pre-retrieval", "Retrieval", "Randomness")] == [
        "trektrace.pre_retrieval", "trektrace.retrieval", "trektrace.randomness"]


@pytest.mark.slow
def test_a_trace_without_content_is_traced_without_upstream_labels(tmp_path, monkeypatch):
    """The Harbor Bridge question answered wrongly in a trace whose spans carry no content (only
    the application's trace output): TrekTrace skips the retrieval and query tests, gives no
    Pre-retrieval (nor Retrieval) label, and the export writes no upstream score."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    dark = Run("dark-bridge", [Turn(tools=[Tool("web_search", {"query": "lanes"}, [], call_id="x1")]),
                               Turn(text="x")], model="gpt-5-mini-2025-08-07", question_id="lake-2", content=False)
    export = langfuse_export(request(spans(dark, "genai")), trace={"output": "The Harbor Bridge has four lanes."})
    f = write_jsonl(tmp_path / "dark.jsonl", [export])
    qs = tmp_path / "q.csv"
    qs.write_text("\n".join((EX / "questions.csv").read_text().splitlines()[:1]
                            + [line for line in (EX / "questions.csv").read_text().splitlines() if "lake-2" in line]))
    run = tmp_path / "run"
    r = CliRunner().invoke(app, ["import", "langfuse", str(f), "--questions", str(qs), "--map",
                                 "id=qid,question=text,answers=gold,gold_urls=sources,effective_year=year",
                                 "--out", str(run)])
    assert r.exit_code == 0, r.output
    assert "queries: none 1" in r.output
    r = CliRunner().invoke(app, ["pages", "add", str(run), str(EX / "pages.jsonl")])
    assert r.exit_code == 0, r.output
    with FakeOpenAIServer(script=script()) as srv:
        r = CliRunner().invoke(app, ["grade", str(run), "--judge", "gpt-4.1-mini", "--judge-base-url", srv.base_url,
                                     "--no-progress"])
        assert r.exit_code == 0, r.output
        r = CliRunner().invoke(app, ["trace", str(run), "--judge", "gpt-5.4", "--judge-base-url", srv.base_url,
                                     "--base-url", srv.base_url, "--no-progress"])
    assert r.exit_code == 3, r.output  # incomplete
    (rec,) = [json.loads(x) for x in (run / runs.TRACE).read_text().splitlines()]
    assert rec["status"] == "incomplete"
    assert rec["tests"]["retrieval"]["state"] == "skipped" and rec["tests"]["queries"]["state"] == "skipped"
    assert "Pre-retrieval" not in rec["labels"] and "Retrieval" not in rec["labels"]
    rows = [json.loads(x) for x in export_labels(run, "langfuse", tmp_path / "s.jsonl")[0].read_text().splitlines()]
    names = {r["name"] for r in rows}
    assert "trektrace.pre_retrieval" not in names and "trektrace.retrieval" not in names
    assert {r["traceId"] for r in rows} == {export["trace"]["id"]}
