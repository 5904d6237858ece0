"""Time to assemble TrekBench-Ctrl contexts from given pools.

    python benchmarks/ctrl_assembly.py [--sizes 1000,5000,10000] [--chars 400] [--tokens] [--json]

Makes synthetic pools (1 gold, 20 outdated, 10 relevance, 5 republication, 5 fabrication documents
of ``--chars`` characters each, dated), then times the whole assembly step for the five main
conditions: selection, seeded shuffles, rendering, SHA-256 and writing ``contexts.jsonl``
atomically. Token counting is off unless ``--tokens``. Prints seconds per size and the per-question
cost, so linear growth shows as a flat per-question figure.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import tempfile
import time
from pathlib import Path

from trek.ctrl.conditions import MAIN_CONDITIONS, iter_contexts
from trek.ctrl.pools import Pool
from trek.types import Document, Question, write_jsonl

ROLES = (("gold", 1), ("outdated", 20), ("relevance", 10), ("republication", 5), ("fabrication", 5))


def synthetic_pools(n: int, chars: int) -> list[Pool]:
    words = ("The council said the figure changed again this year after a long review of the records. " * 200)
    pools = []
    base = dt.date(2015, 1, 1)
    for i in range(n):
        qid = f"bench:{i}"
        q = Question(id=qid, dataset=("freshqa", "infodeepseek", "sealqa")[i % 3], question=f"Question {i}?",
                     answers=[f"answer {i}"], effective_year=2024)
        docs = []
        for role, k in ROLES:
            for j in range(k):
                start = (i * 7 + j * 13) % 1000
                docs.append(Document(
                    id=f"{qid}:{role}:{j}", url=f"https://{role}.example/{i}/{j}", title=f"{role} {j}",
                    date=base + dt.timedelta(days=(i + 31 * j) % 3000), text=words[start:start + chars],
                    question_id=qid, role=role, supports_answer=f"{role}-{j}",
                    metadata={"synthetic": role in ("republication", "fabrication")},
                ))
        pools.append(Pool(question=q, documents=docs))
    return pools


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,5000,10000")
    ap.add_argument("--chars", type=int, default=400)
    ap.add_argument("--tokens", action="store_true", help="also count o200k_base tokens")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    counter = None
    if a.tokens:
        from trek.ctrl.tokens import count_tokens as counter
    pools = synthetic_pools(max(sizes), a.chars)
    results = []
    with tempfile.TemporaryDirectory() as d:
        for n in sizes:
            t0 = time.perf_counter()
            write_jsonl(Path(d) / "contexts.jsonl", iter_contexts(pools[:n], MAIN_CONDITIONS, count_tokens=counter))
            secs = time.perf_counter() - t0
            size = (Path(d) / "contexts.jsonl").stat().st_size
            results.append({"questions": n, "contexts": n * len(MAIN_CONDITIONS), "seconds": round(secs, 2),
                            "ms_per_question": round(1000 * secs / n, 3), "mb_written": round(size / 1e6, 1)})
    if a.json:
        print(json.dumps(results))
        return
    for r in results:
        print(f"{r['questions']:>6} questions x {len(MAIN_CONDITIONS)} conditions = {r['contexts']:>6} contexts: "
              f"{r['seconds']:6.2f} s ({r['ms_per_question']:.3f} ms/question, {r['mb_written']} MB)")


if __name__ == "__main__":
    main()
