"""A full disk under a run: the error names the file that could not be written (no traceback, no
"cannot rollback" hiding it), the run stops, and what was written before is whole.

Three ways to run out of room, without root: a real limit on the size of files the process may
write (``RLIMIT_FSIZE``, in a child process: SQLite sees its write fail as on a full device),
SQLite statements that fail with SQLite's own "database or disk is full", and ``os.write`` failing
with ``ENOSPC`` for the record files.
"""

from __future__ import annotations

import errno
import os
import re
import resource
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.testing.fake_openai import FakeOpenAIServer
from trek.types import iter_json_lines

ARGS = ["--model", "fake-model", "--questions", "mini", "--search", "local", "--system", "search-then-read",
        "--no-progress", "--max-connections", "2"]


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for var in ("TREK_CACHE", "TREK_SEARCH_CACHE", "TREK_PAGES", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "k")


def whole(run: Path) -> None:
    for f in run.glob("*.jsonl"):
        for _ in iter_json_lines(f):
            pass
    assert not [p for p in run.iterdir() if p.name.endswith(".tmp")]


def test_wild_run_when_the_page_store_cannot_grow(tmp_path):
    """The write that used to end in "cannot rollback - no transaction is active"."""
    run = tmp_path / "run"
    limit = 200_000  # the bundled corpus needs about 800 kB in pages.sqlite

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TREK_"))}
    with FakeOpenAIServer() as srv:
        p = subprocess.run([sys.executable, "-m", "trek.cli", "wild", "run", "--run", str(run), "--base-url",
                            srv.base_url, *ARGS], preexec_fn=small_files, env={**env, "OPENAI_API_KEY": "k"},
                           capture_output=True, text=True, timeout=300)
        assert srv.stats()["requests"] == 0
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and "cannot rollback" not in p.stderr
    assert f"error: {run / 'pages.sqlite'}: cannot write" in p.stderr


def test_wild_run_when_the_response_cache_finds_the_disk_full(tmp_path, monkeypatch):
    from trek import sqlite as trek_sqlite

    real = trek_sqlite.Connection.executemany

    def full(self, sql, *args):
        if "INTO responses" in sql:
            return self._translated(_raise_full, sql)
        return real(self, sql, *args)

    monkeypatch.setattr(trek_sqlite.Connection, "executemany", full)
    run = tmp_path / "run"
    with FakeOpenAIServer() as srv:
        r = CliRunner().invoke(app, ["wild", "run", "--run", str(run), "--base-url", srv.base_url, *ARGS])
        sent = srv.stats()["requests"]
    flat = " ".join(r.output.split())
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert re.search(f"{re.escape(str(run))}/(search|llm)-cache.sqlite: cannot write \\(no space left on the device\\)",
                     flat), flat
    assert "cannot rollback" not in flat
    assert sent <= 4  # the run stopped at the first reply it could not keep (2 in flight)
    whole(run)


def _raise_full(*_):
    raise sqlite3.OperationalError("database or disk is full")


def test_wild_run_when_the_answers_cannot_be_written(tmp_path, monkeypatch):
    run = tmp_path / "run"

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with FakeOpenAIServer() as srv:
        r = CliRunner().invoke(app, ["wild", "run", "--run", str(run), "--base-url", srv.base_url, *ARGS,
                                     "--limit", "2"])
        assert r.exit_code == 0, r.output
        before = {p.name: p.read_bytes() for p in run.glob("*.json*")}
        monkeypatch.setattr(os, "write", full)
        r = CliRunner().invoke(app, ["wild", "run", "--run", str(run), "--base-url", srv.base_url, *ARGS,
                                     "--limit", "4"])
    flat = " ".join(r.output.split())
    assert r.exit_code == 2 and "cannot be written (no space left on the device)" in flat, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert {p.name: p.read_bytes() for p in run.glob("*.json*")} == before  # the previous files, untouched
    whole(run)
    assert len(runs.load_answers(run)) == 2
