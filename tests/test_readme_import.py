"""The README section "Trace your own agent", run as written: import every example log,
validate, add pages, grade with the generic judge and trace, against the scripted fake OpenAI
server (no network). Only the endpoint options are added to the grade and trace commands."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trek.cli import app
from trek.testing.fake_openai import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[1]
EVALUATED = "gpt-5-mini-2025-08-07"  # the model the Responses example names


def readme_commands(heading: str = "## Trace your own agent\n") -> list[list[str]]:
    """The commands of the first bash block of the README section under ``heading``."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    env: dict[str, str] = {}
    out = []
    for raw in block.splitlines():
        line = re.sub(r"\s+#.*$", "", raw).strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'(\w+)="(.*)"', line)
        if m:
            env[m.group(1)] = m.group(2)
            continue
        for k, v in env.items():
            line = line.replace(f"${k}", v)
        words = shlex.split(line)
        assert words[0] == ".venv/bin/trek", line  # as every other block of the README
        out.append(words[1:])
    return out


def script() -> list[dict]:
    def rule(model: str, step: str, reply: dict, extra: str = "") -> dict:
        return {"model": model, "any_pattern": rf"\[TrekTrace: {step}\]{extra}", "reply": json.dumps(reply)}

    return [
        {"model": "gpt-4.1-mini", "pattern": r"(?s)Harbor Bridge.*Answer to grade: The Harbor Bridge has four",
         "reply": "It names four lanes; the reference says six.\nverdict: incorrect"},
        {"model": "gpt-4.1-mini", "reply": "verdict: correct"},
        rule("gpt-5.4", "answer check", {"correct": True, "reason": "Same as the reference."},
             r"[\s\S]*Candidate answer: six\n"),
        rule("gpt-5.4", "answer check", {"correct": False, "reason": "Not the reference."}),
        rule("gpt-5.4", "key evidence", {"key_evidence": "The bridge opened with six lanes.",
                                          "gold_evidence_urls": ["https://harbor-city.example/bridge-opening"]}),
        rule("gpt-5.4", "evidence match", {"evidence_match": False, "retrieved_key_evidence": "",
                                            "equivalent_urls": [], "reason": "The plans page gives four lanes."}),
        rule("gpt-5.4", "query adequacy", {"query_adequate": True, "reason": "It asks for the lane count."}),
        rule(EVALUATED, "gold-only probe", {"answer": "six", "used_urls": [], "reasoning": "The page says six."}),
        rule(EVALUATED, "gold-plus-noise probe", {"answer": "four", "used_urls": [], "reasoning": "Old plans."}),
    ]


@pytest.mark.slow
def test_the_readme_commands_run_as_written(tmp_path, monkeypatch):
    (tmp_path / "examples").symlink_to(REPO / "examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("TREK_PROMPTS", raising=False)
    monkeypatch.delenv("TREK_PAGES", raising=False)
    commands = readme_commands()
    assert [c[0] for c in commands] == ["import"] * 5 + ["validate", "pages", "grade", "trace"]
    runner = CliRunner()
    with FakeOpenAIServer(script=script()) as srv:
        for args in commands:
            if args[0] == "grade":
                args = [*args, "--judge-base-url", srv.base_url, "--no-progress"]
            if args[0] == "trace":
                args = [*args, "--judge-base-url", srv.base_url, "--base-url", srv.base_url, "--no-progress"]
            r = runner.invoke(app, args)
            assert r.exit_code == 0, (args, r.output)
    for name in ("responses", "claude", "chat", "gemini", "inspect"):
        assert (tmp_path / "runs" / name / "answers.jsonl").exists()
    grades = [json.loads(x) for x in (tmp_path / "runs/responses/grades.jsonl").read_text().splitlines()]
    assert {g["question_id"]: g["outcome"] for g in grades} == {"lake-1": "correct", "lake-2": "incorrect",
                                                               "lake-3": "correct"}
    assert {g["grader"] for g in grades} == {"generic"}
    traced = [json.loads(x) for x in (tmp_path / "runs/responses/trace.jsonl").read_text().splitlines()]
    assert [t["question_id"] for t in traced] == ["lake-2"]
    assert traced[0]["status"] == "done"
    assert sorted(traced[0]["labels"]) == ["Distraction", "Retrieval"]
    assert traced[0]["retrieved_urls"] == ["https://harbor-city.example/old-plans"]
