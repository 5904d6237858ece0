"""The README section "TrekTrace in inspect_ai", run as written with bash: inspect eval of
trek/mini, inspect score with trek/trektrace, trek import inspect-ai, against the scripted fake
OpenAI server (no network; inspect's OpenAI-compatible provider reads FAKE_API_KEY/FAKE_BASE_URL)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from _inspect_plan import script  # noqa: E402

from trek import runs  # noqa: E402
from trek.testing.fake_openai import FakeOpenAIServer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
HEADING = "## TrekTrace in inspect_ai\n"


def readme_block() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    return section.split("```bash", 1)[1].split("```", 1)[0]


@pytest.mark.slow
def test_the_readme_inspect_commands_run_as_written(tmp_path):
    block = readme_block()
    commands = [ln.split()[0] for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]
    assert commands == ["inspect", "LOG=$(ls", "inspect", "trek"]
    bin_dir = str(Path(sys.executable).parent)
    with FakeOpenAIServer(script=script()) as srv:
        env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "FAKE_API_KEY": "x",
               "FAKE_BASE_URL": srv.base_url, "INSPECT_DISPLAY": "none"}
        env.pop("OPENAI_BASE_URL", None)
        res = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])
    # every sample of the eval is graded; every trektrace score is a label dict or unscored with a reason
    with zipfile.ZipFile(tmp_path / "scored.eval") as z:
        names = [n for n in z.namelist() if n.startswith("samples/")]
    assert len(names) == 6
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(tmp_path / "scored.eval"))
    for s in log.samples:
        assert s.scores["grade"].value in ("C", "I", "N")
        t = s.scores["trektrace"]
        if isinstance(t.value, dict):
            assert t.value["correct"] == 1 or sum(t.value.values()) >= 1
        else:
            assert math.isnan(t.value) and t.reason and t.explanation
    run = tmp_path / "runs" / "inspect-mini"
    grades = [json.loads(x) for x in (run / runs.GRADES).read_text().splitlines()]
    assert len(grades) == 6
    assert (run / runs.TRACE).exists()
