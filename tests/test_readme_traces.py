"""The README section "Trace your own agent from its traces", run as written: import the example
traces (OTLP in both dialects, a Langfuse export), add pages, grade, trace and export the labels
back in both formats, against the scripted fake OpenAI server (no network). Only the endpoint
options are added to the grade and trace commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_readme_import import readme_commands as readme_section_commands
from test_readme_import import script
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.testing.fake_openai import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[1]
SECTION = "## Trace your own agent from its traces\n"


def readme_commands() -> list[list[str]]:
    return readme_section_commands(SECTION)


def test_one_import_command_per_trace_format():
    formats = [c[1] for c in readme_commands() if c[0] == "import"]
    assert formats == ["otlp", "otlp", "langfuse"]


@pytest.mark.slow
def test_the_readme_trace_commands_run_as_written(tmp_path, monkeypatch):
    (tmp_path / "examples").symlink_to(REPO / "examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for var in ("OPENAI_BASE_URL", "TREK_PROMPTS", "TREK_PAGES"):
        monkeypatch.delenv(var, raising=False)
    commands = readme_commands()
    assert [c[0] for c in commands] == ["import"] * 3 + ["pages", "grade", "trace", "trace", "trace"]
    runner = CliRunner()
    with FakeOpenAIServer(script=script()) as srv:
        for args in commands:
            if args[0] == "grade":
                args = [*args, "--judge-base-url", srv.base_url, "--no-progress"]
            if args[0] == "trace" and args[1] != "export":
                args = [*args, "--judge-base-url", srv.base_url, "--base-url", srv.base_url, "--no-progress"]
            r = runner.invoke(app, args)
            assert r.exit_code == 0, (args, r.output)
    # the three imports of one run hold the same trajectories
    def same(name: str) -> list[dict]:
        out = []
        for t in runs.load_answers(tmp_path / "runs" / name).values():
            d = t.model_dump(exclude={"created_at", "source", "system"})
            out.append(d)
        return out

    assert same("otel") == same("openinference") == same("langfuse")
    traced = [json.loads(x) for x in (tmp_path / "runs/langfuse/trace.jsonl").read_text().splitlines()]
    assert [(t["question_id"], t["status"], sorted(t["labels"])) for t in traced] == [
        ("lake-2", "done", ["Distraction", "Retrieval"])]
    trace_id = runs.load_answers(tmp_path / "runs/langfuse")["lake-2"].source.record_id
    rows = [json.loads(x) for x in (tmp_path / "runs/langfuse-scores.jsonl").read_text().splitlines()]
    assert {r["traceId"] for r in rows} == {trace_id}
    assert {r["name"]: r["value"] for r in rows} == {
        "trektrace.pre_retrieval": 0, "trektrace.retrieval": 1, "trektrace.interpretation": 0,
        "trektrace.distraction": 1, "trektrace.randomness": 0, "trektrace.status": "done"}
    req = json.loads((tmp_path / "runs/langfuse-evaluations.json").read_text())
    (span,) = req["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert span["traceId"] == trace_id
    assert len(span["events"]) == 6
