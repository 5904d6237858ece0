"""Throughput of the trek client against the fake server, compared with common alternatives.

    python benchmarks/llm_throughput.py --latency 0.2 --concurrency 32 --requests 640 --json

Starts the fake OpenAI server in a separate process (so it does not share the GIL with the
clients) and measures requests/second for:

* ``trek``: :class:`trek.llm.LLMClient` fan-out (async, ``max_connections=concurrency``,
  with its SQLite cache in a temporary folder, so the cost of caching is included);
* ``thread_pool``: a ``ThreadPoolExecutor`` of the same width calling the synchronous
  ``openai.OpenAI`` client, the way simple evaluation scripts do it;
* ``sequential``: one synchronous call after another (on a smaller sample, since it is slow);
* ``ideal``: ``concurrency / latency``.

For trek and the thread pool it also prints the client's CPU milliseconds per request (the
fake server runs in another process, so this is the client alone): the figure that still tells
the transports apart when the machine is loaded.

Each figure is the median of ``--repeats`` runs (machines here are noisy). With ``--json``
one JSON object is printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def start_server(latency: float, *extra: str) -> tuple[subprocess.Popen, str]:
    """The fake server in a subprocess (``extra``: more of its command-line flags); (process, base URL)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "trek.testing.fake_openai", "--port", "0", "--latency", str(latency), *extra],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline().strip()
    if "listening on" not in line:
        proc.kill()
        raise RuntimeError(f"fake server did not start: {line!r}")
    return proc, line.rsplit(" ", 1)[-1]


def requests_for(n: int, tag: str) -> list[list[dict]]:
    return [[{"role": "user", "content": f"{tag} benchmark request {i}"}] for i in range(n)]


def bench_trek(base_url: str, concurrency: int, msgs: list[list[dict]],
               transport: str = "aiohttp") -> tuple[float, float]:
    from trek.llm import ChatRequest, LLMCache, LLMClient

    with tempfile.TemporaryDirectory() as d:
        client = LLMClient(
            "bench-model",
            base_url=base_url,
            api_key="sk-bench",
            max_connections=concurrency,
            cache=LLMCache(Path(d) / "cache.sqlite"),
            progress=False,
            transport=transport,
        )
        reqs = [ChatRequest(messages=m) for m in msgs]
        client.map([ChatRequest(messages=[{"role": "user", "content": f"warm-up {time.time()}"}])])
        t0, c0 = time.perf_counter(), time.process_time()
        res = client.map(reqs)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert all(r.ok for r in res), "trek: some requests failed"
    return len(msgs) / dt, 1000 * cpu / len(msgs)


def bench_thread_pool(base_url: str, concurrency: int, msgs: list[list[dict]]) -> tuple[float, float]:
    import httpx
    import openai

    def one(m):
        return client.chat.completions.create(model="bench-model", messages=m).choices[0].message.content

    # as many pooled connections as threads (the SDK's default keeps only 100 alive)
    client = openai.OpenAI(base_url=base_url, api_key="sk-bench", max_retries=2,
                           http_client=openai.DefaultHttpxClient(limits=httpx.Limits(max_connections=concurrency,
                                                                                     max_keepalive_connections=concurrency)))
    one([{"role": "user", "content": f"warm-up {time.time()}"}])
    t0, c0 = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        out = list(pool.map(one, msgs))
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert all(out)
    return len(msgs) / dt, 1000 * cpu / len(msgs)


def bench_sequential(base_url: str, msgs: list[list[dict]]) -> float:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="sk-bench", max_retries=2)
    t0 = time.perf_counter()
    for m in msgs:
        client.chat.completions.create(model="bench-model", messages=m)
    return len(msgs) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--requests", type=int, default=640)
    ap.add_argument("--sequential-requests", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--transport", choices=["aiohttp", "httpx"], default="aiohttp", help="trek's HTTP transport")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    proc, base_url = start_server(a.latency)
    try:
        urllib.request.urlopen(base_url + "/models", timeout=5).read()
        trek_runs, pool_runs, seq_runs, trek_cpu, pool_cpu = [], [], [], [], []
        for r in range(a.repeats):
            # distinct prompts per repeat and per contender: nobody benefits from a cache hit
            rps, cpu = bench_trek(base_url, a.concurrency, requests_for(a.requests, f"trek{r}"), a.transport)
            trek_runs.append(rps)
            trek_cpu.append(cpu)
            rps, cpu = bench_thread_pool(base_url, a.concurrency, requests_for(a.requests, f"pool{r}"))
            pool_runs.append(rps)
            pool_cpu.append(cpu)
            seq_runs.append(bench_sequential(base_url, requests_for(a.sequential_requests, f"seq{r}")))
    finally:
        proc.terminate()
        proc.wait(10)

    ideal = a.concurrency / a.latency
    trek_rps = statistics.median(trek_runs)
    pool_rps = statistics.median(pool_runs)
    result = {
        "latency_s": a.latency,
        "transport": a.transport,
        "concurrency": a.concurrency,
        "requests": a.requests,
        "repeats": a.repeats,
        "trek_rps": round(trek_rps, 1),
        "thread_pool_rps": round(pool_rps, 1),
        "sequential_rps": round(statistics.median(seq_runs), 2),
        "ideal_rps": round(ideal, 1),
        "trek_vs_ideal": round(trek_rps / ideal, 3),
        "trek_vs_thread_pool": round(trek_rps / pool_rps, 3),
        # the client's CPU per request (the fake server is another process): the figure that
        # tells the transports apart on a loaded machine, where requests/second do not
        "trek_cpu_ms_per_request": round(statistics.median(trek_cpu), 2),
        "thread_pool_cpu_ms_per_request": round(statistics.median(pool_cpu), 2),
        "runs": {"trek": [round(x, 1) for x in trek_runs], "thread_pool": [round(x, 1) for x in pool_runs]},
    }
    if a.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:>22}: {v}")


if __name__ == "__main__":
    main()
