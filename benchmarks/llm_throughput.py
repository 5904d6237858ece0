"""Throughput of Trek against the plain SDK client on the same transport, and (``--against
thread-pool``) against the older alternatives.

    python benchmarks/llm_throughput.py --requests 1000 --concurrency 256 --latency 0.05 --repeats 5 --json

**Trek against the plain client** (the default): the fake OpenAI server (``--latency`` seconds a
reply) runs in its own process, and each contender is a fresh process that reads the same
requests file (distinct prompts per run: no cache hit), sends every request at most
``--concurrency`` at a time and writes one JSON line per reply:

* ``trek``: ``trek llm run REQUESTS --out DIR/out.jsonl --max-connections N`` (its default
  aiohttp transport, its response cache and output journal in a fresh folder, a model with no
  price);
* ``plain``: a script with ``AsyncOpenAI(http_client=DefaultAioHttpClient())``, an
  ``asyncio.Semaphore(N)`` and ``asyncio.gather``: the same transport without Trek.

Each process is timed from start to exit, start-up included (what a user waits for and pays),
by its wall time and by the CPU the operating system reports for it (``os.wait4``). The
contenders alternate (trek first in even rounds, plain first in odd ones) and each figure is the
median of ``--repeats`` rounds. It prints both ratios, ``trek_vs_plain_rps`` (target >= 0.9) and
``trek_vs_plain_cpu`` (target <= 1.15), and the load average (CPU seconds move much less with
the load of other processes than requests a second do).

**``--against thread-pool``**: the earlier in-process comparison: :class:`trek.llm.LLMClient`
fan-out against a ``ThreadPoolExecutor`` over the synchronous SDK and one call after another,
in requests a second and client CPU milliseconds per request (``--transport`` picks Trek's).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PLAIN = r"""
import asyncio, json, sys
import openai

async def main(path, out, base_url, model, width):
    with open(path, encoding="utf-8") as fh:
        reqs = [json.loads(line) for line in fh if line.strip()]
    sem = asyncio.Semaphore(int(width))
    async with openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=2,
                                  http_client=openai.DefaultAioHttpClient()) as client:
        async def one(r):
            async with sem:
                reply = await client.chat.completions.create(model=r.get("model") or model, messages=r["messages"])
            return {"id": r["id"], "status": "ok", "content": reply.choices[0].message.content}
        results = await asyncio.gather(*(one(r) for r in reqs))
    with open(out, "w", encoding="utf-8") as fh:
        for res in results:
            fh.write(json.dumps(res) + "\n")

asyncio.run(main(*sys.argv[1:6]))
"""


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


def process_figures(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one process run to its end; a failure is an error."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... exited {code}: {err[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def against_plain(a: argparse.Namespace) -> dict:
    trek = shutil.which("trek", path=str(Path(sys.executable).parent)) or "trek"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TREK_", "OPENAI_"))}
    env["OPENAI_API_KEY"] = "sk-bench"
    figures: dict[str, dict[str, list[float]]] = {k: {"wall": [], "cpu": []} for k in ("trek", "plain")}
    proc, base_url = start_server(a.latency)
    try:
        urllib.request.urlopen(base_url + "/models", timeout=5).read()
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            for r in range(a.repeats):
                order = ["trek", "plain"] if r % 2 == 0 else ["plain", "trek"]
                for name in order:
                    folder = work / f"{name}-{r}"
                    folder.mkdir()
                    req = folder / "requests.jsonl"
                    with req.open("w", encoding="utf-8") as fh:
                        for i, m in enumerate(requests_for(a.requests, f"{name}{r}")):
                            fh.write(json.dumps({"id": f"q{i}", "messages": m}) + "\n")
                    out = folder / "out.jsonl"
                    if name == "trek":
                        cmd = [trek, "llm", "run", str(req), "--out", str(out), "--base-url", base_url,
                               "--model", "bench-model", "--max-connections", str(a.concurrency), "--no-progress"]
                    else:
                        cmd = [sys.executable, "-c", PLAIN, str(req), str(out), base_url, "bench-model",
                               str(a.concurrency)]
                    wall, cpu = process_figures(cmd, env)
                    lines = [json.loads(x) for x in out.read_text().splitlines()]
                    if len(lines) != a.requests or any(x.get("status") != "ok" for x in lines):
                        raise RuntimeError(f"{name}: not every request was answered")
                    figures[name]["wall"].append(wall)
                    figures[name]["cpu"].append(cpu)
    finally:
        proc.terminate()
        proc.wait(10)
    med = {k: {m: statistics.median(v) for m, v in f.items()} for k, f in figures.items()}
    rps = {k: a.requests / med[k]["wall"] for k in med}
    return {
        "requests": a.requests, "concurrency": a.concurrency, "latency_s": a.latency, "repeats": a.repeats,
        "transport": "aiohttp (both)",
        "load_average": round(os.getloadavg()[0], 2),
        "trek_rps": round(rps["trek"], 1), "plain_rps": round(rps["plain"], 1),
        "trek_cpu_s": round(med["trek"]["cpu"], 3), "plain_cpu_s": round(med["plain"]["cpu"], 3),
        "trek_vs_plain_rps": round(rps["trek"] / rps["plain"], 3),
        "trek_vs_plain_cpu": round(med["trek"]["cpu"] / med["plain"]["cpu"], 3),
        "targets": {"trek_vs_plain_rps": ">= 0.9", "trek_vs_plain_cpu": "<= 1.15"},
        "runs": {k: {m: [round(x, 3) for x in v] for m, v in f.items()} for k, f in figures.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", choices=["plain", "thread-pool"], default="plain",
                    help="plain: trek llm run against the plain SDK client on aiohttp (processes); thread-pool: "
                    "the earlier in-process comparison")
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--sequential-requests", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--transport", choices=["aiohttp", "httpx"], default="aiohttp",
                    help="--against thread-pool: trek's HTTP transport")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.against == "plain":
        result = against_plain(a)
        if a.json:
            print(json.dumps(result))
        else:
            for k, v in result.items():
                print(f"{k:>22}: {v}")
        return

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
