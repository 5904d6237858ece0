"""docs/full-run.md's "A full run, step by step" and docs/trektrace.md's first commands, run as written.

The commands are taken from those pages (the first ``bash`` block of each, marked ``# needs:`` for
the reader: real servers, a key and the network), so the test fails when they drift. They run in a
scratch copy of the repository (``make paper`` reads relative paths from the repository root, and
the runs must not land in the real checkout) against:

* two scripted fake OpenAI servers, standing for the page's two local servers: the evaluated
  model at ``OPENAI_BASE_URL`` and the judges at ``TREK_JUDGE_BASE_URL`` (each refuses the other's
  model, so a call sent to the wrong endpoint fails the run);
* a fake Tavily API (``TAVILY_BASE_URL``) and a fictional web served through ``httpx.MockTransport``
  (the page fetcher's transport hook);
* pinned source files served on loopback: ``trek data download`` runs its real code with the pins
  pointed at a small TrekBench-Wild-shaped data set (``tests/_full_run_world.py``).

No flag is added to the pages' commands; ``make paper`` runs only the notebooks the step-by-step's
params file feeds (the others get no parameter from it, checked here, so they are the same as a
plain ``make paper``, which nbval runs).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from _full_run_world import (
    JUDGE,
    MODEL,
    PLANS,
    judge_script,
    model_script,
    sha256,
    source_files,
    tavily_reply,
    web_transport,
)
from _servers import LoopbackApp
from aiohttp import web
from typer.testing import CliRunner

from trek.cli import app
from trek.datasets import download
from trek.datasets.common import LAYOUT
from trek.pages import PageStore
from trek.testing.fake_openai import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[1]
#: The URLs the README's exports name, and which fake server stands for each.
README_URLS = {"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1", "TREK_JUDGE_BASE_URL": "http://127.0.0.1:8001/v1"}


def readme_block(heading: str) -> str:
    """The first ``bash`` block of the docs page whose title is ``heading``."""
    page = {"A full run, step by step": "full-run.md", "TrekTrace: attributing failures": "trektrace.md"}[heading]
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    assert text.startswith(f"# {heading}\n"), page
    return text.split("```bash\n", 1)[1].split("```", 1)[0]


def parse(block: str) -> list[tuple[str, list[str]]]:
    """``[(kind, words)]``: ``export`` (``[name, value]``), ``trek`` (its arguments) or ``make``."""
    lines, joined = [], ""
    for raw in block.splitlines():
        line = re.sub(r"(^|\s+)#.*$", "", raw).rstrip()
        if line.endswith("\\"):
            joined += line[:-1] + " "
            continue
        line, joined = (joined + line).strip(), ""
        if line:
            lines.append(line)
    out = []
    for line in lines:
        words = shlex.split(line)
        if words[0] == "export":
            name, _, value = words[1].partition("=")
            out.append(("export", [name, value]))
        elif words[0] == ".venv/bin/trek":
            out.append(("trek", words[1:]))
        elif words[0] == "make":
            out.append(("make", words[1:]))
        else:
            raise AssertionError(f"README command the test does not know how to run: {line}")
    return out


def test_the_readme_blocks_parse_into_the_expected_steps():
    steps = parse(readme_block("A full run, step by step"))
    kinds = [(k, w[0]) for k, w in steps]
    assert kinds == [("export", "OPENAI_BASE_URL"), ("export", "TREK_JUDGE_BASE_URL"), ("export", "OPENAI_API_KEY"),
                     ("export", "TAVILY_API_KEY"), ("trek", "data"), ("trek", "data"), ("trek", "wild"),
                     ("trek", "wild"), ("trek", "grade"), ("trek", "grade"), ("trek", "trace"), ("make", "paper"),
                     ("trek", "cost")]
    exports = dict(w for k, w in steps if k == "export")
    assert {k: exports[k] for k in README_URLS} == README_URLS
    trace = parse(readme_block("TrekTrace: attributing failures"))
    assert [w[:2] for _, w in trace] == [["trace", "runs/qwen3-8b-tavily"]] * 3 + [
        ["trace", "review"], ["trace", "agreement"], ["trace", "view"]]
    # a continuation line is joined, a $VARIABLE kept for the shell (here: the test) to expand
    assert "$OPENAI_BASE_URL" in trace[1][1]


def scratch_checkout(root: Path) -> Path:
    """A copy of the repository's code, notebooks, params and Makefile, with the real .venv."""
    co = root / "checkout"
    co.mkdir()
    for name in ("pyproject.toml", "constraints.txt", "Makefile"):
        shutil.copy2(REPO / name, co / name)
    for name in ("trek", "notebooks", "params"):
        shutil.copytree(REPO / name, co / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (co / ".venv").symlink_to(REPO / ".venv")
    return co


def fill_in_review(workbook: Path) -> int:
    """Play the reviewer: agree with TrekTrace on every case (reference valid, judge right)."""
    import openpyxl

    from trek.trace.labels import LABELS
    from trek.trace.review import CHECKLIST, JUDGE_CORRECT, REFERENCE_VALID, TREKTRACE_LABELS, reviewer_column

    wb = openpyxl.load_workbook(workbook)
    ws = wb[CHECKLIST]
    header = [c.value for c in ws[1]]
    col = {name: i + 1 for i, name in enumerate(header)}
    rows = 0
    for r in range(2, ws.max_row + 1):
        labels = str(ws.cell(r, col[TREKTRACE_LABELS]).value or "")
        ws.cell(r, col[REFERENCE_VALID]).value = "yes"
        ws.cell(r, col[JUDGE_CORRECT]).value = "yes"
        for lab in LABELS:
            ws.cell(r, col[reviewer_column(lab)]).value = "yes" if lab in labels else "no"
        rows += 1
    wb.save(workbook)
    return rows


@pytest.mark.slow
def test_the_full_run_and_the_trektrace_commands_of_the_readme(tmp_path, monkeypatch):
    from trek.paper import _load_params, declared_parameters

    steps = parse(readme_block("A full run, step by step"))
    trace_steps = parse(readme_block("TrekTrace: attributing failures"))
    co = scratch_checkout(tmp_path)
    monkeypatch.chdir(co)
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "TREK_JUDGE_BASE_URL", "TREK_DATA_DIR", "TREK_CACHE",
                "TREK_SEARCH_CACHE", "TREK_PAGES", "TREK_PROMPTS", "TREK_PRICES", "TREK_SEARCH_BASE_URL",
                "TAVILY_API_KEY", "TAVILY_BASE_URL"):
        monkeypatch.delenv(var, raising=False)

    files = source_files()
    searches: list[str] = []

    async def tavily(request):
        body = await request.json()
        assert request.headers.get("Authorization") == "Bearer tvly-your-key"  # the README's key reached it
        searches.append(body["query"])
        return web.json_response(tavily_reply(body["query"]))

    async def source(request):
        return web.Response(body=files[request.match_info["name"]])

    # the fictional web: every page fetch (the agent's open_url, trace --fetch) goes through it
    fake_web = web_transport()
    real_init = PageStore.__init__

    def init(self, *a, **kw):
        real_init(self, *a, **{**kw, "transport": kw.get("transport") or fake_web})

    monkeypatch.setattr(PageStore, "__init__", init)

    runner = CliRunner()
    with (FakeOpenAIServer(script=model_script()) as model_srv, FakeOpenAIServer(script=judge_script()) as judge_srv,
          LoopbackApp({"/search": tavily}, get={"/files/{name}": source}) as aux):
        stands_for = {README_URLS["OPENAI_BASE_URL"]: model_srv.base_url,
                      README_URLS["TREK_JUDGE_BASE_URL"]: judge_srv.base_url}
        monkeypatch.setenv("TAVILY_BASE_URL", aux.base_url.removesuffix("/v1"))
        from trek.datasets import wild

        # the test's data set is a small invented Wild standing for the paper's 144 questions: the
        # check that refuses a short source file (tested in test_datasets) would refuse it
        monkeypatch.setattr(wild, "check_complete", lambda benchmark: None)
        monkeypatch.setattr(download, "PINS", tuple(
            download.Pin(name=key, source=LAYOUT[key], url=aux.base_url.removesuffix("/v1") + "/files/" + key,
                         revision="test", sha256=sha256(data), content_sha256=None, home="the test's loopback")
            for key, data in files.items()))
        env: dict[str, str] = {}

        def expand(words: list[str]) -> list[str]:
            return [re.sub(r"\$(\w+)", lambda m: env[m.group(1)], w) for w in words]

        def run(args: list[str]) -> str:
            args = expand(args)
            r = runner.invoke(app, args)
            assert r.exit_code == 0, (args, r.output)
            return r.output

        out: dict[str, str] = {}
        for kind, words in steps:
            if kind == "export":
                name, value = words
                env[name] = stands_for.get(value, value)
                monkeypatch.setenv(name, env[name])
            elif kind == "trek":
                out.setdefault(" ".join(words[:2]), "")
                out[" ".join(words[:2])] += run(words)
            else:
                paper(co, words, declared_parameters, _load_params)

        # the TrekTrace block: the reviewer fills in the workbook between `review` and `agreement`
        for _, words in trace_steps:
            if words[:2] == ["trace", "agreement"]:
                assert fill_in_review(co / "runs/qwen3-8b-tavily/review.xlsx") == 4
            out[" ".join(words[:3])] = run(words)
        model_calls, judge_calls = model_srv.stats(), judge_srv.stats()

    # 1. the data: every pinned file fetched to its place, and read
    for key, data in files.items():
        assert (co / "datasets" / LAYOUT[key].relpath).read_bytes() == data
    assert "2 (paper: 64)" in out["data info"]
    # 2. the runs answered every question; the search run searched with Tavily and opened pages
    runs_dir = co / "runs"
    closed, searched = runs_dir / "qwen3-8b", runs_dir / "qwen3-8b-tavily"
    assert sorted(searches) == sorted({p.question for p in PLANS})
    meta = json.loads((searched / "run.json").read_text())
    assert meta["model"] == MODEL and meta["config"]["system"]["search"] == "tavily"
    # 3. grades as each plan has it
    for run_dir, system in ((closed, "closed"), (searched, "agentic")):
        qs = {json.loads(line)["id"]: json.loads(line)["question"]
              for line in (run_dir / "questions.jsonl").read_text().splitlines()}
        grades = {qs[g["question_id"]]: g["outcome"] for g in map(json.loads, (run_dir / "grades.jsonl").read_text().splitlines())}
        assert grades == {p.question: "correct" if getattr(p, system) == "right" else "incorrect" for p in PLANS}
    # 4. every failure of the search run fully traced, labels from the plans
    traced = {r["question"]: r for r in map(json.loads, (searched / "trace.jsonl").read_text().splitlines())}
    assert {q: r["status"] for q, r in traced.items()} == {p.question: "done" for p in PLANS if p.agentic == "stale"}
    by_q = {p.question: p for p in PLANS}
    assert {by_q[q].slug: sorted(r["labels"]) for q, r in traced.items()} == {
        "port-wend": ["Distraction"],                       # gold retrieved, misled by the old page
        "fernhill-curling": ["Distraction", "Retrieval"],   # adequate queries, gold not found
        "dunmore-pastry": ["Interpretation", "Pre-retrieval"],
        "velmar-swim": ["Pre-retrieval"],
    }
    # the roles went to their own servers (each refuses the other's model with a 404, which stops a run)
    assert model_calls["requests"] > 0 and judge_calls["requests"] > 0
    # 5. make paper wrote the step-by-step's tables and figures to build/paper/full
    tables = co / "build/paper/full/tables"
    tab1 = pd.read_csv(tables / "tab1_wild_accuracy.csv")
    assert {"Qwen3-8B", "Qwen3-8B-Tavily"} <= set(tab1.astype(str).to_numpy().ravel())
    fig2_tex = (tables / "fig2_trektrace.tex").read_text()
    assert "Qwen/Qwen3-8B; TrekBench-Wild, 6 questions" in fig2_tex
    assert "n=4 fully traced" in fig2_tex
    assert (co / "build/paper/full/figures/fig2_trektrace.png").exists()
    assert "Qwen3-8B-Tavily" in (tables / "tabA42_post_vs_upstream.csv").read_text()
    assert "qwen3-8b-tavily" in out["cost runs/qwen3-8b-tavily"]
    # the TrekTrace block: resumed without a call, the stale check ran, review, agreement and viewer
    assert "kappa" in out["trace agreement runs/qwen3-8b-tavily/review.xlsx"].lower()
    assert "1.000" in out["trace agreement runs/qwen3-8b-tavily/review.xlsx"]
    assert (searched / "trace.html").exists()
    assert all(r.get("stale_reference") is not None
               for r in map(json.loads, (searched / "trace.jsonl").read_text().splitlines()))
    assert JUDGE in (searched / "trace.jsonl").read_text()


def paper(co: Path, words: list[str], declared_parameters, load_params) -> None:
    """``make paper PARAMS=...`` in the scratch checkout, for the notebooks the params file feeds."""
    assert words == ["paper", "PARAMS=params/full.yaml"]
    params = str(co / "params/full.yaml")
    nbs = sorted((co / "notebooks").glob("*.ipynb"))
    declared = {nb.stem: declared_parameters(nb) for nb in nbs}
    fed = [nb for nb in nbs if load_params(params, nb.stem, declared)]
    assert {nb.stem for nb in fed} >= {"tab1_wild_accuracy", "fig2_trektrace", "fig3_model_search",
                                      "tabA42_post_vs_upstream", "tab10_reference_years"}
    env = {**os.environ, "PYTHONPATH": str(co)}
    res = subprocess.run(
        ["make", *words, "-o", ".venv/.trek-installed", "JOBS=2",
         "NOTEBOOKS=" + " ".join(f"notebooks/{nb.name}" for nb in fed)],
        cwd=co, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert len([ln for ln in lines if re.search(r"  ok  \(\d+ files\)$", ln)]) == len(fed), res.stdout
    assert res.stderr == ""
