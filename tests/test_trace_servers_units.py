"""The pieces of trek import phoenix|mlflow and trek trace export --to that need no server: span
records made of what the servers' clients return, the trace grouping, the OTLP protobuf ids, and
the command line's refusals. The round trips against real servers are tests/test_trace_servers.py."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from test_trace_export import traced  # noqa: F401  (the fixture)
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.imports import ImportFailure, import_run, otlp
from trek.imports.phoenix import span_record
from trek.imports.servers import attribute_value, iso_ns, trace_records
from trek.imports.spans import TraceOptions
from trek.trace.destinations import phoenix_annotations
from trek.trace.export import otlp_request, scores

EX = Path(__file__).resolve().parents[1] / "examples"
MAP = "id=qid,question=text,answers=gold,gold_urls=sources,effective_year=year"


def _px(tid: str, sid: str, parent: str | None, name: str, kind: str, start: str, attrs: dict) -> dict:
    """One span as Phoenix's client returns it (flat attributes, span_kind beside them)."""
    return {"id": "U3Bhbjox", "name": name, "context": {"trace_id": tid, "span_id": sid}, "span_kind": kind,
            "parent_id": parent, "start_time": start, "end_time": start, "status_code": "OK", "status_message": "",
            "attributes": attrs, "events": []}


def test_phoenix_spans_become_the_otlp_importers_records():
    tid = "a" * 32
    got = [span_record(_px(tid, "1" * 16, None, "agent", "AGENT", "2026-01-01T10:00:00.000001+00:00",
                           {"input.value": "How many lanes?", "output.value": "Four.", "metadata.question_id": "lake-2"}),
                       1),
           span_record(_px(tid, "2" * 16, "1" * 16, "web_search", "TOOL", "2026-01-01T10:00:01+00:00",
                           {"tool.name": "web_search", "input.value": '{"query": "lanes"}',
                            "output.value": '[{"url": "https://a.example/x", "title": "X"}]'}), 2)]
    assert got[0].attrs["openinference.span.kind"] == "AGENT" and got[1].parent_id == "1" * 16
    assert got[1].start - got[0].start == 999_999_000
    (rec,) = trace_records(got, "http://px (project 'p')", TraceOptions())
    assert rec.question_id == "lake-2" and rec.where == "http://px (project 'p'), trace 1"
    parsed = otlp.parse(rec)
    assert parsed.answer == "Four." and [c.query for c in parsed.searches] == ["lanes"]
    assert [r.url for r in parsed.searches[0].results] == ["https://a.example/x"]
    with pytest.raises(ValueError, match="no context.trace_id"):
        span_record({"name": "x", "context": {}}, 1)


def test_traces_are_ordered_by_their_start_not_by_the_servers_order():
    newer = span_record(_px("b" * 32, "3" * 16, None, "agent", "AGENT", "2026-01-02T00:00:00Z", {}), 1)
    older = span_record(_px("c" * 32, "4" * 16, None, "agent", "AGENT", "2026-01-01T00:00:00Z", {}), 2)
    assert [r.data["trace_id"] for r in trace_records([newer, older], "srv", TraceOptions())] == ["c" * 32, "b" * 32]
    with pytest.raises(ImportFailure, match="srv: the server holds no trace there"):
        trace_records([], "srv", TraceOptions())


def test_a_server_trace_naming_no_question_id_is_matched_by_its_question_text():
    from trek.imports.common import match_traces
    from trek.types import Question

    qs = {q.id: q for q in (Question(id="a", dataset="custom", question="Who coaches Harrowmere Rovers?", answers=["x"]),
                             Question(id="b", dataset="custom", question="Who runs Veltaro?", answers=["y"]))}

    def agent(tid: str, start: str, question: str):
        return span_record(_px(tid, tid[:16], None, "agent", "AGENT", start, {"input.value": question}), 1)

    # the server returns the newer trace first; neither names a question id
    records = trace_records([agent("b" * 32, "2026-01-02T00:00:00Z", "Who coaches Harrowmere Rovers?"),
                             agent("c" * 32, "2026-01-01T00:00:00Z", "Who runs Veltaro?")], "srv", TraceOptions())
    assert all(r.question_id is None and r.texts for r in records)
    matched = match_traces(records, qs, None)
    assert {q.id: r.data["trace_id"] for q, r in matched} == {"a": "b" * 32, "b": "c" * 32}


def test_decoded_attribute_values_go_back_to_their_json_text():
    assert attribute_value({"query": "x"}) == '{"query": "x"}'
    assert attribute_value([{"url": "u"}]) == '[{"url": "u"}]'
    assert attribute_value(["a", "b"]) == ["a", "b"] and attribute_value(3) == 3 and attribute_value("s") == "s"
    assert attribute_value(float("inf")) == "inf"
    assert iso_ns("2026-01-01T00:00:00Z") == 1_767_225_600_000_000_000 and iso_ns("soon") == 0 and iso_ns(None) == 0


def test_otlp_protobuf_carries_the_hex_ids_as_bytes(traced):  # noqa: F811
    pytest.importorskip("opentelemetry.proto")
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from trek.trace.destinations import otlp_protobuf

    req = otlp_request(scores(traced), traced)
    msg = ExportTraceServiceRequest.FromString(otlp_protobuf(req))
    want = [(s["traceId"], s["spanId"], s["parentSpanId"]) for s in req["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    got = [(s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex())
           for s in msg.resource_spans[0].scope_spans[0].spans]
    assert got == want and all(len(t) == 32 for t, _, _ in got)
    # what protobuf's own JSON mapping makes of the hex file: other ids, without an error
    wrong = json_format.ParseDict(req, ExportTraceServiceRequest()).resource_spans[0].scope_spans[0].spans[0]
    assert wrong.trace_id.hex() != want[0][0]
    # and the importer reads a protobuf JSON dump (base64 ids) as the same hex ids
    dump = json_format.MessageToDict(msg)
    assert dump["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] == base64.b64encode(
        bytes.fromhex(want[0][0])).decode()
    assert otlp._hex_id(dump["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"], 16) == want[0][0]


def test_phoenix_annotations_one_per_score_on_the_root_span(traced):  # noqa: F811
    items = scores(traced)
    rows = phoenix_annotations(items, traced)
    roots = {t.source.record_id: t.details["trace"]["root_span_id"] for t in runs.load_answers(traced).values()}
    assert len(rows) == len(items) and {r["span_id"] for r in rows} == set(roots.values())
    status = [r for r in rows if r["name"] == "trektrace.status"]
    assert len(status) == 3 and all("score" not in r["result"] for r in status)
    labels = [r for r in rows if r["name"] != "trektrace.status"]
    assert {r["result"]["score"] for r in labels} == {0.0, 1.0}
    assert all(r["result"]["label"] == ("yes" if r["result"]["score"] else "no") for r in labels)


def test_the_command_line_refuses_mixed_or_missing_options(traced, tmp_path):  # noqa: F811
    runner = CliRunner()
    r = runner.invoke(app, ["trace", "export", str(traced)])
    assert r.exit_code == 2 and "--to phoenix|mlflow|otlp URL" in r.output
    r = runner.invoke(app, ["trace", "export", str(traced), "--to", "otlp", "http://127.0.0.1:9", "--format", "otlp"])
    assert r.exit_code == 2 and "one or the other" in r.output
    r = runner.invoke(app, ["trace", "export", str(traced), "--to", "zipkin", "http://127.0.0.1:9"])
    assert r.exit_code == 2 and "unknown destination 'zipkin'" in r.output
    r = runner.invoke(app, ["import", "otlp", str(EX / "otlp-genai.jsonl"), "--project", "p", "--questions",
                            str(EX / "questions.csv"), "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "--project names a Phoenix project" in r.output
    with pytest.raises(ImportFailure, match="give one server URL, not 2"):
        import_run("phoenix", ["http://a", "http://b"], tmp_path / "y", questions=EX / "questions.csv")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_an_unreachable_server_is_one_line_without_the_urls_credentials(traced, tmp_path):  # noqa: F811
    import importlib.util
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://alice:tok-SECRET-4242@127.0.0.1:{port}"
    runner = CliRunner()
    r = runner.invoke(app, ["trace", "export", str(traced), "--to", "otlp", url])
    assert r.exit_code == 2 and "ConnectError" in r.output and f"127.0.0.1:{port}/v1/traces" in r.output
    assert "SECRET" not in r.output and "Traceback" not in r.output
    if importlib.util.find_spec("phoenix") is None:
        pytest.skip("the 'phoenix' extra is not installed")
    r = runner.invoke(app, ["import", "phoenix", url, "--questions", str(EX / "questions.csv"), "--map", MAP,
                            "--out", str(tmp_path / "imported")])
    assert r.exit_code == 2 and "ConnectError" in r.output and "Traceback" not in r.output
    assert "SECRET" not in r.output and "alice" not in r.output
    assert len(r.output.strip().splitlines()) == 1 and not (tmp_path / "imported").exists()


@pytest.mark.parametrize("blocked, args, extra", [
    ("mlflow", ["import", "mlflow", "http://127.0.0.1:9"], "mlflow"),
    ("phoenix.client", ["import", "phoenix", "http://127.0.0.1:9"], "phoenix"),
])
def test_a_missing_extra_is_named(blocked, args, extra, monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, blocked, None)  # as if not installed
    r = CliRunner().invoke(app, [*args, "--questions", str(EX / "questions.csv"), "--map", MAP, "--out",
                                 str(tmp_path / "run")])
    assert r.exit_code == 2 and f"needs the {extra!r} extra" in r.output and f"trek[{extra}]" in r.output
    assert f"trek import {args[1]}" in r.output and "Traceback" not in r.output


def test_a_missing_otlp_extra_is_named(traced, monkeypatch):  # noqa: F811
    import sys

    monkeypatch.setitem(sys.modules, "opentelemetry.proto.collector.trace.v1.trace_service_pb2", None)
    r = CliRunner().invoke(app, ["trace", "export", str(traced), "--to", "otlp", "http://127.0.0.1:9"])
    assert r.exit_code == 2 and "needs the 'otlp' extra" in r.output and "Traceback" not in r.output


def test_a_servers_credentials_never_reach_the_message_or_the_run(tmp_path, traced):  # noqa: F811
    import importlib.util
    import socket

    if importlib.util.find_spec("phoenix") is None:
        pytest.skip("the 'phoenix' extra is not installed")

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://trek-user:s3cret-token-42@127.0.0.1:{port}/?api_key=k3y-value-99"
    runner = CliRunner()
    r = runner.invoke(app, ["import", "phoenix", url, "--questions", str(EX / "questions.csv"), "--map", MAP,
                            "--out", str(tmp_path / "imported")])
    assert r.exit_code == 2 and "ConnectError" in r.output
    r2 = runner.invoke(app, ["trace", "export", str(traced), "--to", "phoenix", url])
    assert r2.exit_code != 0
    for out in (r.output, r2.output):
        assert f"127.0.0.1:{port}" in out
        assert "s3cret-token-42" not in out and "k3y-value-99" not in out and "trek-user" not in out


def test_phoenix_export_marks_labels_of_no_current_test_so_no_stale_value_stays(traced):  # noqa: F811
    from trek.trace.destinations import phoenix_untested
    from trek.trace.export import score_name
    from trek.trace.labels import LABELS

    items = scores(traced)
    rows = phoenix_untested(items, traced)
    answers = runs.load_answers(traced)
    root = {q: t.details["trace"]["root_span_id"] for q, t in answers.items()}
    by_span: dict[str, set[str]] = {}
    for r in rows:
        by_span.setdefault(r["span_id"], set()).add(r["name"])
        assert r["result"]["label"] == "not tested" and "score" not in r["result"]
    every = {score_name(lab) for lab in LABELS}
    assert root["lake-2"] not in by_span  # done: every label has its score
    assert by_span[root["lake-3"]] == every  # pending: no label tested now
    scored = {s.name for s in items if s.question_id == "lake-1"} - {"trektrace.status"}
    assert by_span[root["lake-1"]] == every - scored and scored
    # together with the scores, each traced case has exactly one annotation per label name
    names = {(r["span_id"], r["name"]) for r in rows + phoenix_annotations(items, traced)}
    assert names == {(root[q], n) for q in ("lake-1", "lake-2", "lake-3") for n in every | {"trektrace.status"}}
