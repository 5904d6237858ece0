"""A newcomer's slips get one `error:` line that names the thing, and the documented exit code."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trek.cli import app

REPO = Path(__file__).resolve().parents[1]


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_a_busy_port_is_one_line_and_exit_2(capsys):
    from trek.testing.fake_openai import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert main(["--port", str(port), "--script", "demo"], prog="trek fake-server") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: cannot listen on 127.0.0.1:{port}: "), err
    assert "--port" in err and "kill" in err


def test_an_unknown_question_set_is_named():
    r = invoke("wild", "run", "--questions", "mni", "--model", "m", "--run", "x")
    assert r.exit_code == 2
    assert "error: --questions mni: no such question set; choose wild or mini (did you mean mini?)" in r.output
    assert "search backend" not in r.output


def test_trace_on_a_folder_without_run_json_says_so(tmp_path):
    r = invoke("trace", str(tmp_path), "--judge", "oracle", "--no-progress")
    assert r.exit_code == 2
    assert f"{tmp_path}: no run.json there" in r.output and "--model" in r.output


@pytest.mark.parametrize(("args", "meant"), [
    (["wild", "run", "--questions", "mini", "--model", "m", "--out", "x"], "--run"),
    (["import", "inspect-ai", "x.eval", "--run", "x"], "--out"),
])
def test_a_flag_under_another_name_suggests_the_commands_own(args, meant):
    r = invoke(*args)
    assert r.exit_code == 2
    assert f"(Possible options: {meant})" in r.output, r.output


@pytest.mark.parametrize(("args", "flags"), [
    (["grade", "runs/x"], "--audit-judge, --judge"),
    (["trace", "runs/x"], "--analysis-judge, --audit-judge, --diagnostic-judge, --judge"),
    (["trace", "verify", "runs/x"], "--analysis-judge, --diagnostic-judge, --judge"),
])
def test_judges_in_the_plural_names_the_judge_flags_the_command_has_and_the_cascade(args, flags):
    r = invoke(*args, "--judges", "exact,gpt-4.1-mini")
    assert r.exit_code == 2
    error = next(x for x in r.output.splitlines() if x.startswith("Error:"))  # one line
    assert error.startswith("Error: No such option: --judges. ") and "--judge SPEC" in error, error
    assert "exact,MODEL" in error and "docs/judges.md" in error and (REPO / "docs" / "judges.md").exists()
    assert error.endswith(f"(Possible options: {flags})"), error


def test_a_flag_without_a_hint_keeps_click_s_own_words():
    r = invoke("wild", "run", "--judges", "m")  # no judge here: nothing to point to
    assert r.exit_code == 2 and "No such option: --judges" in r.output and "docs/judges.md" not in r.output


def test_grade_on_inspect_logs_points_to_the_import(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "2026-01-01T00-00-00_trek-mini_abc.eval").write_bytes(b"PK")
    r = invoke("grade", str(logs), "--judge", "oracle")
    assert r.exit_code == 2
    assert "hint:" in r.output and "trek import inspect-ai" in r.output and "abc.eval" in r.output
    r = invoke("grade", str(tmp_path / "nothing-here"), "--judge", "oracle")
    assert r.exit_code == 2 and "hint:" not in r.output  # no hint where there are no logs


@pytest.mark.slow
def test_sigterm_on_wild_run_names_what_was_kept_and_how_to_resume(tmp_path):
    from trek.testing.fake_openai import FakeOpenAIServer

    run = tmp_path / "runs" / "demo"
    cmd = [os.path.join(os.path.dirname(sys.executable), "trek"), "wild", "run", "--questions", "mini",
           "--model", "demo", "--search", "local", "--limit", "12", "--run", str(run), "--no-progress",
           "--max-connections", "1"]
    with FakeOpenAIServer(script="demo", latency=0.05) as srv:
        env = {**os.environ, "OPENAI_BASE_URL": srv.base_url, "OPENAI_API_KEY": "demo"}
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            srv.wait_for(lambda s: s["requests"] >= 8, timeout=120)  # a few questions answered, more under way
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        line = err.strip().splitlines()[-1]
        m = re.fullmatch(r"interrupted: (\d+) of 12 answers kept in (.+); resume with the same command: (.+)", line)
        assert m, err
        records = [json.loads(x) for x in (run / "answers.jsonl").read_text().splitlines()]
        assert int(m.group(1)) == len({r["question_id"] for r in records if r["status"] != "pending"}) >= 1
        assert m.group(2) == str(run / "answers.jsonl") and "Traceback" not in err
        assert m.group(3).endswith(" ".join(cmd[1:]))
        # the command it names finishes the run
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert len({json.loads(x)["question_id"] for x in (run / "answers.jsonl").read_text().splitlines()}) == 12


def test_label_counts_print_in_c4_order():
    from collections import Counter

    from trek.trace.labels import LABELS
    from trek.trace.pipeline import _in_label_order

    counts = Counter({"Randomness": 1, "Interpretation": 4, "Pre-retrieval": 2, "Other": 1})
    assert _in_label_order(counts) == [x for x in LABELS if x in counts] + ["Other"]
    assert _in_label_order(counts)[:3] == ["Pre-retrieval", "Interpretation", "Randomness"]
