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
    out = subprocess.run([sys.executable, "benchmarks/ppi_coverage.py", "--part", "traced", "--reps", "30",
                          "--big-n", "400", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode in (0, 1), out.stderr[-2000:]
    d = json.loads(out.stdout)
    assert len(d["parts"]["traced"]["rows"]) == 27 and d["reps"] == 30
    assert (out.returncode == 0) == all(d["parts"]["traced"]["checks"].values()) == d["ok"]


def test_population_paired_and_design_parts_run_and_check_what_they_say():
    mod = load()
    rng = np.random.default_rng(1)
    pop = mod.population_part(rng, 2)
    assert len(pop["rows"]) == 2 * 5 * 3 * 3
    assert set(pop["checks"]) == {"ppi_mean covers >= 92% in every setting",
                                  "good judge: ppi_mean no wider than review-only on average"}
    assert pop["checks"]["ppi_mean covers >= 92% in every setting"] == (pop["min_coverage"] >= 92.0)
    paired = mod.paired_part(rng, 2)
    assert len(paired["rows"]) == 2 * 5 * 2 * 2
    null_fav = [r for r in paired["rows"] if r["difference"] == 0 and r["judge"] == "favours A"]
    assert paired["null_favour_max_rejects"] == max(r["rejects"] for r in null_fav)
    designs = mod.designs_part(rng, 2)
    assert {r["design"] for r in designs["rows"]} == {"stratified", "active", "active paired", "uniform",
                                                      "two judges disagree"}
    assert len(designs["disagreement_width_ratio"]) == len(mod.DESIGN_SIZES) * len(mod.DESIGN_FRACTIONS)


def test_the_favouring_judge_fools_mcnemar_and_not_the_corrected_test():
    # A few data sets of the paired part's hardest null setting, measured here directly.
    mod = load()
    rng = np.random.default_rng(3)
    ja, jb = mod.PAIRED_JUDGES["favours A"]
    judge_only = 0
    for _ in range(10):
        ya, yb = mod._pairs(rng, 1000, 0.5, 0.5)
        fa, fb = mod._judge(rng, ya, *ja), mod._judge(rng, yb, *jb)
        judge_only += mod.mcnemar(fa, fb).p < 0.05
        assert abs(ya.mean() - yb.mean()) < 0.06 and fa.mean() - fb.mean() > 0.06
    assert judge_only >= 9
