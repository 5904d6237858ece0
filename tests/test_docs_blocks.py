"""Every shell block of README.md and docs/*.md runs as written, and the site builds --strict.

Per page, the unmarked blocks run in order as one bash script in a fresh copy of the repository
(``tests/_doc_blocks.py``): the page starts the servers it needs (the fake OpenAI server with its
``demo`` script) and sets every variable itself; the test adds no flag and no variable beyond a
minimal ``PATH`` and a fresh ``HOME``. Then the files the page's commands wrote are checked: a page
that grades and traces must have written graded and labelled cases. Blocks marked ``# needs:`` or
``# long:`` are not run; each of their ``trek`` command lines must parse against the CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import _doc_blocks
import pytest
from _doc_blocks import REPO, blocks, exists_in_venv, pages, parse_error, run_page, trek_commands, words

PAGES = {str(p.relative_to(REPO)): p for p in pages()}
RUNNABLE = [name for name, p in PAGES.items() if any(b.mark is None for b in blocks(p))]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def graded_and_labelled(run: Path, *, want_labels: bool = True) -> tuple[list[str], list[list[str]]]:
    """The run's grade outcomes and the labels of its fully traced cases; at least one graded case
    (correct or incorrect, never only unparsed/pending) and, when asked, one labelled case."""
    outcomes = [g["outcome"] for g in read_jsonl(run / "grades.jsonl")]
    assert {"correct", "incorrect"} & set(outcomes), (run, outcomes)
    labels = [t["labels"] for t in read_jsonl(run / "trace.jsonl") if t["status"] == "done"] \
        if (run / "trace.jsonl").exists() else []
    if want_labels:
        assert any(labels), (run, labels)
    return outcomes, labels


def check_readme(repo: Path) -> None:
    # (a) the plain CLI: a Wild run on Mini with local search, graded and traced
    outcomes, labels = graded_and_labelled(repo / "runs" / "demo")
    assert len(outcomes) == 12 and "correct" in outcomes and "incorrect" in outcomes
    assert len({lab for ls in labels for lab in ls}) >= 2
    # (b) an imported log, graded and traced
    graded_and_labelled(repo / "runs" / "responses")
    # (c) inspect_ai: the eval log scored by trek/trektrace, imported with its grades and traces
    assert (repo / "scored.eval").is_file()
    outcomes, _ = graded_and_labelled(repo / "runs" / "inspect-mini")
    assert len(outcomes) == 6


def check_own_agent(repo: Path) -> None:
    for run in ("responses", "claude", "chat", "gemini", "inspect"):
        assert (repo / "runs" / run / "answers.jsonl").is_file(), run
    graded_and_labelled(repo / "runs" / "responses")


def check_traces(repo: Path) -> None:
    graded_and_labelled(repo / "runs" / "langfuse")
    scores = read_jsonl(repo / "runs" / "langfuse-scores.jsonl")
    assert scores and all(s["name"].startswith("trektrace.") for s in scores)
    assert json.loads((repo / "runs" / "langfuse-evaluations.json").read_text())["resourceSpans"]


def check_inspect(repo: Path) -> None:
    outcomes, _ = graded_and_labelled(repo / "runs" / "inspect-scored")
    assert len(outcomes) == 6


def check_exact_judges(repo: Path) -> None:
    grades = read_jsonl(repo / "runs" / "mini" / "grades.jsonl")
    # the cascade: the exact judge decided some, the demo judge those it left undecided, none is left
    exact = [g for g in grades if g["grader"] == "exact"]
    handed = [g for g in grades if g["grader"] != "exact"]
    assert len(grades) == 12 and exact and all(g["outcome"] != "undecided" for g in grades)
    assert all(g["judge_settings"]["cascade"][0] == {"judge": "oracle", "outcome": "undecided"} for g in handed)
    graded_and_labelled(repo / "runs" / "mini")
    assert read_jsonl(repo / "runs" / "mini" / "audit-grading.jsonl")  # the audit judge's grades
    for cond in ("GOLD", "OO"):
        assert len(read_jsonl(repo / "runs" / "ctrl" / f"demo__direct__{cond}" / "grades.jsonl")) == 36


def check_trektrace(repo: Path) -> None:
    _, labels = graded_and_labelled(repo / "runs" / "demo")
    assert len({lab for ls in labels for lab in ls}) >= 2
    assert (repo / "runs" / "demo" / "review.xlsx").stat().st_size > 0
    assert "<html" in (repo / "runs" / "demo" / "trace.html").read_text(encoding="utf-8").lower()
    verified = read_jsonl(repo / "runs" / "demo" / "verify.jsonl")
    assert verified and all(r["verdict"] in ("confirmed", "refuted", "inconclusive", "skipped") for r in verified)
    assert {r["experiment"] for r in verified} == {"distractor_search", "query_repair"}


def check_models(repo: Path) -> None:
    rows = read_jsonl(repo / "responses.jsonl")
    assert [(r["id"], r["status"]) for r in rows] == [("q1", "ok"), ("q2", "ok")]
    assert all(r["content"] for r in rows)


def check_fake_server(repo: Path) -> None:
    stats = json.loads((repo / "stats.json").read_text())
    assert stats["requests"] >= 1, stats


#: What each runnable page must have written (pages not listed: their script's exit 0 is the check).
CHECKS = {"README.md": check_readme, "docs/own-agent.md": check_own_agent, "docs/traces.md": check_traces,
          "docs/inspect.md": check_inspect, "docs/fake-server.md": check_fake_server,
          "docs/exact-judges.md": check_exact_judges, "docs/trektrace.md": check_trektrace,
          "docs/models.md": check_models}


def test_blocks_are_found_and_marks_read():
    found = blocks(REPO / "README.md")
    assert [b.mark for b in found][:1] == ["long"]
    assert any(b.mark is None for b in found)
    assert words("trek grade runs/x --judge j | tee log  # note") == ["trek", "grade", "runs/x", "--judge", "j",
                                                                       "|", "tee", "log"]


def test_every_page_with_a_check_has_runnable_blocks():
    assert set(CHECKS) <= set(RUNNABLE), set(CHECKS) - set(RUNNABLE)


def test_every_marked_trek_command_line_parses():
    assert parse_error(["grade", "RUN", "--no-such-flag"]).startswith("No such option: --no-such-flag")
    assert parse_error(["trace", "runs/x", "--judge", "j"]) is None
    checked, bad = 0, []
    for path in PAGES.values():
        for block, args in trek_commands(blocks(path)):
            checked += 1
            err = parse_error(args)
            if err:
                bad.append((block.where, " ".join(args), err))
    assert not bad, "\n".join(map(str, bad))
    assert checked >= 40  # the marked blocks hold that many trek commands: none was skipped by a parsing slip


def test_every_unmarked_trek_command_line_parses_too():
    """Cheap before the slow run: a misspelt flag in a runnable block fails here first."""
    bad = []
    for path in PAGES.values():
        for block, args in trek_commands(blocks(path), only_marked=False):
            if block.mark is None and (err := parse_error(args)):
                bad.append((block.where, " ".join(args), err))
    assert not bad, "\n".join(map(str, bad))


@pytest.mark.slow
@pytest.mark.skipif(not exists_in_venv("trek"), reason="the pages call .venv/bin/trek: run `make install` first")
@pytest.mark.parametrize("page", RUNNABLE)
def test_the_page_runs_as_written(page, tmp_path):
    res = run_page(blocks(PAGES[page]), tmp_path)
    assert res.returncode == 0, f"{page}: exit {res.returncode}\n--- stdout\n{res.stdout[-4000:]}\n" \
                                f"--- stderr\n{res.stderr[-6000:]}"
    check = CHECKS.get(page)
    if check:
        check(tmp_path / "repo")


@pytest.mark.slow
def test_the_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocs_click")
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=REPO, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert res.returncode == 0, res.stderr[-5000:]
    cli_page = (tmp_path / "site" / "cli" / "index.html").read_text(encoding="utf-8")
    assert 'id="trek-wild-run"' in cli_page and 'id="trek-trace-run"' in cli_page
    formats = (tmp_path / "site" / "formats" / "index.html").read_text(encoding="utf-8")
    assert "trek-schema:" not in formats and "schema_version" in formats
    front = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "five-minute tour" in front


def test_a_page_runs_with_only_its_own_environment_and_stops_at_the_first_failure(tmp_path, monkeypatch):
    from _doc_blocks import BASE_PATH, Block

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # the test's own environment never leaks in
    ok = [Block("p.md", 1, "bash", f'test -z "${{OPENAI_BASE_URL:-}}"\ntest "$PATH" = {BASE_PATH}\ntest -L .venv\n'
                                   "test -f README.md && test -f docs/index.md\n"),
          Block("p.md", 5, "bash", "sleep 300 &\nexport X=1\n"),  # a background job ends with the script
          Block("p.md", 9, "bash", "# needs: a key\nfalse\n", mark="needs")]  # marked: never run
    res = run_page(ok, tmp_path / "a", timeout=60)
    assert res.returncode == 0, res.stderr
    bad = [Block("p.md", 1, "bash", "false\ntouch ran-on\n")]
    res = run_page(bad, tmp_path / "b", timeout=60)
    assert res.returncode == 1 and not (tmp_path / "b" / "repo" / "ran-on").exists()


@pytest.mark.slow
@pytest.mark.skipif(not exists_in_venv("trek"), reason="the pages call .venv/bin/trek: run `make install` first")
def test_the_pages_run_in_reading_order_in_one_folder(tmp_path):
    """A reader goes through README.md and then each page in one checkout: every page's blocks run
    after the earlier pages' (their runs, logs and files still there), so a page that makes a folder
    or file an earlier page made must use a fresh name or say --replace."""
    import yaml

    def flat(nav):
        for item in nav:
            for v in (item.values() if isinstance(item, dict) else [item]):
                yield from (flat(v) if isinstance(v, list) else [v])

    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    order = ["README.md", *(f"docs/{p}" for p in flat(nav["nav"]) if f"docs/{p}" in RUNNABLE)]
    assert set(order) == set(RUNNABLE), set(RUNNABLE) - set(order)  # every runnable page is in the site's nav
    first = tmp_path / "first"
    first.mkdir()
    copy = None
    for name in order:
        if copy is None:
            res = run_page(blocks(PAGES[name]), first)
            copy = first / "repo"
        else:
            env = {"PATH": _doc_blocks.BASE_PATH, "HOME": str(first / "home")}
            res = subprocess.run(["bash", "-c", _doc_blocks.script(blocks(PAGES[name]))], cwd=copy, env=env,
                                 capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
        assert res.returncode == 0, f"{name}, after {order[:order.index(name)]}: exit {res.returncode}\n" \
                                    f"--- stdout\n{res.stdout[-3000:]}\n--- stderr\n{res.stderr[-4000:]}"
