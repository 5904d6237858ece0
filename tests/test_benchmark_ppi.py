"""benchmarks/ppi_coverage.py runs (few repetitions) and reads the embedded judge's rates from the
recording; its simulation measures what it says (a perfect judge's corrected interval covers)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def load():
    spec = importlib.util.spec_from_file_location("ppi_coverage", ROOT / "benchmarks" / "ppi_coverage.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
@pytest.mark.skipif(not (ROOT / "data" / "runs" / "wild" / "agentic" / "trace.jsonl").exists(),
                    reason="the recorded runs (data/runs) are absent")
def test_embedded_rates_come_from_the_recorded_audit():
    fp, fn, source = load().embedded_rates(ROOT)
    assert source.startswith("data/runs judge audit, Interpretation: FP ")
    assert 0 <= fp <= 1 and 0 <= fn <= 1 and fn > 0.5  # the embedded model rarely sees Interpretation


def test_simulation_of_a_perfect_and_a_useless_judge():
    mod = load()
    rng = np.random.default_rng(0)
    perfect = mod.simulate(rng, 500, 50, 0.3, 0.0, 0.0, reps=40)
    assert perfect["ppi_coverage"] == 100.0 and perfect["judge_coverage"] >= 90.0
    assert perfect["ppi_width"] < perfect["human_width"]
    useless = mod.simulate(rng, 500, 50, 0.3, 1.0, 1.0, reps=40)  # always wrong: 0 weight, the review alone
    assert useless["judge_coverage"] == 0.0
    assert useless["ppi_width"] == pytest.approx(useless["human_width"])


@pytest.mark.slow
def test_the_command_prints_its_table_and_verdict():
    out = subprocess.run([sys.executable, "benchmarks/ppi_coverage.py", "--reps", "30", "--big-n", "400", "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode in (0, 1), out.stderr[-2000:]
    d = json.loads(out.stdout)
    assert len(d["rows"]) == 27 and d["reps"] == 30
    assert (out.returncode == 0) == (d["ppi_coverage_ok"] and d["ppi_not_wider_ok"])
