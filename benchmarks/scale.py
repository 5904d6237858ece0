"""Trek at scale: the whole chain on N synthetic questions against the fake server.

    python benchmarks/scale.py [--sizes 1000,10000,100000] [--latency 0.05] [--connections 256]
                               [--stages executor,llm,answer,closed,grade,trace,loader,ctrl,ctrlrun,import]
                               [--json]

For each N it writes a synthetic TrekBench-Mini-shaped benchmark (N questions, each with a gold
page and two outdated pages, every text distinct) and runs, each stage as the real ``trek``
command in its own child process against the fake OpenAI server (its own process, ``--latency``
seconds per reply, replies scripted generically so that every stage does its full work):

* ``executor``: the stage executor alone (a stage with no model call), the records file's cost;
* ``llm``: ``trek llm run`` of N chat requests;
* ``answer``: ``trek wild run`` (search-then-read over the local BM25 index of the pages, 2 pages);
* ``closed``: ``trek wild run --search none`` on the same questions (closed book: the answering
  machinery without the local index, whose vocabulary and score matrix grow with the corpus,
  3 pages a question here);
* ``grade``: ``trek grade`` (FreshQA's protocol with a judge that rejects every answer);
* ``trace``: ``trek trace`` on the graded failures (diagnostic, analysis and evaluated roles);
* ``ctrl``: ``trek.ctrl.build.build`` on N synthetic pools (the five main conditions);
* ``ctrlrun``: ``trek ctrl run`` of Direct on two conditions (OO and MND) of those contexts (the
  ``ctrl`` stage's, or built the same way with only these two when that stage is not asked for),
  graded with ``--judge`` (FreshQA's protocol forced on every question), so the answers, the
  grading of each run and the accuracy grid are one process: 2N answer calls and 2N judge calls,
  items counted per question (N);
* ``loader``: ``trek.runs.frame`` of the graded run, as the notebooks read it;
* ``import``: ``trek import chat-completions`` of an N-record log.

Per stage and N it prints wall and CPU milliseconds per item, records rewritten / N (whole-file
rewrites of the stage's record file: compactions), bytes written to the record file / its final
size, and the child's peak RSS. It ends with the ratios t(largest)/t(previous) per item and
rss(largest)/rss(previous), so linear time shows as a ratio near 1 and bounded memory as a ratio
well below N's. CPU seconds are the less noisy figure on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# A child stage runs under this wrapper: it counts what the stage executor writes (journal bytes,
# compactions, records rewritten) and prints the counters as the last stdout line.
WRAPPER = r"""
import atexit, json, os, sys
import trek.journal, trek.stage
counts = {"journal_bytes": 0, "rewrites": 0, "records_rewritten": 0, "rewrite_bytes": 0}
_flush = trek.journal.Journal.flush
def flush(self):
    before = self.bytes
    out = _flush(self)
    counts["journal_bytes"] += self.bytes - before
    return out  # where the lines went: the executor's index of its record file
trek.journal.Journal.flush = flush
_write = trek.stage.write_jsonl
def write(path, recs):
    n = [0]
    def counted():  # count while the records stream through (a list would hold them all)
        for r in recs:
            n[0] += 1
            yield r
    out = _write(path, counted())
    counts["rewrites"] += 1
    counts["records_rewritten"] += n[0]
    counts["rewrite_bytes"] += os.path.getsize(path)
    return out
trek.stage.write_jsonl = write
atexit.register(lambda: print("SCALE-COUNTS " + json.dumps(counts), flush=True))
kind, args = sys.argv[1], json.loads(sys.argv[2])
if kind == "cli":
    from trek.cli import app
    sys.argv = ["trek", *args]
    try:
        app()
    except SystemExit as e:
        if e.code not in (0, None, 3, 4):
            raise
else:
    import runpy
    sys.argv = [kind, *args]
    runpy.run_path(kind, run_name="__main__")
"""

JUDGE, DIAG, ANA, MODEL = "scale-judge", "scale-diagnostic", "scale-analysis", "scale-lm"
STAGES = ("executor", "llm", "answer", "closed", "grade", "trace", "loader", "ctrl", "ctrlrun", "import")
#: the conditions ``trek ctrl run`` answers in the ``ctrlrun`` stage (two, so that memory held per
#: run of the grid would show)
CTRLRUN_CONDITIONS = ("OO", "MND")


def script() -> list[dict]:
    """Generic fake-server rules: every request of every stage gets a well-formed reply."""
    def step(who: str, name: str, reply: dict) -> dict:
        return {"model": who, "any_pattern": rf"\[TrekTrace: {name}\]", "reply": json.dumps(reply)}

    return [
        {"model": JUDGE, "reply": "The response names another person.\nevaluation: incorrect"},
        step(ANA, "answer check", {"correct": False, "reason": "A different answer."}),
        step(DIAG, "key evidence", {"key_evidence": "The gold page gives the answer.", "gold_evidence_urls": []}),
        step(DIAG, "evidence match", {"evidence_match": False, "retrieved_key_evidence": "", "equivalent_urls": [],
                                      "reason": "Not in the retrieved pages."}),
        step(ANA, "query adequacy", {"query_adequate": True, "reason": "The query names the subject."}),
        step(MODEL, "gold-only probe", {"answer": "the gold answer", "used_urls": [], "reasoning": "From the page."}),
        step(MODEL, "gold-plus-noise probe", {"answer": "another answer", "used_urls": [], "reasoning": "Noise."}),
        {"model": MODEL, "reply": "An answer from the pages."},
    ]


def write_benchmark(root: Path, n: int) -> None:
    """A Mini-shaped folder: questions.jsonl and documents.jsonl for ``n`` questions."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / "questions.jsonl").open("w") as qf, (root / "documents.jsonl").open("w") as df:
        for i in range(n):
            qid = f"scale:{i:06d}"
            words = f"item{i} place{i % 997} group{i % 89}"
            gold = f"https://scale.example/{i}/now"
            qf.write(json.dumps({"id": qid, "dataset": "freshqa", "question": f"Who leads {words} today?",
                                 "answers": [f"Leader {i}"], "effective_year": 2025, "effective_year_raw": "2025",
                                 "gold_urls": [gold], "false_premise": False, "split": "mini",
                                 "metadata": {"benchmark": "scale"}}) + "\n")
            pages = (("gold", gold, 2025), ("outdated", f"https://scale.example/{i}/old1", 2019),
                     ("outdated", f"https://scale.example/{i}/old2", 2021))
            for j, (role, url, year) in enumerate(pages):
                text = f"{words}: in {year} the leader was Leader {i - j}. Reported by the {words} desk."
                df.write(json.dumps({"id": f"{qid}:{role}:{j}", "question_id": qid, "url": url,
                                     "title": f"{words} {year}", "text": text, "date": f"{year}-03-01",
                                     "role": role, "supports_answer": f"Leader {i - j}"}) + "\n")


def write_chat_log(path: Path, n: int) -> None:
    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"chatcmpl-{i}", "object": "chat.completion", "model": "gpt-x", "choices": [
                {"index": 0, "message": {"role": "assistant", "content": f"Leader {i} leads it. " + "x" * 400},
                 "finish_reason": "stop"}], "usage": {"prompt_tokens": 100, "completion_tokens": 20,
                                                     "total_tokens": 120}}) + "\n")


def run_child(kind: str, args: list[str], env: dict[str, str]) -> dict:
    """Run one stage in a child process (under :data:`WRAPPER`): its wall and CPU time and peak RSS
    (``os.wait4``, that child alone) and the counters it printed."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", WRAPPER, kind, json.dumps(args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    out_b, err_b = b"", b""
    # read both pipes to the end without blocking the child, then reap it with its rusage
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "out")
    sel.register(proc.stderr, selectors.EVENT_READ, "err")
    while sel.get_map():
        for key, _ in sel.select():
            chunk = os.read(key.fileobj.fileno(), 1 << 16)
            if not chunk:
                sel.unregister(key.fileobj)
            elif key.data == "out":
                out_b += chunk
            else:
                err_b = (err_b + chunk)[-20000:]
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    out, err = out_b.decode(errors="replace"), err_b.decode(errors="replace")
    if proc.returncode != 0 or "SCALE-COUNTS " not in out:
        raise RuntimeError(f"{kind} {' '.join(args[:3])} exited {proc.returncode}:\n{err[-3000:]}")
    line = next(x for x in reversed(out.splitlines()) if x.startswith("SCALE-COUNTS "))
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024,
            **json.loads(line.split(" ", 1)[1])}


def start_server(latency: float) -> tuple[subprocess.Popen, str, Path]:
    tmp = Path(tempfile.mkdtemp(prefix="scale-script-")) / "script.json"
    tmp.write_text(json.dumps(script()))
    proc = subprocess.Popen([sys.executable, "-m", "trek.testing.fake_openai", "--port", "0", "--latency",
                             str(latency), "--script", str(tmp)], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if "listening on" not in line:
        proc.kill()
        raise RuntimeError(f"fake server did not start: {line!r}")
    return proc, line.rsplit(" ", 1)[-1], tmp


EXECUTOR = r"""
import sys
from pathlib import Path
from trek.aio import run_sync
from trek.stage import Slot, Stage, execute
from trek.types import Record

class Rec(Record):
    question_id: str
    status: str
    value: str
    input_key: str | None = None

class Copy(Stage):
    record = Rec
    name = "executor"
    def __init__(self, out): self.out = out
    def slot(self, item): return Slot(self.out, item)
    def input_key(self, item): return "k"
    async def produce(self, item, key): return Rec(question_id=item, status="ok", value="v" * 600, input_key=key)
    def failure(self, item, key, error): raise AssertionError(error)

out, n = Path(sys.argv[1]), int(sys.argv[2])
run_sync(execute(Copy(out), [f"q{i:07d}" for i in range(n)], progress=False, checkpoint_seconds=0.2))
"""

LOADER = r"""
import sys
from trek import runs
df = runs.frame(sys.argv[1])
assert len(df) == int(sys.argv[2]), len(df)
"""

CTRL = r"""
import sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from ctrl_assembly import iter_synthetic_pools
from trek.ctrl.build import build
from trek.ctrl.conditions import MAIN_CONDITIONS
conditions = sys.argv[4].split(",") if len(sys.argv) > 4 else MAIN_CONDITIONS
pools = iter_synthetic_pools(int(sys.argv[2]), 120)  # made one at a time, as a pools file is read
build(pools, sys.argv[1], embedder=None, conditions=conditions, fabricator="none", count_tokens=False)
"""


def _line(n: int, stage: str, f: dict) -> str:
    wo = f"{f['written_over_size']:.2f}" if f["written_over_size"] else "-"
    return (f"N={n:>7} {stage:<9} wall {f['wall_ms_per_item']:8.3f} ms/item  cpu {f['cpu_ms_per_item']:8.3f} "
            f"ms/item  rewritten/N {f['rewritten_per_n']:.2f}  written/size {wo}  peak RSS {f['rss_mb']:7.1f} MB")


class _Printed(dict):
    """A stage's figures, printed the moment the stage ends (a long run shows what it measured so
    far, and a run stopped part way keeps the lines of the stages that finished)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def __setitem__(self, stage: str, figures: dict) -> None:
        super().__setitem__(stage, figures)
        print(_line(self.n, stage, figures), flush=True)


def measure(n: int, stages: list[str], latency: float, connections: int, work: Path,
            server_rss: dict[str, float] | None = None) -> dict[str, dict]:
    """The figures of every stage at ``n`` questions; ``server_rss["mb"]`` gets the fake server's
    peak RSS (one server serves every stage of this ``n``)."""
    server_rss = {} if server_rss is None else server_rss
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TREK_"))}
    env["OPENAI_API_KEY"] = "sk-scale"
    out: dict[str, dict] = _Printed(n)
    bench, run = work / "bench", work / "run"
    common = ["--max-connections", str(connections), "--no-progress", "--yes"]
    srv = None
    try:
        if {"answer", "closed", "grade", "trace", "loader", "import"} & set(stages):
            write_benchmark(bench, n)
        if {"answer", "closed", "grade", "trace", "loader", "llm", "ctrlrun"} & set(stages):
            srv, url, _ = start_server(latency)
        if "llm" in stages:
            req = work / "requests.jsonl"
            with req.open("w") as fh:
                for i in range(n):
                    fh.write(json.dumps({"id": f"r{i}", "messages": [{"role": "user", "content": f"scale {i}"}]}) + "\n")
            r = run_child("cli", ["llm", "run", str(req), "--out", str(work / "responses.jsonl"), "--model", MODEL,
                                  "--base-url", url, "--max-connections", str(connections), "--no-progress", "--yes"],
                          env)
            out["llm"] = _figures(r, n, work / "responses.jsonl")
        if "executor" in stages:
            f = work / "executor.jsonl"
            script_path = work / "executor.py"
            script_path.write_text(EXECUTOR)
            r = run_child(str(script_path), [str(f), str(n)], env)
            out["executor"] = _figures(r, n, f)
        if "answer" in stages or "grade" in stages or "trace" in stages or "loader" in stages:
            r = run_child("cli", ["wild", "run", "--model", MODEL, "--base-url", url, "--run", str(run), "--questions",
                                  "mini", "--data-dir", str(bench), "--search", "local", "--system",
                                  "search-then-read", "--top-k", "2", *common], env)
            out["answer"] = _figures(r, n, run / "answers.jsonl")
        if "closed" in stages:
            r = run_child("cli", ["wild", "run", "--model", MODEL, "--base-url", url, "--run", str(work / "closed"),
                                  "--questions", "mini", "--data-dir", str(bench), "--search", "none", *common], env)
            out["closed"] = _figures(r, n, work / "closed" / "answers.jsonl")
        if {"grade", "trace", "loader"} & set(stages):
            r = run_child("cli", ["grade", str(run), "--judge", JUDGE, "--judge-base-url", url, *common], env)
            out["grade"] = _figures(r, n, run / "grades.jsonl")
        if "trace" in stages:
            r = run_child("cli", ["trace", str(run), "--diagnostic-judge", DIAG, "--analysis-judge", ANA,
                                  "--judge-base-url", url, "--base-url", url, *common], env)
            out["trace"] = _figures(r, n, run / "trace.jsonl")
        if "loader" in stages:
            p = work / "loader.py"
            p.write_text(LOADER)
            out["loader"] = _figures(run_child(str(p), [str(run), str(n)], env), n, None)
        if "ctrl" in stages:
            p = work / "ctrl.py"
            p.write_text(CTRL)
            r = run_child(str(p), [str(work / "ctrl"), str(n), str(HERE)], env)
            out["ctrl"] = _figures(r, n, work / "ctrl" / "contexts.jsonl")
        if "ctrlrun" in stages:
            ctx = work / "ctrl" / "contexts.jsonl"
            if not ctx.exists():  # the ctrl stage was not asked for: build only the conditions run here
                p = work / "ctrl.py"
                p.write_text(CTRL)
                run_child(str(p), [str(work / "ctrl"), str(n), str(HERE), ",".join(CTRLRUN_CONDITIONS)], env)
            grid = work / "ctrlruns"
            r = run_child("cli", ["ctrl", "run", str(ctx), "--model", MODEL, "--base-url", url, "--runs", str(grid),
                                  "--methods", "direct", "--conditions", ",".join(CTRLRUN_CONDITIONS),
                                  "--judge", JUDGE, "--judge-base-url", url, "--grader", "freshqa", *common], env)
            out["ctrlrun"] = _figures(r, n, sorted(grid.glob("*/answers.jsonl")) + sorted(grid.glob("*/grades.jsonl")))
        if "import" in stages:
            log = work / "chat.jsonl"
            write_chat_log(log, n)
            r = run_child("cli", ["import", "chat-completions", str(log), "--questions", str(bench / "questions.jsonl"),
                                  "--out", str(work / "imported")], env)
            out["import"] = _figures(r, n, work / "imported" / "answers.jsonl")
    finally:
        if srv is not None:
            srv.kill()
            _, _, ru = os.wait4(srv.pid, 0)
            srv.returncode = -9
            server_rss["mb"] = ru.ru_maxrss / 1024
    return out


def _figures(r: dict, n: int, path: Path | list[Path] | None) -> dict:
    paths = path if isinstance(path, list) else [] if path is None else [path]  # a grid: every record file
    size = sum(p.stat().st_size for p in paths if p.exists())
    written = r.get("journal_bytes", 0) + r.get("rewrite_bytes", 0)
    return {"n": n, "wall_ms_per_item": 1000 * r["wall"] / n, "cpu_ms_per_item": 1000 * r["cpu"] / n,
            "rewritten_per_n": r.get("records_rewritten", 0) / n, "rewrites": r.get("rewrites", 0),
            "written_over_size": (written / size) if size and written else None, "rss_mb": r["rss_mb"],
            "written_mb": written / 1e6}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--connections", type=int, default=256)
    ap.add_argument("--stages", default=",".join(STAGES))
    ap.add_argument("--work", type=Path, default=None, help="folder for the runs (default: a temporary one)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    sizes = [int(s) for s in a.sizes.split(",")]
    stages = [s for s in a.stages.split(",") if s]
    unknown = sorted(set(stages) - set(STAGES))
    if unknown:
        ap.error(f"--stages: unknown stage(s) {', '.join(unknown)}; known: {', '.join(STAGES)}")
    if a.work is not None:
        a.work.mkdir(parents=True, exist_ok=True)
    results: dict[int, dict[str, dict]] = {}
    servers: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="trek-scale-", dir=a.work) as d:
        for n in sizes:
            t0 = time.perf_counter()
            srv: dict[str, float] = {}
            results[n] = measure(n, stages, a.latency, a.connections, Path(d) / str(n), srv)
            if "mb" in srv:
                servers[n] = srv["mb"]
                print(f"N={n:>7} (the fake server, every stage of this N: peak RSS {srv['mb']:.1f} MB)", flush=True)
            print(f"N={n:>7} done in {time.perf_counter() - t0:.0f} s (data generation included)", flush=True)
    if len(sizes) >= 2:
        print(summary(results, sizes[-1], sizes[-2], servers))
    if a.json:
        print(json.dumps({str(k): v for k, v in results.items()}))


def summary(results: dict[int, dict[str, dict]], big: int, prev: int, servers: dict[int, float]) -> str:
    """The ratios between the two largest N and the bars of issue 31 (CPU time per item at the
    larger N at most 1.3 x that at the smaller, every child's peak RSS at most 2 GB) and of issue 44
    (each stage's peak RSS at the larger N at most 1.3 x that at the smaller)."""
    lines = [f"ratios N={big} over N={prev}:"]
    worst_t: tuple[float, str] | None = None
    for stage in results[big]:
        if stage not in results[prev]:
            continue
        b, p = results[big][stage], results[prev][stage]
        wr = f"  bytes written {b['written_mb'] / p['written_mb']:.2f}" if p["written_mb"] else ""
        t = b["cpu_ms_per_item"] / p["cpu_ms_per_item"]
        worst_t = max(worst_t or (t, stage), (t, stage))
        lines.append(f"  {stage:<9} cpu/item {t:.2f}  wall/item {b['wall_ms_per_item'] / p['wall_ms_per_item']:.2f}  "
                     f"rss {b['rss_mb'] / p['rss_mb']:.2f}{wr}")
    if big in servers and prev in servers:
        lines.append(f"  fake server rss {servers[big] / servers[prev]:.2f} ({servers[prev]:.0f} -> {servers[big]:.0f} MB)")
    rss = sorted(((results[big][st]["rss_mb"] / results[prev][st]["rss_mb"], st) for st in results[big]
                  if st in results[prev]), reverse=True)
    if rss:
        over = [f"{st} {r:.2f}" for r, st in rss if r > 1.3]
        lines.append(f"acceptance (issue 44): peak RSS at N={big} / at N={prev} <= 1.3: worst {rss[0][0]:.2f} "
                     f"({rss[0][1]}) " + ("ok" if not over else "OVER: " + ", ".join(over)))
    peak_mb, peak_stage = max((f["rss_mb"], stage) for stage, f in results[big].items())
    if worst_t is not None:
        lines.append(f"acceptance (issue 31): CPU time per item at N={big} / at N={prev} <= 1.3: worst {worst_t[0]:.2f} "
                     f"({worst_t[1]}) {'ok' if worst_t[0] <= 1.3 else 'OVER'}")
    lines.append(f"acceptance (issue 31): peak RSS <= 2048 MB at N={big}: largest {peak_mb:.0f} MB ({peak_stage}) "
                 f"{'ok' if peak_mb <= 2048 else 'OVER'}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
