"""A paced run against the fake server's request or token limit: how close to the ideal time, how many 429s.

    python benchmarks/paced_run.py --limit 20 --window 1 --requests 400 --concurrency 16 --json
    python benchmarks/paced_run.py --tokens --limit 2000 --window 1 --max-tokens 96 --requests 400 --json

Starts the fake OpenAI server in a separate process with ``--rate-limit LIMIT/WINDOW`` (a bucket
of LIMIT requests refilling continuously over WINDOW seconds, as OpenAI's limits do), or with
``--tokens`` ``--token-limit LIMIT/WINDOW`` (a bucket of LIMIT tokens; each request counts its
prompt words plus its ``max_tokens``, ``--max-tokens``), and runs ``--requests`` distinct chat
requests through :class:`trek.llm.LLMClient` with ``max_connections=--concurrency``, from a cold
start (a fresh client and server each repeat). The ideal time is what the limit allows: the
first LIMIT units at once, the rest at LIMIT/WINDOW per second (plus one reply latency).
Reported per repeat and as medians: wall time, ratio to ideal (its inverse is the share of the
limit reached), and the share of requests answered 429 (from the server's ``/_stats``). The
acceptance bar is ratio <= 1.10 (>= 0.9 x the limit) with <= 1 % 429s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from llm_throughput import start_server  # the same fake-server launcher (run from benchmarks/)


def one_run(args: argparse.Namespace, tag: str) -> dict:
    from trek.llm import ChatRequest, LLMCache, LLMClient

    flag = "--token-limit" if args.tokens else "--rate-limit"
    proc, base_url = start_server(args.latency, flag, f"{args.limit}/{args.window}")
    params = {"max_tokens": args.max_tokens} if args.tokens else {}
    try:
        with tempfile.TemporaryDirectory() as d:
            client = LLMClient(
                "bench-model", base_url=base_url, api_key="sk-bench", max_connections=args.concurrency,
                cache=LLMCache(Path(d) / "cache.sqlite"), progress=False, max_retries=10,
            )
            reqs = [ChatRequest(messages=[{"role": "user", "content": f"{tag} paced request {i}"}], params=params)
                    for i in range(args.requests)]
            t0 = time.perf_counter()
            res = client.map(reqs)
            dt = time.perf_counter() - t0
        stats = json.loads(urllib.request.urlopen(base_url.rsplit("/v1", 1)[0] + "/_stats").read())
    finally:
        proc.terminate()
        proc.wait(10)
    assert all(r.ok for r in res), "some requests failed"
    # units the run needs: requests, or the tokens the server counted (prompt words + max_tokens)
    units = stats["admitted"]["tokens" if args.tokens else "requests"]
    ideal = max(0.0, units - args.limit) * args.window / args.limit + args.latency
    return {
        "seconds": round(dt, 3),
        "ideal_seconds": round(ideal, 3),
        "ratio": round(dt / ideal, 4),
        "rate_limited": stats["rate_limited"],
        "rate_limited_share": round(stats["rate_limited"] / args.requests, 4),
        "http_requests": stats["requests"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", action="store_true", help="a token limit instead of a request limit")
    ap.add_argument("--limit", type=int, default=20, help="requests (with --tokens: tokens) per window")
    ap.add_argument("--max-tokens", type=int, default=96, help="max_tokens of each request (with --tokens)")
    ap.add_argument("--window", type=float, default=1.0, help="seconds")
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--unpaced", action="store_true",
                    help="switch the pacer off (for comparison: the client then meets the limit by 429s and retries)")
    args = ap.parse_args()
    if args.unpaced:
        from trek.limits import RatePacer

        RatePacer.reserve = lambda self, tokens=0.0: 0.0  # type: ignore[method-assign]
    runs = [one_run(args, f"r{i}-{time.time()}") for i in range(args.repeats)]
    med = {k: statistics.median(r[k] for r in runs) for k in ("seconds", "ratio", "rate_limited", "rate_limited_share")}
    out = {"config": vars(args), "runs": runs, "median": med, "ideal_seconds": runs[0]["ideal_seconds"],
           "pass": med["ratio"] <= 1.10 and med["rate_limited_share"] <= 0.01}
    if args.json:
        print(json.dumps(out))
    else:
        for r in runs:
            print(r)
        print(f"median: {med['seconds']:.2f} s for an ideal {runs[0]['ideal_seconds']:.2f} s "
              f"(ratio {med['ratio']:.3f}), {med['rate_limited']:g} requests answered 429 "
              f"({100 * med['rate_limited_share']:.2f} %) -> {'pass' if out['pass'] else 'FAIL'}")


if __name__ == "__main__":
    main()
