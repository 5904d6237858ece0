"""Time `trek import otlp` on one trace of N spans, to show the import is linear in spans.

    python benchmarks/otlp_spans.py [--sizes 4000,16000,40000] [--repeat 1] [--stream 1000000]

For each N a trace of N spans is written (an agent span, then model turns each followed by a
search tool call with a JSON result naming one URL: the GenAI dialect, one request per 1,000
spans on a line of a ``.jsonl`` file; the worst case, a search every other span) and imported into a temporary run directory; the script
prints the import time (median of ``--repeat``), the time per span, the ratio of each size's time
to the first one's over the ratio of their sizes (1.0 is linear; the quadratic import this
replaced gave about 2.3 at 16,000 over 4,000), and the peak resident memory of the import
process. ``--stream N`` adds one import of a trace of N spans (10^6 by default: set 0 to skip),
its file written span by span and never held whole, one search every ``--stream-period`` spans
(100: the others model calls and HTTP client spans), and reports its time and peak memory.
Every import is checked: one trajectory with all its searches, the last one's query and URL.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE = 1_764_000_000_000_000_000
TID = "0af7651916cd43dd8448eb211c80319c"


def _kv(k: str, v: object) -> dict:
    return {"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": str(v)}}


def _span(i: int, parent: str | None, name: str, attrs: dict) -> dict:
    s = {"traceId": TID, "spanId": f"{i + 1:016x}", "name": name, "startTimeUnixNano": str(BASE + i * 1000),
         "endTimeUnixNano": str(BASE + i * 1000 + 900), "attributes": [_kv(k, v) for k, v in attrs.items()]}
    if parent:
        s["parentSpanId"] = parent
    return s


def spans(n: int, period: int = 2):
    """The N spans of the trace, one at a time: every ``period``-th span a search; with a longer
    period, half of the others model calls and half framework spans (an HTTP request with its URL)
    that no span reader looks at."""
    root = f"{1:016x}"
    yield _span(0, None, "invoke_agent bench", {"gen_ai.operation.name": "invoke_agent", "question_id": "q1",
                                                 "gen_ai.output.messages": json.dumps(
                                                     [{"role": "assistant", "parts": [{"type": "text",
                                                                                       "content": "done"}]}])})
    for i in range(1, n):
        if i % period and i % 2 == 0:
            yield _span(i, root, "GET", {"http.request.method": "GET", "server.address": "api.bench.example",
                                         "url.full": f"https://api.bench.example/v1/items/{i}?fields=all&trace=on"})
        elif i % period:
            yield _span(i, root, "chat m", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                                            "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 2})
        else:
            hits = json.dumps({"results": [{"url": f"https://bench.example/p{i}", "title": f"p{i}"}]})
            yield _span(i, root, "execute_tool web_search", {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "web_search",
                "gen_ai.tool.call.id": f"c{i}", "gen_ai.tool.call.arguments": json.dumps({"query": f"query {i}"}),
                "gen_ai.tool.call.result": hits})


def write_trace(path: Path, n: int, per_line: int = 1000, period: int = 2) -> None:
    with path.open("w", encoding="utf-8") as fh:
        batch: list[dict] = []
        for s in spans(n, period):
            batch.append(s)
            if len(batch) == per_line:
                fh.write(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": batch}]}]}) + "\n")
                batch = []
        if batch:
            fh.write(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": batch}]}]}) + "\n")


_CHILD = """
import json, resource, sys, time
from pathlib import Path
from trek import runs
from trek.imports import import_run
trace, qs, out, n, period = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
t0 = time.perf_counter()
import_run("otlp", [trace], out, questions=qs)
took = time.perf_counter() - t0
(t,) = runs.load_answers(out).values()
searches = (n - 1) // period
last = period * searches
ok = (len(t.search_calls) == searches and t.search_calls[-1].query == f"query {last}"
      and [r.url for r in t.search_calls[-1].results] == [f"https://bench.example/p{last}"])
print(json.dumps({"seconds": took, "ok": ok, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def one_import(work: Path, trace: Path, n: int, period: int = 2) -> dict:
    qs = work / "q.jsonl"
    qs.write_text(json.dumps({"id": "q1", "question": "bench?", "answers": ["done"]}) + "\n")
    out = work / f"run-{time.monotonic_ns()}"
    r = subprocess.run([sys.executable, "-c", _CHILD, str(trace), str(qs), str(out), str(n), str(period)],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"import of {n} spans failed:\n{r.stderr[-2000:]}")
    got = json.loads(r.stdout.strip().splitlines()[-1])
    if not got["ok"]:
        sys.exit(f"import of {n} spans gave wrong searches")
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="4000,16000,40000")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--stream", type=int, default=1_000_000, help="spans of the streamed trace (0: skip)")
    ap.add_argument("--stream-period", type=int, default=100, help="one search every this many spans of the streamed "
                    "trace (the others: model calls and framework spans)")
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="trek-otlp-bench-") as d:
        work = Path(d)
        for n in sizes:
            trace = work / f"trace-{n}.jsonl"
            write_trace(trace, n)
            got = [one_import(work, trace, n) for _ in range(a.repeat)]
            secs = statistics.median(g["seconds"] for g in got)
            peak = max(g["peak_mib"] for g in got)
            rows.append((n, secs))
            ratio = "" if len(rows) == 1 else (f"  time ratio / size ratio over N={rows[0][0]}: "
                                                f"{(secs / rows[0][1]) / (n / rows[0][0]):.2f}")
            print(f"N={n:>8} spans  import {secs:7.2f} s  {secs / n * 1e6:6.1f} us/span  peak {peak:7.1f} MiB{ratio}",
                  flush=True)
            trace.unlink()
        if a.stream:
            trace = work / "stream.jsonl"
            write_trace(trace, a.stream, period=a.stream_period)
            size = trace.stat().st_size
            got = one_import(work, trace, a.stream, a.stream_period)
            print(f"streamed N={a.stream} spans, one search every {a.stream_period} ({size / 2**20:.0f} MiB file): "
                  f"import {got['seconds']:.1f} s, {got['seconds'] / a.stream * 1e6:.1f} us/span, "
                  f"peak {got['peak_mib']:.0f} MiB", flush=True)
    print(f"(this process: peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB)")


if __name__ == "__main__":
    main()
