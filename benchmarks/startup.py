"""What starting Trek costs: CPU seconds of ``trek --version``, ``trek --help`` and a one-request
``trek llm run`` against a plain script that sends the same request with the SDK.

    python benchmarks/startup.py --repeats 7 --json

The fake OpenAI server (no latency) runs in its own process. Each contender is a fresh process,
timed by the CPU (user + system) the operating system reports for it when it exits (``os.wait4``),
so the load of other processes on the machine changes its wall time much more than its CPU.
Contenders run interleaved (one of each per round, in a rotating order) and every figure is the
median over ``--repeats`` rounds:

* ``version``, ``help``: ``trek --version`` and ``trek --help``;
* ``llm_run``: ``trek llm run`` of one request for a model with no price (so no tokenizer is
  needed), into a fresh output folder (a fresh cache: the request is sent);
* ``plain``: a script that reads the same requests file, sends the request with
  ``AsyncOpenAI(http_client=DefaultAioHttpClient())`` and writes the reply as a JSON line: what a
  one-request run costs without Trek;
* ``python``: ``python -c pass``, the interpreter alone (the floor of every contender).

The ratios: ``llm_run / plain`` (target <= 1.3) and ``version`` alone (target <= 0.3 s).
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
from pathlib import Path

PLAIN = r"""
import asyncio, json, sys
import openai

async def main(path, out, base_url, model):
    with open(path, encoding="utf-8") as fh:
        reqs = [json.loads(line) for line in fh if line.strip()]
    async with openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench",
                                  http_client=openai.DefaultAioHttpClient()) as client:
        with open(out, "w", encoding="utf-8") as fh:
            for r in reqs:
                reply = await client.chat.completions.create(model=r.get("model") or model, messages=r["messages"])
                fh.write(json.dumps({"id": r["id"], "content": reply.choices[0].message.content}) + "\n")

asyncio.run(main(*sys.argv[1:5]))
"""


def start_server() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "trek.testing.fake_openai", "--port", "0", "--latency", "0"],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if "listening on" not in line:
        proc.kill()
        raise RuntimeError(f"fake server did not start: {line!r}")
    return proc, line.rsplit(" ", 1)[-1]


def cpu_of(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one process run to its end; a failure is an error."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... exited {proc.returncode}: {err[-2000:]}")
    return usage.ru_utime + usage.ru_stime, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--model", default="bench-unpriced", help="a model the price table does not know")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    trek = shutil.which("trek", path=str(Path(sys.executable).parent)) or "trek"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TREK_", "OPENAI_"))}
    env["OPENAI_API_KEY"] = "sk-bench"
    proc, base_url = start_server()
    runs: dict[str, list[float]] = {k: [] for k in ("python", "version", "help", "llm_run", "plain")}
    walls: dict[str, list[float]] = {k: [] for k in runs}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            for r in range(a.repeats):
                req = work / f"requests-{r}.jsonl"
                req.write_text(json.dumps({"id": "q1", "messages": [
                    {"role": "user", "content": f"startup benchmark request {r}"}]}) + "\n")
                out = work / f"run-{r}"
                out.mkdir()
                cmds = {
                    "python": [sys.executable, "-c", "pass"],
                    "version": [trek, "--version"],
                    "help": [trek, "--help"],
                    "llm_run": [trek, "llm", "run", str(req), "--out", str(out / "out.jsonl"), "--base-url", base_url,
                                "--model", a.model, "--no-progress"],
                    "plain": [sys.executable, "-c", PLAIN, str(req), str(out / "plain.jsonl"), base_url, a.model],
                }
                names = list(cmds)
                names = names[r % len(names):] + names[:r % len(names)]  # rotate: nobody always goes first
                for name in names:
                    cpu, wall = cpu_of(cmds[name], env, work)
                    runs[name].append(cpu)
                    walls[name].append(wall)
                got = json.loads((out / "out.jsonl").read_text())
                if got.get("status") != "ok":
                    raise RuntimeError(f"trek llm run did not answer: {got}")
    finally:
        proc.terminate()
        proc.wait(10)

    med = {k: statistics.median(v) for k, v in runs.items()}
    result = {
        "repeats": a.repeats,
        "load_average": round(os.getloadavg()[0], 2),
        **{f"{k}_cpu_s": round(v, 3) for k, v in med.items()},
        **{f"{k}_wall_s": round(statistics.median(v), 3) for k, v in walls.items()},
        "llm_run_vs_plain_cpu": round(med["llm_run"] / med["plain"], 3),
        "version_target_s": 0.3,
        "llm_run_vs_plain_target": 1.3,
        "runs_cpu_s": {k: [round(x, 3) for x in v] for k, v in runs.items()},
    }
    if a.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:>22}: {v}")


if __name__ == "__main__":
    main()
