"""Peak memory of `trek llm run` against the number of requests: flat in N when requests stream.

    python benchmarks/llm_run_memory.py [--sizes 1000,10000] [--json]

For each size N: a requests file of N short chat requests, `trek llm run` in a child process
against the fake OpenAI server on loopback (no latency), the child's peak resident memory
(ru_maxrss of the finished child). Prints each peak and the growth per request between the
smallest and the largest N (KiB a request); the issue's bar is 3 KiB a request from 1,000 to
10,000. Every run uses a fresh output folder and cache.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path


def peak_kib(n: int, base_url: str, work: Path) -> int:
    folder = work / f"n{n}"
    folder.mkdir()
    req = folder / "requests.jsonl"
    with req.open("w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"r{i}", "messages": [{"role": "user", "content": f"Say hello number {i}."}]})
                    + "\n")
    code = ("import resource, sys; from trek.cli import app\n"
            "try:\n    app(sys.argv[1:])\nexcept SystemExit as e:\n    code = e.code or 0\n"
            "print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
            "sys.exit(code)\n")
    env = {**os.environ, "OPENAI_API_KEY": "bench", "OPENAI_BASE_URL": base_url}
    res = subprocess.run([sys.executable, "-c", code, "llm", "run", str(req), "--out", str(folder / "out.jsonl"),
                          "--model", "bench", "--no-progress", "--max-connections", "64"],
                         env=env, capture_output=True, text=True, timeout=1800)
    if res.returncode != 0:
        raise SystemExit(f"trek llm run failed for N={n}: {res.stderr[-2000:]}")
    peak = [line for line in res.stderr.splitlines() if line.startswith("PEAK ")]
    return int(peak[-1].split()[1])  # KiB on Linux


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    from trek.testing.fake_openai import FakeOpenAIServer

    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer() as srv:
        peaks = {n: peak_kib(n, srv.base_url, Path(tmp)) for n in sizes}
    lo, hi = sizes[0], sizes[-1]
    per = (peaks[hi] - peaks[lo]) / (hi - lo) if hi > lo else 0.0
    out = {"peak_kib": peaks, "kib_per_request": round(per, 2), "from": lo, "to": hi,
           "ru_maxrss_self_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
    if args.json:
        print(json.dumps(out))
    else:
        for n in sizes:
            print(f"N={n:>7}: peak {peaks[n] / 1024:.1f} MiB")
        print(f"growth: {per:.2f} KiB a request from {lo} to {hi}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
