"""A command starts without the analysis stack: numpy, pandas, matplotlib, scipy, seaborn and
statsmodels are imported only by the code that uses them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ["numpy", "pandas", "matplotlib", "scipy", "seaborn", "statsmodels"]

# argv[1]: the command's arguments, argv[2]: modules to import first (to show the probe works)
PROBE = """
import json, sys
args, first = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for m in first:
    __import__(m)
sys.argv = ["trek", *args]
from trek.cli import app
try:
    app()
except SystemExit:
    pass
print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))
"""


def heavy_modules(args: list[str], first: list[str] = ()) -> list[str]:
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args), json.dumps(list(first))],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [m for m in json.loads(out.stdout.strip().splitlines()[-1]) if m in HEAVY]


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["grade", "--help"], ["llm", "run", "--help"]])
def test_a_command_starts_without_the_analysis_stack(args):
    assert heavy_modules(args) == []


def test_the_probe_sees_a_heavy_import():
    assert heavy_modules(["--version"], first=["pandas"]) == ["numpy", "pandas"]  # pandas brings numpy


def test_a_one_request_llm_run_loads_neither_numpy_nor_the_tokenizer(tmp_path):
    """`trek llm run` for a model without a price needs no token count (so no tokenizer) and no
    numpy; the run itself is real (one request to the fake server, answered)."""
    from trek.testing.fake_openai import FakeOpenAIServer

    req = tmp_path / "requests.jsonl"
    req.write_text(json.dumps({"id": "q1", "messages": [{"role": "user", "content": "hello"}]}) + "\n")
    with FakeOpenAIServer() as srv:
        args = ["llm", "run", str(req), "--out", str(tmp_path / "out.jsonl"), "--base-url", srv.base_url,
                "--model", "no-price-model", "--no-progress"]
        probe = PROBE.replace("m.split('.')[0] for m in sys.modules", "m for m in sys.modules")
        out = subprocess.run([sys.executable, "-c", probe, json.dumps(args), "[]"], capture_output=True, text=True,
                             timeout=120, env={**__import__("os").environ, "OPENAI_API_KEY": "k"})
    assert out.returncode == 0, out.stderr
    mods = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert json.loads((tmp_path / "out.jsonl").read_text())["status"] == "ok"
    assert "openai" in mods  # the probe sees what the run imported
    assert not {"numpy", "bpe_openai", "tqdm", "tenacity", "httpx"} & mods, sorted(
        {"numpy", "bpe_openai", "tqdm", "tenacity", "httpx"} & mods)
