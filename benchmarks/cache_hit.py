"""Cost of a cache hit with a large cache.

    python benchmarks/cache_hit.py --entries 100000 [--json]

Fills a fresh SQLite cache with ``--entries`` realistic chat replies, then times
``LLMCache.get`` hits (the full path a client takes: key hashing, lookup, JSON decode) and a
full ``LLMClient.achat`` hit (key, lookup, usage and price), for random keys. Prints median
and 95th-percentile microseconds per hit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from trek.llm import LLMCache, LLMClient, request_key


def reply(i: int) -> dict:
    return {
        "id": f"chatcmpl-{i}", "object": "chat.completion", "created": 0, "model": "bench",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": f"answer number {i} " * 8}}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 16, "total_tokens": 136},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--samples", type=int, default=5000)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        cache = LLMCache(Path(d) / "c.sqlite")
        client = LLMClient("bench", base_url="http://127.0.0.1:9/v1", api_key="x", cache=cache, progress=False)
        bodies = []
        t0 = time.perf_counter()
        conn = cache._conn
        conn.execute("BEGIN")
        for i in range(a.entries):
            body = {"model": "bench", "messages": [{"role": "user", "content": f"question {i} " + "x" * 200}]}
            req = client.cache_request("chat", body, 0)
            conn.execute(
                "INSERT INTO responses (key, request, response, created_at) VALUES (?, ?, ?, ?)",
                (request_key(req), json.dumps(req), json.dumps(reply(i)), 0.0),
            )
            bodies.append(body)
        conn.execute("COMMIT")
        fill_s = time.perf_counter() - t0
        rng = random.Random(0)
        picks = [rng.randrange(a.entries) for _ in range(a.samples)]

        async def no_compute():
            raise AssertionError("a hit must not compute")

        async def run():
            get_us, chat_us = [], []
            for i in picks:
                req = client.cache_request("chat", bodies[i], 0)
                t = time.perf_counter()
                _, cached = await cache.get(req, no_compute)
                get_us.append((time.perf_counter() - t) * 1e6)
                assert cached
                t = time.perf_counter()
                res = await client.achat(bodies[i]["messages"])
                chat_us.append((time.perf_counter() - t) * 1e6)
                assert res.cached
            return get_us, chat_us

        get_us, chat_us = asyncio.run(run())
        size_mb = (Path(d) / "c.sqlite").stat().st_size / 1e6

    def q95(xs):
        return sorted(xs)[int(0.95 * len(xs))]

    out = {
        "entries": a.entries,
        "fill_seconds": round(fill_s, 2),
        "cache_mb": round(size_mb, 1),
        "cache_get_hit_us_median": round(statistics.median(get_us), 1),
        "cache_get_hit_us_p95": round(q95(get_us), 1),
        "client_achat_hit_us_median": round(statistics.median(chat_us), 1),
        "client_achat_hit_us_p95": round(q95(chat_us), 1),
    }
    if a.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>28}: {v}")


if __name__ == "__main__":
    main()
