"""Hand-written ``verify.jsonl`` records for a traced run: every case a label calls an experiment
for gets one, its verdict taken in turn from a fixed cycle, so the tests know each verdict, reason,
minimal set and repaired query without running ``trek trace verify`` (tests/test_trace_verify.py
runs it for real on a scripted run; tests/test_trace_verified.py reads that run too)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import cycle
from pathlib import Path

from trek import runs
from trek.trace.records import TraceRecord
from trek.trace.verify import MinimalPage, VerifyRecord
from trek.types import write_jsonl

#: The verdicts given in turn to the distractor searches and to the query repairs.
SEARCH_CYCLE = ("confirmed", "refuted", "confirmed", "inconclusive", "skipped", "pending")
REPAIR_CYCLE = ("confirmed", "refuted", "skipped", "confirmed")
#: Text that would run if the viewer did not escape it (the mark is assembled at run time).
HOSTILE = "<script>document.title='PW'+'NED'</script>"


def _search(r: TraceRecord, verdict: str, i: int) -> VerifyRecord:
    gold = set(r.gold_urls)
    noise = [u for u in r.noise_context if u not in gold] or [f"https://noise.example/{r.question_id}"]
    base = {"question_id": r.question_id, "experiment": "distractor_search", "label": "Distraction",
            "labels": list(r.labels), "noise_pages": len(noise), "calls": 3 + i % 3, "probe_calls": 3 + i % 3}
    if verdict == "pending":
        return VerifyRecord(**base, status="pending", error=f"noise_probe: HTTP 500 for {r.question_id}")
    if verdict == "confirmed":
        kind = "outdated" if i % 2 == 0 else None
        return VerifyRecord(**base, verdict="confirmed", search="bisect",
                            minimal_set=[MinimalPage(url=noise[-1], ctrl_kind=kind)])
    reason = {"refuted": f"right again on a re-run {HOSTILE}",
              "inconclusive": "the gold pages alone are answered wrong too",
              "skipped": "the gold-plus-noise probe did not run for this case"}[verdict]
    return VerifyRecord(**base, verdict=verdict, reason=reason)


def _repair(r: TraceRecord, label: str, verdict: str, i: int) -> VerifyRecord:
    base = {"question_id": r.question_id, "experiment": "query_repair", "label": label, "labels": list(r.labels),
            "backend": "local", "live": False, "calls": 1}
    if verdict == "skipped":
        return VerifyRecord(**base, verdict="skipped", reason="the search backend 'local' cannot be asked again here")
    queries = [f"{r.question_id} who holds it now", f"{r.question_id} latest report {HOSTILE}"]
    gold = r.gold_urls[0] if r.gold_urls else "https://gold.example/"
    # the outcome the verdict needs: the gold page back means Pre-retrieval
    back = (label == "Pre-retrieval") == (verdict == "confirmed")
    results = {queries[0]: ["https://other.example/a", *([gold] if back else [])], queries[1]: ["https://other.example/b"]}
    return VerifyRecord(**base, verdict=verdict, reason=None if verdict == "confirmed" else f"outcome differs {i}",
                        repaired_queries=queries, results=results, found_urls=[gold] if back else [],
                        found_by="url-identity" if back else None, outcome="Pre-retrieval" if back else "Retrieval")


def plant(run_dir: Path, records: Sequence[TraceRecord]) -> list[VerifyRecord]:
    """Write ``run_dir/verify.jsonl`` for ``records`` (the cases of every status that carry a
    tested label) and return what was written."""
    searches, repairs = cycle(SEARCH_CYCLE), cycle(REPAIR_CYCLE)
    out = []
    for i, r in enumerate(records):
        if "Distraction" in r.labels:
            out.append(_search(r, next(searches), i))
        upstream = next((lab for lab in ("Pre-retrieval", "Retrieval") if lab in r.labels), None)
        if upstream:
            out.append(_repair(r, upstream, next(repairs), i))
    write_jsonl(Path(run_dir) / runs.VERIFY, out)
    return out


def state(v: VerifyRecord) -> str:
    """The verdict, or the status of a record without one (as the tests expect it shown)."""
    return v.verdict if v.status == "done" and v.verdict else v.status
