"""Are judge-corrected shares, rates and paired differences valid? Coverage and width, simulated.

    python benchmarks/ppi_coverage.py [--part traced|population|paired|designs|all] [--reps 1000]
                                      [--big-n 2000] [--seed 41] [--json]

Four parts (``--part all``, the default, runs them in turn; each prints its table and its
acceptance lines, and the exit code is 0 only when every check of the parts run holds):

* ``traced`` — the share among the N traced cases (below);
* ``population`` — :func:`trek.stats.ppi_mean`, the population rate (:func:`population_part`);
* ``paired`` — :func:`trek.stats.ppi_paired_difference` (:func:`paired_part`);
* ``designs`` — the stratified form and the inverse-probability forms (:func:`designs_part`).

**traced.**
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

from trek.stats import (
    mcnemar,
    ppi_mean,
    ppi_mean_ipw,
    ppi_paired_difference,
    ppi_paired_difference_ipw,
    prediction_powered_share,
    wilson_ci,
)

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



# -- the population rate -------------------------------------------------------------------------------------
POP_SIZES = (200, 1000)
POP_FRACTIONS = (0.05, 0.1, 0.25, 0.5, 0.9)
POP_ERRORS = (0.02, 0.1, 0.3)
POP_RATES = (0.1, 0.3, 0.5)


def _judge(rng: np.random.Generator, truth: np.ndarray, fp: float, fn: float) -> np.ndarray:
    u = rng.random(truth.size)
    return np.where(truth == 1, u >= fn, u < fp).astype(int)


def population_part(rng: np.random.Generator, reps: int) -> dict:
    """:func:`ppi_mean` against the population rate.

    Each repetition draws N cases afresh from a population with failure-label rate p (so the N
    cases' own sampling counts), a judge with false-positive and false-negative rate e labels
    them, and a uniformly random n of them are reviewed (true labels read). Per setting (N in
    POP_SIZES, n/N in POP_FRACTIONS, e in POP_ERRORS, p in POP_RATES): coverage of p by the 95%
    interval of ``ppi_mean``, of the review-only Wilson interval and of
    ``prediction_powered_share`` (the traced-share interval read as one for p), and mean widths.
    Acceptance (issue 51): ppi_mean covers >= 92% in every setting, and with the good judge
    (e = 2%) its mean width is no more than the review-only interval's."""
    rows = []
    for big_n in POP_SIZES:
        for frac in POP_FRACTIONS:
            n = max(2, int(round(frac * big_n)))
            for err in POP_ERRORS:
                for p in POP_RATES:
                    hits = {"ppi": 0, "human": 0, "traced": 0}
                    width = dict.fromkeys(hits, 0.0)
                    for _ in range(reps):
                        truth = (rng.random(big_n) < p).astype(int)
                        judge = _judge(rng, truth, err, err)
                        idx = rng.permutation(big_n)
                        rev, unrev = idx[:n], idx[n:]
                        y = truth[rev]
                        got = {"ppi": ppi_mean(judge[unrev], judge[rev], y)[1:],
                               "human": wilson_ci(int(y.sum()), n),
                               "traced": prediction_powered_share(judge, judge[rev], y)[1:]}
                        for k, (low, high) in got.items():
                            hits[k] += low <= p <= high
                            width[k] += high - low
                    rows.append({"N": big_n, "n": n, "error": err, "rate": p,
                                 **{f"{k}_coverage": 100.0 * hits[k] / reps for k in hits},
                                 **{f"{k}_width": 100.0 * width[k] / reps for k in width}})
    worst = min(rows, key=lambda r: r["ppi_coverage"])
    good = [r for r in rows if r["error"] == min(POP_ERRORS)]
    checks = {
        "ppi_mean covers >= 92% in every setting": worst["ppi_coverage"] >= 92.0,
        "good judge: ppi_mean no wider than review-only on average": all(r["ppi_width"] <= r["human_width"]
                                                                          for r in good),
    }
    return {"rows": rows, "checks": checks, "min_coverage": worst["ppi_coverage"], "worst": worst,
            "traced_min_coverage": min(r["traced_coverage"] for r in rows),
            "traced_below_93": sum(r["traced_coverage"] < 93.0 for r in rows)}


def print_population(out: dict) -> None:
    print("population rate: coverage (%) of p and mean width (points) of 95% intervals; e = the judge's FP and FN rate")
    head = (f"{'N':>5} {'n':>4} {'e':>5} {'p':>4} | {'ppi_mean':>8} {'width':>6} | {'review':>6} {'width':>6} | "
            f"{'traced-share fn':>15} {'width':>6}")
    print(head)
    print("-" * len(head))
    for r in out["rows"]:
        print(f"{r['N']:5d} {r['n']:4d} {r['error']:5.2f} {r['rate']:4.1f} | {r['ppi_coverage']:8.1f} "
              f"{r['ppi_width']:6.1f} | {r['human_coverage']:6.1f} {r['human_width']:6.1f} | "
              f"{r['traced_coverage']:15.1f} {r['traced_width']:6.1f}")
    print(f"ppi_mean: lowest coverage {out['min_coverage']:.1f}% (N {out['worst']['N']}, n {out['worst']['n']}, "
          f"e {out['worst']['error']}, p {out['worst']['rate']}); the traced-share function read as a population "
          f"interval: lowest {out['traced_min_coverage']:.1f}%, {out['traced_below_93']} of {len(out['rows'])} "
          "settings below 93%")


# -- paired differences --------------------------------------------------------------------------------------
#: (FP, FN) of the judge for system A and for system B.
PAIRED_JUDGES = {"fair": ((0.10, 0.10), (0.10, 0.10)), "favours A": ((0.25, 0.05), (0.05, 0.05))}
PAIRED_RATES = ((0.5, 0.5), (0.6, 0.5))  # (A's accuracy, B's): no difference, and 10 points


def _pairs(rng: np.random.Generator, big_n: int, pa: float, pb: float, extra: float = 0.1):
    """Two systems' 0/1 correctness on the same questions, positively correlated (P(both) = pa pb + extra)."""
    p11 = pa * pb + extra
    k = rng.choice(4, size=big_n, p=[p11, pa - p11, pb - p11, 1 - pa - pb + p11])
    return (k <= 1).astype(int), ((k == 0) | (k == 2)).astype(int)


def paired_part(rng: np.random.Generator, reps: int) -> dict:
    """:func:`ppi_paired_difference` against the population difference of two systems' accuracies.

    Per setting (N in POP_SIZES, n/N in POP_FRACTIONS, a judge of PAIRED_JUDGES, accuracies of
    PAIRED_RATES): coverage of the true difference by the 95% interval, the share of data sets
    where its p-value is below 5%, and the same for the judge-only exact McNemar test on all N.
    Acceptance (issue 51): coverage >= 93% in every setting; with no true difference and the
    judge that favours A, ppi_paired_difference rejects in <= 8% of data sets in every setting
    and the judge-only McNemar in >= 50%."""
    rows = []
    for big_n in POP_SIZES:
        for frac in POP_FRACTIONS:
            n = max(2, int(round(frac * big_n)))
            for name, (ja, jb) in PAIRED_JUDGES.items():
                for pa, pb in PAIRED_RATES:
                    cover = reject = judge_reject = 0
                    width = 0.0
                    for _ in range(reps):
                        ya, yb = _pairs(rng, big_n, pa, pb)
                        fa, fb = _judge(rng, ya, *ja), _judge(rng, yb, *jb)
                        idx = rng.permutation(big_n)
                        rev, unrev = idx[:n], idx[n:]
                        _, low, high, p = ppi_paired_difference(fa[unrev], fb[unrev], fa[rev], fb[rev], ya[rev], yb[rev])
                        cover += low <= pa - pb <= high
                        reject += p < 0.05
                        width += high - low
                        judge_reject += mcnemar(fa, fb).p < 0.05
                    rows.append({"N": big_n, "n": n, "judge": name, "difference": round(pa - pb, 3),
                                 "coverage": 100.0 * cover / reps, "rejects": 100.0 * reject / reps,
                                 "judge_only_rejects": 100.0 * judge_reject / reps, "width": 100.0 * width / reps})
    null_fav = [r for r in rows if r["difference"] == 0 and r["judge"] == "favours A"]
    checks = {
        "ppi_paired_difference covers >= 93% in every setting": min(r["coverage"] for r in rows) >= 93.0,
        "no difference, judge favours A: ppi_paired_difference rejects <= 8%": max(r["rejects"] for r in null_fav) <= 8.0,
        "no difference, judge favours A: judge-only McNemar rejects >= 50%":
            min(r["judge_only_rejects"] for r in null_fav) >= 50.0,
    }
    return {"rows": rows, "checks": checks, "min_coverage": min(r["coverage"] for r in rows),
            "null_favour_max_rejects": max(r["rejects"] for r in null_fav),
            "null_favour_min_judge_only_rejects": min(r["judge_only_rejects"] for r in null_fav)}


def print_paired(out: dict) -> None:
    print("paired difference (A - B): coverage (%), rejections at 5% (%), mean width (points)")
    head = (f"{'N':>5} {'n':>4} {'judge':>9} {'diff':>5} | {'coverage':>8} {'rejects':>7} {'width':>6} | "
            f"{'judge-only McNemar rejects':>26}")
    print(head)
    print("-" * len(head))
    for r in out["rows"]:
        print(f"{r['N']:5d} {r['n']:4d} {r['judge']:>9} {r['difference']:5.2f} | {r['coverage']:8.1f} "
              f"{r['rejects']:7.1f} {r['width']:6.1f} | {r['judge_only_rejects']:26.1f}")
    print(f"lowest coverage {out['min_coverage']:.1f}%; no difference with the judge favouring A: "
          f"ppi_paired_difference rejects at most {out['null_favour_max_rejects']:.1f}%, the judge-only McNemar "
          f"at least {out['null_favour_min_judge_only_rejects']:.1f}%")


# -- review designs ------------------------------------------------------------------------------------------
#: Three datasets: share of the N cases, failure-label rate, judge error (FP = FN).
STRATA = {"a": (0.5, 0.1, 0.05), "b": (0.3, 0.3, 0.15), "c": (0.2, 0.5, 0.3)}
DESIGN_SIZES = (300, 1000)
DESIGN_FRACTIONS = (0.1, 0.25, 0.5)


def designs_part(rng: np.random.Generator, reps: int) -> dict:
    """The stratified form and the inverse-probability forms, against the population quantity.

    * ``stratified``: the N cases fall into STRATA (fixed sizes; each stratum with its own rate
      and judge error); n drawn stratified by proportional allocation; :func:`ppi_mean` with the
      strata. The quantity is ``sum_k (N_k / N) p_k``.
    * ``active``: one population (rate 0.3, judge error 0.15); each case reviewed independently
      with probability twice as high where the judge says 1 (expected n = n/N * N);
      :func:`ppi_mean_ipw`.
    * ``active paired``: two systems (accuracies 0.5 and 0.5, the judge favouring A), questions
      where the judge's grades of A and B differ reviewed 4 times as often;
      :func:`ppi_paired_difference_ipw` (coverage and rejections of the null).
    * does an active design pay? One population (rate 0.3) and two independent judges (error 0.15
      each way): ``uniform`` reviews n cases uniformly and corrects the first judge with
      :func:`ppi_mean`; ``two judges disagree`` reviews the cases where the two judges disagree 4
      times as often (expected n) and corrects the first judge with :func:`ppi_mean_ipw`.

    Acceptance (this benchmark's own bar, beside issue 51's for the plain forms): coverage >= 92%
    in every setting; the disagreement design's mean width is reported beside the uniform one's."""
    rows = []
    names = sorted(STRATA)
    for big_n in DESIGN_SIZES:
        sizes = {k: int(round(STRATA[k][0] * big_n)) for k in names}
        target = sum(sizes[k] * STRATA[k][1] for k in names) / sum(sizes.values())
        for frac in DESIGN_FRACTIONS:
            n = int(round(frac * big_n))
            alloc = {k: max(2, int(round(frac * sizes[k]))) for k in names}
            cover = {"stratified": 0, "active": 0, "active paired": 0, "uniform": 0, "two judges disagree": 0}
            width = dict.fromkeys(cover, 0.0)
            reject = 0
            for _ in range(reps):
                f_u, f_n, y_n, s_u, s_n = [], [], [], [], []
                for k in names:
                    truth = (rng.random(sizes[k]) < STRATA[k][1]).astype(int)
                    judge = _judge(rng, truth, STRATA[k][2], STRATA[k][2])
                    idx = rng.permutation(sizes[k])
                    rev, unrev = idx[:alloc[k]], idx[alloc[k]:]
                    f_u += judge[unrev].tolist()
                    f_n += judge[rev].tolist()
                    y_n += truth[rev].tolist()
                    s_u += [k] * unrev.size
                    s_n += [k] * rev.size
                _, low, high = ppi_mean(f_u, f_n, y_n, strata_unreviewed=s_u, strata_reviewed=s_n)
                cover["stratified"] += low <= target <= high
                width["stratified"] += high - low
                # active: oversample the judge's positives
                truth = (rng.random(big_n) < 0.3).astype(int)
                judge = _judge(rng, truth, 0.15, 0.15)
                weight = np.where(judge == 1, 2.0, 1.0)
                pi = np.minimum(1.0, n * weight / weight.sum())
                reviewed = rng.random(big_n) < pi
                if reviewed.sum() >= 2:
                    _, low, high = ppi_mean_ipw(judge, np.where(reviewed, truth, np.nan), pi)
                else:
                    low, high = 0.0, 1.0
                cover["active"] += low <= 0.3 <= high
                width["active"] += high - low
                # active paired: oversample the questions where the judge's grades of A and B differ
                ya, yb = _pairs(rng, big_n, 0.5, 0.5)
                ja, jb = PAIRED_JUDGES["favours A"]
                fa, fb = _judge(rng, ya, *ja), _judge(rng, yb, *jb)
                weight = np.where(fa != fb, 4.0, 1.0)
                pi = np.minimum(1.0, n * weight / weight.sum())
                reviewed = rng.random(big_n) < pi
                if reviewed.sum() >= 2:
                    _, low, high, p = ppi_paired_difference_ipw(fa, fb, np.where(reviewed, ya, np.nan),
                                                                np.where(reviewed, yb, np.nan), pi)
                else:
                    low, high, p = -1.0, 1.0, 1.0
                cover["active paired"] += low <= 0.0 <= high
                width["active paired"] += high - low
                reject += p < 0.05
                # does it pay: uniform against oversampling where two judges disagree
                truth = (rng.random(big_n) < 0.3).astype(int)
                j1, j2 = _judge(rng, truth, 0.15, 0.15), _judge(rng, truth, 0.15, 0.15)
                idx = rng.permutation(big_n)
                _, low, high = ppi_mean(j1[idx[n:]], j1[idx[:n]], truth[idx[:n]])
                cover["uniform"] += low <= 0.3 <= high
                width["uniform"] += high - low
                weight = np.where(j1 != j2, 4.0, 1.0)
                pi = np.minimum(1.0, n * weight / weight.sum())
                reviewed = rng.random(big_n) < pi
                if reviewed.sum() >= 2:
                    _, low, high = ppi_mean_ipw(j1, np.where(reviewed, truth, np.nan), pi)
                else:
                    low, high = 0.0, 1.0
                cover["two judges disagree"] += low <= 0.3 <= high
                width["two judges disagree"] += high - low
            for k in cover:
                rows.append({"design": k, "N": big_n, "n": n, "coverage": 100.0 * cover[k] / reps,
                             "width": 100.0 * width[k] / reps,
                             "rejects": 100.0 * reject / reps if k == "active paired" else float("nan")})
    checks = {"designs cover >= 92% in every setting": min(r["coverage"] for r in rows) >= 92.0}
    pays = [(u["width"], d["width"]) for u, d in zip([r for r in rows if r["design"] == "uniform"],
                                                     [r for r in rows if r["design"] == "two judges disagree"],
                                                     strict=True)]
    return {"rows": rows, "checks": checks, "min_coverage": min(r["coverage"] for r in rows),
            "disagreement_width_ratio": [round(d / u, 3) for u, d in pays]}


def print_designs(out: dict) -> None:
    print("review designs: coverage (%) and mean width (points); rejections (%) of the true null for the paired design")
    head = f"{'design':>19} {'N':>5} {'n':>4} | {'coverage':>8} {'width':>6} {'rejects':>7}"
    print(head)
    print("-" * len(head))
    for r in out["rows"]:
        rej = "" if r["rejects"] != r["rejects"] else f"{r['rejects']:7.1f}"
        print(f"{r['design']:>19} {r['N']:5d} {r['n']:4d} | {r['coverage']:8.1f} {r['width']:6.1f} {rej:>7}")
    print(f"lowest coverage {out['min_coverage']:.1f}%; width of the two-judges-disagree design over the uniform "
          f"one's, per setting: {', '.join(f'{x:.2f}' for x in out['disagreement_width_ratio'])}")


def traced_part(rng: np.random.Generator, reps: int, big_n: int, root: Path) -> dict:
    e_fp, e_fn, source = embedded_rates(root)
    judges = {"good": (0.03, 0.07), "fair": (0.10, 0.25), "embedded": (e_fp, e_fn)}
    rows = []
    for name, (fp, fn) in judges.items():
        for p in PREVALENCES:
            for n in SAMPLE_SIZES:
                r = simulate(rng, big_n, n, p, fp, fn, reps)
                rows.append({"judge": name, "fp": fp, "fn": fn, "prevalence": p, "n": n, "N": big_n, **r})
    checks = {"PPI coverage >= 93% at every setting": all(r["ppi_coverage"] >= 93.0 for r in rows),
              "PPI never wider than human only on average": all(r["ppi_width"] <= r["human_width"] for r in rows)}
    return {"rows": rows, "checks": checks, "embedded_source": source, "N": big_n}


def print_traced(out: dict) -> None:
    print(f"share among the N = {out['N']} traced cases; embedded judge: {out['embedded_source']}")
    print("coverage (%) of the share among the N cases and mean width (points) of 95% intervals")
    head = (f"{'judge':9} {'FP':>5} {'FN':>5} {'prev':>5} {'n':>4} | {'judge cov':>9} {'width':>6} | "
            f"{'human cov':>9} {'width':>6} | {'plain cov':>9} {'width':>6} | {'PPI cov':>7} {'width':>6}")
    print(head)
    print("-" * len(head))
    for r in out["rows"]:
        print(f"{r['judge']:9} {r['fp']:5.2f} {r['fn']:5.2f} {r['prevalence']:5.2f} {r['n']:4d} | "
              f"{r['judge_coverage']:9.1f} {r['judge_width']:6.1f} | {r['human_coverage']:9.1f} "
              f"{r['human_width']:6.1f} | {r['plain_coverage']:9.1f} {r['plain_width']:6.1f} | "
              f"{r['ppi_coverage']:7.1f} {r['ppi_width']:6.1f}")


PARTS = ("traced", "population", "paired", "designs")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=(*PARTS, "all"), default="all")
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--big-n", type=int, default=2000, help="N of the traced part")
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    parts = PARTS if a.part == "all" else (a.part,)
    results, ok = {}, True
    for part in parts:
        rng = np.random.default_rng([a.seed, PARTS.index(part)])
        t0 = time.perf_counter()
        if part == "traced":
            out = traced_part(rng, a.reps, a.big_n, root)
        else:
            out = {"population": population_part, "paired": paired_part, "designs": designs_part}[part](rng, a.reps)
        out["seconds"] = time.perf_counter() - t0
        results[part] = out
        ok = ok and all(out["checks"].values())
        if not a.json:
            print(f"== {part}: {a.reps} repetitions per setting, seed {a.seed}")
            {"traced": print_traced, "population": print_population, "paired": print_paired,
             "designs": print_designs}[part](out)
            for name, held in out["checks"].items():
                print(f"{name}: {'yes' if held else 'NO'}")
            print(f"({out['seconds']:.0f} s)\n")
    if a.json:
        print(json.dumps({"reps": a.reps, "seed": a.seed, "parts": results, "ok": ok}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
