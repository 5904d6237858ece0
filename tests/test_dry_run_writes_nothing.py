"""``--dry-run`` writes nothing: every command that takes it leaves the disk as it found it.

Each case copies prepared inputs (an answered run, a graded run, the same runs without their
SQLite files, a Ctrl build, a requests file) into a fresh folder, folds every write-ahead log into
its database (so no file is open elsewhere), lists the tree with a digest of every file, runs the
command with ``--dry-run`` against the scripted fake server (nothing may be sent) and lists the
tree again: no run folder, no SQLite file, no output, no cache, no lock, no changed byte.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from _scripts import load_script
from typer.testing import CliRunner

from trek.cli import app
from trek.datasets import mini
from trek.testing.fake_openai import FakeOpenAIServer

MODEL, JUDGE, DIAG, ANA = "demo-lm", "demo-judge", "demo-diagnostic-judge", "demo-analysis-judge"


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for var in [k for k in os.environ if k.startswith(("OPENAI_", "TREK_"))]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


@pytest.fixture(scope="module")
def server():
    bench = mini.load()
    script = (load_script("demo_runs").demo_script(bench.questions, bench)
              + load_script("demo_trace").demo_trace_script(bench, MODEL))
    with FakeOpenAIServer(script=script) as srv:
        yield srv


def invoke(args: list[str]):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def inputs(server, tmp_path_factory, monkeypatch_module):
    """A folder of inputs: answered/ (4 questions answered), graded/ (answered and graded), traced/
    (graded and traced), bare/ (graded/ without its SQLite files, as an imported run), build/ (a Ctrl
    build), requests.jsonl."""
    for var in [k for k in os.environ if k.startswith(("OPENAI_", "TREK_"))]:
        monkeypatch_module.delenv(var)
    monkeypatch_module.setenv("OPENAI_API_KEY", "sk-test")
    root = tmp_path_factory.mktemp("inputs")
    r = invoke(["wild", "run", "--model", MODEL, "--base-url", server.base_url, "--run", root / "answered",
                "--questions", "mini", "--search", "local", "--system", "search-then-read", "--no-progress",
                "--limit", "4", "--yes"])
    assert r.exit_code == 0, r.output
    shutil.copytree(root / "answered", root / "graded")
    r = invoke(["grade", root / "graded", "--judge", JUDGE, "--judge-base-url", server.base_url, "--no-progress"])
    assert r.exit_code == 0, r.output
    shutil.copytree(root / "graded", root / "traced")
    r = invoke(["trace", root / "traced", "--diagnostic-judge", DIAG, "--analysis-judge", ANA, "--judge-base-url",
                server.base_url, "--base-url", server.base_url, "--no-progress", "--yes"])
    assert r.exit_code in (0, 3), r.output
    (root / "bare").mkdir()
    for f in (root / "graded").iterdir():
        if f.suffix in (".json", ".jsonl"):
            shutil.copy(f, root / "bare" / f.name)
    r = invoke(["ctrl", "build", "--source", "mini", "--questions", "mini:01,mini:02", "--out", root / "build",
                "--conditions", "OO,GOLD", "--no-tokens"])
    assert r.exit_code == 0, r.output
    (root / "requests.jsonl").write_text("".join(json.dumps({"id": f"r{i}", "model": JUDGE, "messages": [
        {"role": "user", "content": f"question {i}"}]}) + "\n" for i in range(3)))
    return root


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def settle(root: Path) -> None:
    """Fold every write-ahead log under ``root`` into its database (nothing else has it open)."""
    for db in root.rglob("*.sqlite"):
        con = sqlite3.connect(db)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
    assert not [p for p in root.rglob("*") if p.name.endswith(("-wal", "-shm"))]


def tree(root: Path) -> dict[str, str]:
    """Every folder and file under ``root``: a folder as "/", a file as the digest of its bytes."""
    return {str(p.relative_to(root)): "/" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))}


@pytest.fixture
def work(inputs, tmp_path, monkeypatch):
    """A fresh copy of the inputs, the current folder for the test, with its tree before."""
    root = tmp_path / "work"
    shutil.copytree(inputs, root)
    settle(root)
    monkeypatch.chdir(root)
    return root


def cases(url: str) -> dict[str, tuple[str, list, str | None]]:
    """name: (the command, its arguments after it, the output it would create, which must not
    appear), with the fake server at ``url``."""
    def wild(run: str, *more: str) -> list[str]:
        return ["--model", MODEL, "--base-url", url, "--run", run, "--questions", "mini", "--search", "local",
                "--system", "search-then-read", "--no-progress", *more]

    def trace(run: str) -> list[str]:
        return [run, "--diagnostic-judge", DIAG, "--analysis-judge", ANA, "--judge-base-url", url, "--base-url", url,
                "--no-progress"]

    return {
        "wild run, new run": ("wild run", wild("new-run", "--limit", "3"), "new-run"),
        "wild run, resumed": ("wild run", wild("answered", "--limit", "6"), None),
        "wild run, a second epoch": ("wild run", wild("answered", "--limit", "4", "--epochs", "2"), "answered/epoch-2"),
        "retry": ("retry", ["answered", "--base-url", url], None),
        "grade": ("grade", ["answered", "--judge", JUDGE, "--judge-base-url", url], None),
        "grade, no caches": ("grade", ["bare", "--judge", JUDGE, "--judge-base-url", url, "--regrade", "all"],
                             "bare/llm-cache.sqlite"),
        "trace RUN": ("trace", trace("graded"), None),
        "trace run, no caches": ("trace run", trace("bare"), "bare/pages.sqlite"),
        "trace verify": ("trace verify", trace("traced"), "traced/verify.jsonl"),
        "llm run": ("llm run", ["requests.jsonl", "--out", "out/responses.jsonl", "--base-url", url, "--no-progress"],
                    "out"),
        "ctrl build with a model fabricator": (
            "ctrl build", ["--source", "mini", "--questions", "mini:01,mini:02", "--out", "new-build", "--fabricator",
                           "scripted-demo", "--fabricator-base-url", url, "--fabrication", "model", "--fabrications",
                           "2"], "new-build"),
        "ctrl discover": ("ctrl discover", ["--source", "mini", "--questions", "mini:01,mini:02", "--model",
                                            "fake-model", "--base-url", url, "--search", "local", "--out",
                                            "pools/p.jsonl"], "pools"),
        "ctrl run": ("ctrl run", ["build/contexts.jsonl", "--model", MODEL, "--base-url", url, "--runs", "grid",
                                  "--methods", "direct", "--conditions", "OO", "--judge", JUDGE, "--judge-base-url",
                                  url], "grid"),
    }


@pytest.mark.slow  # the module's inputs: a demo run answered and graded against the fake server
@pytest.mark.parametrize("case", list(cases("")))
def test_a_dry_run_leaves_the_tree_as_it_was(case, server, work):
    command, args, output = cases(server.base_url)[case]
    if case == "retry":  # one question without its answer: something to retry
        answers = work / "answered" / "answers.jsonl"
        answers.write_text("".join(answers.read_text().splitlines(keepends=True)[:-1]))
    before, sent = tree(work), server.stats()["requests"]
    r = invoke([*command.split(), *args, "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "calls" in r.output, r.output  # it did estimate
    assert server.stats()["requests"] == sent  # and sent nothing
    after = tree(work)
    assert after == before, {"new": sorted(set(after) - set(before)), "gone": sorted(set(before) - set(after)),
                             "changed": sorted(k for k in before.keys() & after.keys() if before[k] != after[k])}
    if output is not None:
        assert not (work / output).exists()


def test_every_command_that_takes_dry_run_has_a_case():
    from trek.cli import COMMANDS, load_command

    found: set[str] = set()

    def walk(cmd, path: list[str]) -> None:
        if any("--dry-run" in getattr(p, "opts", ()) for p in cmd.params):
            found.add(" ".join(path))
        if hasattr(cmd, "list_commands"):  # a group
            ctx = cmd.make_context(path[-1], [], resilient_parsing=True)
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), [*path, name])

    for name in COMMANDS:
        walk(load_command(name), [name])
    covered = {command.replace("trace", "trace run") if command == "trace" else command
               for command, _, _ in cases("").values()}
    assert found == covered


def test_a_dry_run_opens_stores_read_only(tmp_path):
    """The rule underneath: inside trek.sqlite.read_only a missing file stays missing (an empty
    store in memory), an existing one is read and never written, and a page store takes its writes
    on a copy in memory."""
    from trek.llm import LLMCache
    from trek.pages import PageStore
    from trek.sqlite import StorageError, read_only
    from trek.types import Document

    cache = LLMCache(tmp_path / "c.sqlite")
    cache.store("k", {"model": "m"}, {"reply": 1})
    cache.close()
    pages = PageStore(tmp_path / "pages.sqlite")
    pages.add_documents([Document(id="a", url="https://example.org/a", title="A", text="first text")])
    pages.close()
    settle(tmp_path)
    before = tree(tmp_path)
    with read_only():
        missing = LLMCache(tmp_path / "sub" / "new.sqlite")
        assert len(missing) == 0
        there = LLMCache(tmp_path / "c.sqlite")
        assert there.lookup("k") == {"reply": 1}
        with pytest.raises(StorageError, match="a dry run may not write"):
            there.store("k2", {"model": "m"}, {"reply": 2})
        store = PageStore(tmp_path / "pages.sqlite")
        store.add_documents([Document(id="b", url="https://example.org/b", title="B", text="second text")])
        assert len(store) == 2 and store.lookup("https://example.org/a").text == "first text"
        for closable in (missing, there, store):
            closable.close()
    assert tree(tmp_path) == before
