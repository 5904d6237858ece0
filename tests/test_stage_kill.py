"""kill -9 at random points, then resume: for each of the four stages (Wild answering, grading,
TrekTrace, Ctrl runs), every record file stays whole (no torn line), no call whose reply was
stored before the kill is sent again, and the resumed run ends with the records an
uninterrupted run makes. Two writers at once: the second stops with the first one's process id,
and the first ends with every record.

Each stage runs as the real ``trek`` command in a child process against the scripted fake server
of the offline demo (``tests/demo``). Nothing depends on timing: the server answers a chosen
number of requests and holds every later one unanswered (``hold_after``), and the test kills the
child with SIGKILL once the replies answered are in its cache, so the kill lands while calls are
in flight and exactly the answered calls must not be sent again. The two writers: the server
holds the first writer's calls until the second has been refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trek import runs
from trek.datasets import mini
from trek.testing.fake_openai import FakeOpenAIServer, request_key
from trek.types import iter_json_lines

pytestmark = pytest.mark.slow

JUDGE, DIAG, ANA, MODEL = "demo-judge", "demo-diagnostic-judge", "demo-analysis-judge", "demo-lm"


def command(stage: str, target: Path, url: str, build: Path | None = None) -> list[str]:
    common = ["--max-connections", "2", "--no-progress"]
    if stage == "wild":
        return ["wild", "run", "--model", MODEL, "--base-url", url, "--run", str(target), "--questions", "mini",
                "--search", "local", "--system", "search-then-read", *common]
    if stage == "grade":
        return ["grade", str(target), "--judge", JUDGE, "--judge-base-url", url, *common]
    if stage == "trace":
        return ["trace", str(target), "--diagnostic-judge", DIAG, "--analysis-judge", ANA, "--judge-base-url", url,
                "--base-url", url, "--check-stale", *common]
    assert stage == "ctrl" and build is not None
    return ["ctrl", "run", str(build / "contexts.jsonl"), "--model", MODEL, "--base-url", url,
            "--methods", "direct,filter", "--conditions", "OO,MND,SAA", "--runs", str(target), *common]


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TREK_"))}
    e["OPENAI_API_KEY"] = "demo"
    return e


def trek(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "trek.cli", *args], env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(args: list[str]) -> None:
    p = trek(args)
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, f"trek {' '.join(args)} exited {p.returncode}\n{out}\n{err}"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The fake server (demo model, judges and probes) and the reference snapshots of an
    uninterrupted chain: answered, graded, traced, and a Ctrl build with its grid answered."""
    import importlib.util

    here = Path(__file__).resolve().parent / "demo"

    def load(name):
        spec = importlib.util.spec_from_file_location(name, here / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    bench = mini.load()
    script = load("demo_runs").demo_script(bench.questions, bench) + load("demo_trace").demo_trace_script(bench, MODEL)
    base = tmp_path_factory.mktemp("kill")
    with FakeOpenAIServer(script=script, latency=0.04) as srv:
        snaps = {}
        run = base / "run"
        for stage in ("wild", "grade", "trace"):
            snaps[f"before-{stage}"] = None
            if run.exists():
                snaps[f"before-{stage}"] = base / f"before-{stage}"
                shutil.copytree(run, snaps[f"before-{stage}"])
            srv.reset_stats()
            finish(command(stage, run, srv.base_url))
            snaps[f"requests-{stage}"] = srv.stats()["requests"]
            snaps[f"after-{stage}"] = base / f"after-{stage}"
            shutil.copytree(run, snaps[f"after-{stage}"])
        build = base / "build"
        finish(["ctrl", "build", "--source", "mini", "--out", str(build)])
        snaps["before-ctrl"] = None
        srv.reset_stats()
        finish(command("ctrl", base / "grid", srv.base_url, build))
        snaps["requests-ctrl"] = srv.stats()["requests"]
        snaps["after-ctrl"] = base / "grid"
        yield srv, snaps, build, base


def outcome(stage: str, where: Path) -> dict[str, object]:
    """What the stage decided, by record (the part that must not depend on a kill)."""
    if stage == "ctrl":
        return {f"{d.name}/{qid}": (t.status, t.final_answer) for d in sorted(where.iterdir()) if d.is_dir()
                for qid, t in runs.load_answers(d).items()}
    if stage == "wild":
        return {qid: (t.status, t.final_answer) for qid, t in runs.load_answers(where).items()}
    if stage == "grade":
        return {qid: g.outcome for qid, g in runs.load_grades(where).items()}
    return {o["question_id"]: (o["status"], o["labels"]) for _, o in iter_json_lines(where / runs.TRACE)}


def stored_keys(where: Path) -> set[str]:
    """The fake server's keys of every request whose reply is in the caches under ``where``."""
    keys = set()
    for db in where.rglob("llm-cache.sqlite"):
        con = sqlite3.connect(db)
        try:
            for (req,) in con.execute("SELECT request FROM responses"):
                body = json.loads(req)["body"]
                keys.add(request_key(body.get("messages")))
        finally:
            con.close()
    return keys


def assert_whole(where: Path, *, journal: bool = False) -> None:
    """Every record file reads without error; ``journal``: right after a kill, where a record
    journal may end in one partial line (dropped by the readers), but no other line is broken."""
    for f in where.rglob("*.jsonl"):
        for _ in iter_json_lines(f, torn_tail=journal):  # raises on a broken line
            pass


@pytest.mark.parametrize("stage", ["wild", "grade", "trace", "ctrl"])
def test_kill_9_at_random_points_then_resume(stage, world, tmp_path):
    srv, snaps, build, base = world
    reference = outcome(stage, snaps[f"after-{stage}"])
    assert reference  # the stage did something to compare with
    rng = random.Random(f"kill-{stage}")
    total = snaps[f"requests-{stage}"]  # what an uninterrupted run sends, to choose the kill points
    assert total >= 8
    for n, fraction in enumerate((0.25, 0.6)):
        target = tmp_path / f"killed-{n}"
        if snaps[f"before-{stage}"] is not None:
            shutil.copytree(snaps[f"before-{stage}"], target)
        at = max(1, int(total * fraction) + rng.randint(-2, 2))
        srv.reset_stats()
        # the kill point, without timing: the first `at` calls are answered, every later one is held
        # unanswered at the server (in flight at the kill); the kill comes once the replies answered
        # are in the run's cache, so exactly those must not be sent again
        srv.hold_after(at)
        try:
            proc = trek(command(stage, target, srv.base_url, build))
            with contextlib.suppress(TimeoutError):  # the assertion below says what went wrong
                srv.wait_for(lambda s: s["held"] >= 1 and s["active"] == s["held"], timeout=300)
            assert proc.poll() is None, "the stage finished before the kill point"
            answered = set(srv.stats()["ok_by_key"])
            deadline = time.monotonic() + 120
            while not answered <= stored_keys(target) and time.monotonic() < deadline:
                time.sleep(0.01)  # the replies' commits, on the child's cache writer thread
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)  # dead before the held calls are let through (else they are answered)
        finally:
            srv.release()
        assert proc.returncode == -signal.SIGKILL, "the stage finished before the kill point"
        assert_whole(target, journal=True)
        before = srv.stats()["ok_by_key"]
        stored = stored_keys(target)
        assert stored, "nothing was stored before the kill"
        finish(command(stage, target, srv.base_url, build))
        after = srv.stats()["ok_by_key"]
        repeated = sorted(k for k in stored if after.get(k, 0) != before.get(k, 0))
        assert repeated == [], f"{len(repeated)} stored call(s) sent again after the kill"
        # every call answered before the kill was stored, so none is sent again (the held ones were
        # in flight, unanswered: they are sent again, as they must be)
        resent = [k for k, n in before.items() if after.get(k, 0) > n]
        assert resent == [], f"{len(resent)} answered calls were sent again"
        assert_whole(target)
        assert outcome(stage, target) == reference


@pytest.mark.parametrize("stage", ["wild", "grade", "trace", "ctrl"])
def test_two_writers_on_one_run_directory(stage, world, tmp_path):
    """A second command on a run directory (a Ctrl grid) that another is writing stops at once with
    an error naming the writer's process id, and the first finishes with every record."""
    srv, snaps, build, base = world
    reference = outcome(stage, snaps[f"after-{stage}"])
    target = tmp_path / "run"
    if snaps[f"before-{stage}"] is not None:
        shutil.copytree(snaps[f"before-{stage}"], target)
    srv.reset_stats()
    srv.hold()  # the first writer's calls wait unanswered until the second one has been refused: no timing
    try:
        first = trek(command(stage, target, srv.base_url, build))
        with contextlib.suppress(TimeoutError):  # the assertion below says what went wrong
            srv.wait_for(lambda s: s["held"] >= 1, timeout=300)
        assert first.poll() is None, "the first writer ended before the second one started"
        second = trek(command(stage, target, srv.base_url, build))
        _, err = second.communicate(timeout=300)
    finally:
        srv.release()
    out, err1 = first.communicate(timeout=600)
    flat = " ".join(err.split())
    assert second.returncode == 2, err
    assert f"is being written by process {first.pid}" in flat and "Traceback" not in err
    assert first.returncode == 0, err1
    assert_whole(target)
    assert outcome(stage, target) == reference
