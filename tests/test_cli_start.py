"""A command starts without the analysis stack: pandas, matplotlib, scipy, seaborn and
statsmodels are imported only by the code that uses them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ["pandas", "matplotlib", "scipy", "seaborn", "statsmodels"]

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
    assert heavy_modules(["--version"], first=["pandas"]) == ["pandas"]
