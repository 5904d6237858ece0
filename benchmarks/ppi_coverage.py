"""Are judge-corrected label shares valid? Coverage and width of three intervals, simulated.

    python benchmarks/ppi_coverage.py [--reps 1000] [--big-n 2000] [--seed 41] [--json]

For each setting a population of ``--big-n`` traced cases gets true 0/1 labels at a prevalence,
a judge labels every case with a false-positive rate FP and a false-negative rate FN, and a
uniformly random sample of n cases is "reviewed" (its true labels read). Three 95% intervals of
the share among the N cases (the number Figure 2 reports) are compared over ``--reps``
repetitions:

* judge only — the Wilson interval of the judge's share over all N cases;
* human only — the Wilson interval of the true share over the n reviewed cases;
* PPI — :func:`trek.stats.prediction_powered_share` (PPI++ weight) from both.

Judges: ``good`` (FP 3%, FN 7%, about kappa 0.9 at a 30% share), ``fair`` (FP 10%, FN 25%) and
``embedded`` with the rates the recorded judge audit shows for the embedded model on the label it
gets most wrong that still occurs in over a third of the cases (Interpretation: read from
``data/runs/wild/*/trace.jsonl``, exact judge as the truth; the fixed fallback below when the
recording is absent). Prints one row per setting: coverage (%) and mean width (percentage
points) of each interval, and whether PPI reaches 93% coverage and is no wider than human only
on average. Fixed seed: the same command prints the same table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from trek.stats import prediction_powered_share, wilson_ci

PREVALENCES = (0.05, 0.2, 0.5)
SAMPLE_SIZES = (30, 100, 300)
#: The embedded model's Interpretation rates in the recording of 2026-12 (4/28 false positives,
#: 42/42 false negatives), used when data/runs is absent.
EMBEDDED_FALLBACK = (4 / 28, 42 / 42)
LABEL = "Interpretation"


def embedded_rates(root: Path) -> tuple[float, float, str]:
    """(FP, FN, source) of the embedded model as TrekTrace judge on ``LABEL``, from the recording."""
    from trek.trace.pipeline import load_trace
    from trek.trace.shares import judge_labels

    fp = fn = neg = pos = 0
    for d in sorted((root / "data" / "runs" / "wild").glob("*/trace.jsonl")):
        recs = load_trace(d.parent)
        exact, audit = judge_labels(recs, "trace"), judge_labels(recs, "audit")
        for q, truth in exact.items():
            t, j = LABEL in truth, LABEL in audit[q]
            pos += t
            neg += not t
            fn += t and not j
            fp += j and not t
    if pos == 0 or neg == 0:
        return (*EMBEDDED_FALLBACK, "fallback (no recording)")
    return fp / neg, fn / pos, f"data/runs judge audit, {LABEL}: FP {fp}/{neg}, FN {fn}/{pos}"


def simulate(rng: np.random.Generator, big_n: int, n: int, prevalence: float, fp: float, fn: float,
             reps: int) -> dict[str, float]:
    hits = {"judge": 0, "human": 0, "plain": 0, "ppi": 0}
    width = dict.fromkeys(hits, 0.0)
    for _ in range(reps):
        truth = rng.random(big_n) < prevalence
        u = rng.random(big_n)
        judge = np.where(truth, u >= fn, u < fp).astype(int)
        share = truth.mean()
        idx = rng.choice(big_n, size=n, replace=False)
        y = truth[idx].astype(int)
        intervals = {
            "judge": wilson_ci(int(judge.sum()), big_n),
            "human": wilson_ci(int(y.sum()), n),
            "plain": prediction_powered_share(judge, judge[idx], y, small_sample=False)[1:],
            "ppi": prediction_powered_share(judge, judge[idx], y)[1:],
        }
        for k, (low, high) in intervals.items():
            hits[k] += low <= share <= high
            width[k] += high - low
    out = {f"{k}_coverage": 100.0 * hits[k] / reps for k in hits}
    out.update({f"{k}_width": 100.0 * width[k] / reps for k in width})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--big-n", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    e_fp, e_fn, source = embedded_rates(root)
    judges = {"good": (0.03, 0.07), "fair": (0.10, 0.25), "embedded": (e_fp, e_fn)}
    rng = np.random.default_rng(a.seed)
    rows = []
    t0 = time.perf_counter()
    for name, (fp, fn) in judges.items():
        for p in PREVALENCES:
            for n in SAMPLE_SIZES:
                r = simulate(rng, a.big_n, n, p, fp, fn, a.reps)
                rows.append({"judge": name, "fp": fp, "fn": fn, "prevalence": p, "n": n, "N": a.big_n, **r})
    seconds = time.perf_counter() - t0
    ok_cov = all(r["ppi_coverage"] >= 93.0 for r in rows)
    ok_width = all(r["ppi_width"] <= r["human_width"] for r in rows)
    if a.json:
        print(json.dumps({"rows": rows, "embedded_source": source, "reps": a.reps, "seed": a.seed,
                          "ppi_coverage_ok": ok_cov, "ppi_not_wider_ok": ok_width, "seconds": seconds}, indent=1))
    else:
        print(f"{a.reps} repetitions per setting, N = {a.big_n}, seed {a.seed}; embedded judge: {source}")
        print("coverage (%) of the share among the N cases and mean width (points) of 95% intervals")
        head = (f"{'judge':9} {'FP':>5} {'FN':>5} {'prev':>5} {'n':>4} | {'judge cov':>9} {'width':>6} | "
                f"{'human cov':>9} {'width':>6} | {'plain cov':>9} {'width':>6} | {'PPI cov':>7} {'width':>6}")
        print(head)
        print("-" * len(head))
        for r in rows:
            print(f"{r['judge']:9} {r['fp']:5.2f} {r['fn']:5.2f} {r['prevalence']:5.2f} {r['n']:4d} | "
                  f"{r['judge_coverage']:9.1f} {r['judge_width']:6.1f} | {r['human_coverage']:9.1f} "
                  f"{r['human_width']:6.1f} | {r['plain_coverage']:9.1f} {r['plain_width']:6.1f} | "
                  f"{r['ppi_coverage']:7.1f} {r['ppi_width']:6.1f}")
        print(f"PPI coverage >= 93% at every setting: {'yes' if ok_cov else 'NO'}; "
              f"PPI never wider than human only on average: {'yes' if ok_width else 'NO'} ({seconds:.0f} s)")
    return 0 if ok_cov and ok_width else 1


if __name__ == "__main__":
    sys.exit(main())
