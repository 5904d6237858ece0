"""Peak memory of `trek import inspect-ai` on a large `.eval` log: samples are streamed.

    python benchmarks/eval_streaming.py [--members 40] [--mib 14] [--pages 7]

Writes an inspect ``.eval`` zip of ``--members`` samples, each member about ``--mib`` MiB of JSON
(a question, ``--pages`` ``web_browser_go`` calls whose tool outputs are pages of random words,
then an answer; deflated as inspect writes them, about 3 times smaller), imports it into a
temporary run directory in a child process and prints the import time, the child's peak
resident memory and that peak over one member's size. The import is checked: one trajectory
per sample, each with its opened pages, and every page stored. The issue this answers measured
4.6 GB for 40 members of 14 MiB, when every sample was held at once; streamed, the peak is
bounded by one sample (and the run's writing), not the log.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

WORDS = ["harbor", "bridge", "lanes", "river", "city", "council", "opened", "traffic", "morning", "report", "engineer", "steel", "cable", "tower", "north", "south", "ferry", "museum", "market", "station", "tunnel", "island", "coast", "weather", "mayor", "budget", "plan", "vote", "school", "library", "garden", "festival", "concert", "stadium", "team", "season", "coach", "player", "final", "record", "press"]


def page(rng: random.Random, size: int) -> str:
    out, n = [], 0
    while n < size:
        w = rng.choice(WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)


def sample(i: int, mib: float, pages: int, rng: random.Random) -> dict:
    size = int(mib * (1 << 20) / pages)
    messages: list[dict] = [{"role": "user", "content": f"Question {i}: how many lanes does bridge {i} have?"}]
    for j in range(pages):
        cid = f"c{i}-{j}"
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": cid, "function": "web_browser_go", "arguments": {"url": f"https://bench.example/{i}/{j}"}}]})
        messages.append({"role": "tool", "tool_call_id": cid, "function": "web_browser_go",
                         "content": page(rng, size)})
    messages.append({"role": "assistant", "content": f"Bridge {i} has six lanes."})
    return {"id": f"s{i}", "epoch": 1, "input": f"How many lanes does bridge {i} have?", "target": "six",
            "messages": messages, "output": {"model": "bench-model", "choices": [
                {"message": {"role": "assistant", "content": f"Bridge {i} has six lanes."}}]},
            "model_usage": {"bench-model": {"input_tokens": 100, "output_tokens": 10}}}


def write_eval(path: Path, members: int, mib: float, pages: int) -> int:
    rng = random.Random(1)
    biggest = 0
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("header.json", json.dumps({"eval": {"task": "bench", "model": "bench-model"}}))
        for i in range(members):
            data = json.dumps(sample(i, mib, pages, rng))
            biggest = max(biggest, len(data))
            z.writestr(f"samples/s{i}_epoch_1.json", data)
    return biggest


_CHILD = """
import json, resource, sys, time
from pathlib import Path
from trek import runs
from trek.imports import import_run
from trek.pages import PageStore
log, out, members, pages = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
t0 = time.perf_counter()
report = import_run("inspect-ai", [log], out)
took = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
ok = report.count == members and report.pages == members * pages
for t in runs.iter_answers(out):
    ok = ok and len(t.opened_urls) == pages and t.final_answer.endswith("six lanes.")
store = PageStore(out / "pages.sqlite")
ok = ok and len(store.get("https://bench.example/0/0").text) > 1000
store.close()
print(json.dumps({"seconds": took, "peak_mib": peak, "ok": ok}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", type=int, default=40)
    ap.add_argument("--mib", type=float, default=14.0, help="size of one member's JSON (MiB)")
    ap.add_argument("--pages", type=int, default=7, help="opened pages per sample")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="trek-eval-bench-") as d:
        log = Path(d) / "big.eval"
        t0 = time.perf_counter()
        biggest = write_eval(log, a.members, a.mib, a.pages)
        print(f"wrote {log.name}: {a.members} members of {biggest / 2**20:.1f} MiB (JSON), "
              f"{log.stat().st_size / 2**20:.0f} MiB zipped, in {time.perf_counter() - t0:.0f} s", flush=True)
        r = subprocess.run([sys.executable, "-c", _CHILD, str(log), str(Path(d) / "run"), str(a.members), str(a.pages)],
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"import failed:\n{r.stderr[-3000:]}")
        got = json.loads(r.stdout.strip().splitlines()[-1])
        if not got["ok"]:
            sys.exit("import gave wrong trajectories or pages")
        print(f"import {got['seconds']:.1f} s, peak {got['peak_mib']:.0f} MiB "
              f"({got['peak_mib'] / (biggest / 2**20):.1f} x one member; {a.members} members: "
              f"{a.members * biggest / 2**20:.0f} MiB of JSON in all)")


if __name__ == "__main__":
    main()
