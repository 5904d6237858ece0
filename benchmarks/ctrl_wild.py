"""Time per question of a scripted `trek ctrl discover` -> `trek ctrl build` on Wild-shaped questions.

    python benchmarks/ctrl_wild.py [--sizes 12,36] [--repeats 3] [--new-tls-per-request] [--json]

For each size N, a scripted web (``tests/demo/wild_web.py``: the three source datasets in their
own schemas with N fast-changing questions, a LongSeal file for every other SealQA question, pages
served on loopback and read by trafilatura, a Tavily-shaped search service) and the fake model in a
separate process (``python -m trek.testing.fake_openai --script``, so it does not share the GIL
with Trek), then, in this process:

1. ``trek ctrl discover --source wild ... --search tavily --fetch --fetch-private``: gold pages
   fetched and checked, 20 historical and 10 relevance documents per question found, verified and
   dated (the date-only step included);
2. ``trek ctrl build --source pools --model ...``: republication, up to 5 fabrications per
   question (scripted edits through the real checks, wordllama similarity), the five main
   conditions, o200k_base token counts.

Each step starts from an empty folder (no LLM, search or page cache carried over). Prints the
median over ``--repeats`` of each step's seconds per question, and the number of model requests
and page fetches per question. The replies are instant: this measures Trek's own work per
question (HTTP, extraction, SQLite, checks, assembly), not a provider's latency.
``--new-tls-per-request`` builds a TLS context for every fetch and search, as Trek did before
:func:`trek.pages.shared_ssl_context` (each loads the certificate file).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from _scripts import load_script  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from trek.cli import app  # noqa: E402
from trek.ctrl.pools import read_pools  # noqa: E402

wild_web = load_script("wild_web")
demo_build = load_script("demo_ctrl_build")


def fake_server(rules: list[dict], folder: Path) -> tuple[subprocess.Popen, str]:
    script = folder / "rules.json"
    script.write_text(json.dumps(rules), encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "trek.testing.fake_openai", "--port", "0", "--script", str(script)],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()  # "fake-openai listening on http://127.0.0.1:PORT/v1"
    return proc, line.rsplit(" ", 1)[1]


def requests_served(base_url: str) -> int:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/_stats") as r:
        return int(json.load(r)["requests"])


def invoke(args: list[str]) -> float:
    t0 = time.perf_counter()
    res = CliRunner().invoke(app, args)
    spent = time.perf_counter() - t0
    if res.exit_code != 0:
        raise SystemExit(f"trek {' '.join(args[:2])} failed ({res.exit_code}):\n{res.output}")
    return spent


def one_run(n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, wild_web.WildWeb(n) as web:
        root = Path(tmp)
        data_dir, longseal = web.write_datasets(root / "datasets")
        out = root / "discover" / "pools.jsonl"
        proc, base_url = fake_server(web.rules(), root)
        try:
            os.environ["TAVILY_BASE_URL"] = web.base
            discover = invoke(["ctrl", "discover", "--source", "wild", "--data-dir", str(data_dir), "--longseal",
                               str(longseal), "--model", "fake-model", "--base-url", base_url, "--search", "tavily",
                               "--fetch", "--fetch-private", "--pages", str(root / "discover" / "pages.sqlite"),
                               "--out", str(out)])
            discover_calls = requests_served(base_url)
        finally:
            proc.terminate()
            proc.wait()
        pools = read_pools(out)
        proc, base_url = fake_server(demo_build.demo_script(pools), root)
        try:
            build = invoke(["ctrl", "build", "--source", "pools", "--pools", str(out), "--out", str(root / "build"),
                            "--model", "fake-model", "--base-url", base_url, "--conditions", "OO,MND,SAA,SBA,GOLD"])
            build_calls = requests_served(base_url)
        finally:
            proc.terminate()
            proc.wait()
        return {"discover_s": discover, "build_s": build, "discover_calls": discover_calls,
                "build_calls": build_calls, "fetches": len(web.fetch_log), "searches": len(web.search_log)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="12,36", help="Comma-separated numbers of questions (at most 144).")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--new-tls-per-request", action="store_true",
                    help="A TLS context per fetch and search (the code before the shared one).")
    a = ap.parse_args()
    if a.new_tls_per_request:
        import httpx

        import trek.pages

        trek.pages.shared_ssl_context = httpx.create_ssl_context
    for var in ("TREK_CACHE", "TREK_SEARCH_CACHE", "TREK_PAGES", "TREK_PROMPTS", "OPENAI_BASE_URL"):
        os.environ.pop(var, None)
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")
    os.environ.setdefault("TAVILY_API_KEY", "tvly-bench")
    results = []
    for n in (int(x) for x in a.sizes.split(",")):
        runs = [one_run(n) for _ in range(a.repeats)]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        row = {"questions": n, "repeats": a.repeats,
               "discover_s_per_question": med["discover_s"] / n, "build_s_per_question": med["build_s"] / n,
               "discover_s": med["discover_s"], "build_s": med["build_s"],
               "discover_calls_per_question": med["discover_calls"] / n, "build_calls_per_question": med["build_calls"] / n,
               "fetches_per_question": med["fetches"] / n, "searches_per_question": med["searches"] / n,
               "runs": runs}
        results.append(row)
        if not a.json:
            print(f"{n:>4} questions: discover {row['discover_s_per_question']:.3f} s/question "
                  f"({row['discover_s']:.1f} s; {row['discover_calls_per_question']:.1f} model calls, "
                  f"{row['fetches_per_question']:.1f} fetches, {row['searches_per_question']:.1f} searches per question), "
                  f"build {row['build_s_per_question']:.3f} s/question ({row['build_s']:.1f} s; "
                  f"{row['build_calls_per_question']:.1f} model calls per question); medians of {a.repeats}")
    if a.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
