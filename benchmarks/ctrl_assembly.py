"""Time to assemble TrekBench-Ctrl contexts from given pools, with and without token counts.

    python benchmarks/ctrl_assembly.py [--sizes 1000,5000,10000] [--chars 400] [--repeats 3]
                                       [--conditions main|all | --build] [--tokens | --compare] [--json]

Makes synthetic pools (1 gold, 20 outdated, 10 relevance, 5 republication, 5 fabrication documents
of ``--chars`` characters each, dated, every text distinct), then times the whole assembly step
for the five main conditions (``--conditions all``: also the ten ablations, as ``trek ctrl build``
does by default): selection, seeded shuffles, rendering, SHA-256 and writing ``contexts.jsonl``
atomically. ``--tokens`` adds o200k_base counts as ``trek ctrl build`` makes them; ``--compare``
times both, alternating (so both see the same machine load), and prints the ratio (with /
without) of wall-clock time and of the process's CPU time (less disturbed by other jobs). Each
figure is the median of ``--repeats`` runs; the token cache is emptied before every timed run, so
a run never profits from the one before. ``--build`` times the whole of ``trek ctrl build``
instead (``trek.ctrl.build.build`` without a model: republication, all fifteen conditions, the three
files). Prints seconds per size and the per-question cost, so linear growth shows as a flat
per-question figure.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from trek import tokens
from trek.ctrl.build import build
from trek.ctrl.conditions import ALL_CONDITIONS, MAIN_CONDITIONS, iter_contexts
from trek.ctrl.pools import Pool
from trek.types import Document, Question, write_jsonl

ROLES = (("gold", 1), ("outdated", 20), ("relevance", 10), ("republication", 5), ("fabrication", 5))
WORDS = ("The council said the figure changed again this year after a long review of the records. "
         "Officials in Harrowmere and Varrow disputed the 2019 count; a later audit (March 2021) revised it. ") * 100


def synthetic_pools(n: int, chars: int) -> list[Pool]:
    return list(iter_synthetic_pools(n, chars))


def iter_synthetic_pools(n: int, chars: int) -> Iterator[Pool]:
    """The pools of :func:`synthetic_pools` one at a time (a large build never holds them all)."""
    base = dt.date(2015, 1, 1)
    for i in range(n):
        qid = f"bench:{i}"
        q = Question(id=qid, dataset=("freshqa", "infodeepseek", "sealqa")[i % 3], question=f"Question {i}?",
                     answers=[f"answer {i}"], effective_year=2024)
        docs = []
        for role, k in ROLES:
            for j in range(k):
                start = (i * 7 + j * 13) % 1000
                head = f"Report {i}-{role}-{j}: "  # every document text differs
                docs.append(Document(
                    id=f"{qid}:{role}:{j}", url=f"https://{role}.example/{i}/{j}", title=f"{role} {j}",
                    date=base + dt.timedelta(days=(i + 31 * j) % 3000),
                    text=head + WORDS[start:start + max(0, chars - len(head))],
                    question_id=qid, role=role, supports_answer=f"{role}-{j}",
                    metadata={"synthetic": role in ("republication", "fabrication")},
                ))
        yield Pool(question=q, documents=docs)


def time_once(pools: list[Pool], conditions: tuple[str, ...] | None, folder: Path,
              count_tokens: bool) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one assembly, or of one whole build when ``conditions`` is
    None (the token cache emptied first)."""
    tokens.clear_cache()
    t0, c0 = time.perf_counter(), time.process_time()
    if conditions is None:
        build(pools, folder, embedder=None, count_tokens=count_tokens)
    else:
        write_jsonl(folder / "contexts.jsonl", iter_contexts(pools, conditions, count_tokens=count_tokens))
    return time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,5000,10000")
    ap.add_argument("--chars", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--conditions", choices=("main", "all"), default="main")
    ap.add_argument("--build", action="store_true", help="time the whole build, not the assembly alone")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--tokens", action="store_true", help="also count o200k_base tokens")
    mode.add_argument("--compare", action="store_true", help="time without and with token counts")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    conditions = None if a.build else ALL_CONDITIONS if a.conditions == "all" else MAIN_CONDITIONS
    variants = (False, True) if a.compare else (a.tokens,)
    tokens.count_tokens("warm up")  # load the table outside the timed runs
    pools = synthetic_pools(max(sizes), a.chars)
    results = []
    with tempfile.TemporaryDirectory() as d:
        for n in sizes:
            row: dict = {"questions": n, "contexts": n * len(conditions or ALL_CONDITIONS)}
            runs: dict[bool, list[tuple[float, float]]] = {v: [] for v in variants}
            for _ in range(a.repeats):
                for with_tokens in variants:
                    runs[with_tokens].append(time_once(pools[:n], conditions, Path(d), with_tokens))
            size = (Path(d) / "contexts.jsonl").stat().st_size
            for v in variants:
                secs = statistics.median(w for w, _ in runs[v])
                cpu = statistics.median(c for _, c in runs[v])
                row["with_tokens" if v else "without_tokens"] = {
                    "seconds": round(secs, 3), "cpu_seconds": round(cpu, 3),
                    "ms_per_question": round(1000 * secs / n, 3), "mb_written": round(size / 1e6, 1)}
            if a.compare:
                w, wo = row["with_tokens"], row["without_tokens"]
                row["ratio"] = round(w["seconds"] / wo["seconds"], 2)
                row["cpu_ratio"] = round(w["cpu_seconds"] / wo["cpu_seconds"], 2)
            results.append(row)
    if a.json:
        print(json.dumps(results))
        return
    for r in results:
        figures = []
        for key in ("without_tokens", "with_tokens"):
            if key in r:
                f = r[key]
                figures.append(f"{key.replace('_', ' ')} {f['seconds']:6.2f} s, {f['cpu_seconds']:.2f} s CPU "
                               f"({f['ms_per_question']:.3f} ms/question, {f['mb_written']} MB)")
        ratio = f"; ratio {r['ratio']:.2f} (CPU {r['cpu_ratio']:.2f})" if "ratio" in r else ""
        print(f"{r['questions']:>6} questions x {r['contexts'] // r['questions']} conditions = {r['contexts']:>6} contexts: "
              + "; ".join(figures) + ratio + f" (medians of {a.repeats})")


if __name__ == "__main__":
    main()
