"""kill -9 (and Ctrl-C, and SIGTERM) during ``trek ctrl discover`` and during ``trek ctrl build`` with a model
fabricator, then the same command again: no call whose reply was stored before the kill is sent again, and
the outputs are byte for byte those of an uninterrupted run. A second writer of the same folder is
refused with the first one's process id while the first one runs.

Both commands run as the real ``trek`` in a child process against the scripted fake server (the
discovery script of ``test_ctrl_discovery``, the fabrication demo script of ``tests/demo``).
Nothing depends on timing: the server answers a chosen number of requests and holds every later
one unanswered (``hold_after``), and the test kills the child once the replies answered are in its
response cache, so exactly those must not be sent again (the held calls were in flight).
"""

from __future__ import annotations

import contextlib
import importlib.util
import random
import signal
import time
from pathlib import Path

import pytest
from test_ctrl_discovery import SCRIPT, mini_pages
from test_stage_kill import assert_whole, finish, stored_keys, trek

from trek import runs
from trek.ctrl.pools import from_mini, write_pools
from trek.testing.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.slow

IDS = ["mini:01", "mini:02", "mini:03", "mini:04"]


def _demo_build_script():
    here = Path(__file__).resolve().parent / "demo" / "demo_ctrl_build.py"
    spec = importlib.util.spec_from_file_location("demo_ctrl_build", here)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.demo_script(from_mini(question_ids=IDS), target=2)


def command(job: str, target: Path, url: str, inputs: Path) -> list[str]:
    if job == "discover":
        return ["ctrl", "discover", "--source", "pools", "--pools", str(inputs / "start.jsonl"), "--pages",
                str(inputs / "pages.sqlite"), "--discovery", "fake-model", "--discovery-base-url", url, "--search",
                "local", "--out", str(target / runs.POOLS), "--historical", "4", "--relevance", "2"]
    return ["ctrl", "build", "--source", "mini", "--questions", ",".join(IDS), "--out", str(target), "--fabricator",
            "scripted-demo", "--fabricator-base-url", url, "--fabrication", "model", "--fabrications", "2",
            "--attempts", "1", "--conditions", "SAA,SBA", "--no-tokens"]


def outputs(job: str, target: Path) -> dict[str, bytes]:
    """The files an uninterrupted run leaves, by name (what must not depend on a kill)."""
    rd = runs.RunDir(target)
    files = [rd.pools_path, rd.discovery_report(), rd.discovery_records()] if job == "discover" else \
        [rd.pools_path, rd.contexts_path, rd.build_manifest, rd.fabrications_path]
    return {f.name: f.read_bytes() for f in files}


@pytest.fixture(scope="module", params=["discover", "build"])
def world(request, tmp_path_factory):
    """The fake server of the job and the outputs of an uninterrupted run of it."""
    job = request.param
    base = tmp_path_factory.mktemp(f"ctrl-kill-{job}")
    inputs = base / "inputs"
    inputs.mkdir()
    write_pools(inputs / "start.jsonl", [p.model_copy(update={"documents": p.gold}) for p in from_mini(question_ids=IDS)])
    mini_pages(inputs)
    script = SCRIPT if job == "discover" else _demo_build_script()
    with FakeOpenAIServer(script=script, latency=0.04) as srv:
        ref = base / "reference"
        ref.mkdir()
        finish(command(job, ref, srv.base_url, inputs))
        total = srv.stats()["requests"]
        yield job, srv, inputs, outputs(job, ref), total


def interrupt_then_resume(job, srv, inputs, reference, target: Path, at: int, sig: signal.Signals) -> None:
    """Stop the job with ``sig`` once ``at`` calls are answered and stored, then run it again and
    check the rule: no answered call sent again, the outputs of an uninterrupted run."""
    target.mkdir()
    srv.reset_stats()
    srv.hold_after(at)  # the first `at` calls are answered, every later one waits unanswered
    try:
        proc = trek(command(job, target, srv.base_url, inputs))
        with contextlib.suppress(TimeoutError):  # the assertion below says what went wrong
            srv.wait_for(lambda s: s["held"] >= 1 and s["active"] == s["held"], timeout=300)
        assert proc.poll() is None, f"{job} finished before the kill point"
        answered = set(srv.stats()["ok_by_key"])
        deadline = time.monotonic() + 120
        while not answered <= stored_keys(target) and time.monotonic() < deadline:
            time.sleep(0.01)  # the replies' commits, on the child's cache writer thread
        proc.send_signal(sig)
        proc.communicate(timeout=120)
    finally:
        srv.release()
    assert proc.returncode != 0, f"{job} finished before the kill point"
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    assert_whole(target, journal=sig == signal.SIGKILL)  # a Ctrl-C leaves whole record files
    # the outputs are written whole at the end: none is there, half-written or not
    assert not (runs.RunDir(target).build_manifest if job == "build" else target / runs.POOLS).exists()
    before = srv.stats()["ok_by_key"]
    assert before and set(before) <= stored_keys(target), "the answered calls were not stored before the kill"
    finish(command(job, target, srv.base_url, inputs))
    after = srv.stats()["ok_by_key"]
    resent = sorted(k for k, count in before.items() if after.get(k, 0) > count)
    assert resent == [], f"{len(resent)} call(s) answered before the kill were sent again"
    assert_whole(target)
    assert outputs(job, target) == reference, f"the resumed {job} wrote other outputs than an uninterrupted one"


def test_kill_9_then_the_same_command_resumes(world, tmp_path):
    job, srv, inputs, reference, total = world
    assert total >= 8, f"an uninterrupted {job} sends {total} requests: too few to kill it half-way"
    rng = random.Random(f"ctrl-kill-{job}")
    for n, fraction in enumerate((0.3, 0.7)):
        at = max(1, int(total * fraction) + rng.randint(-2, 2))
        interrupt_then_resume(job, srv, inputs, reference, tmp_path / f"killed-{n}", at, signal.SIGKILL)


def test_ctrl_c_then_the_same_command_resumes(world, tmp_path):
    job, srv, inputs, reference, total = world
    interrupt_then_resume(job, srv, inputs, reference, tmp_path / "interrupted", total // 2, signal.SIGINT)


def test_sigterm_is_handled_like_ctrl_c(world, tmp_path):
    # kill PID, a container stop, a CI timeout: the same whole files and the same resume as Ctrl-C
    job, srv, inputs, reference, total = world
    interrupt_then_resume(job, srv, inputs, reference, tmp_path / "terminated", total // 2, signal.SIGTERM)


def test_a_second_writer_is_refused_while_the_first_runs(world, tmp_path):
    job, srv, inputs, reference, _ = world
    srv.reset_stats()
    srv.hold()  # the first writer's calls wait unanswered until the second one has been refused
    try:
        first = trek(command(job, tmp_path, srv.base_url, inputs))
        with contextlib.suppress(TimeoutError):
            srv.wait_for(lambda s: s["held"] >= 1, timeout=300)
        assert first.poll() is None, "the first writer ended before the second one started"
        second = trek(command(job, tmp_path, srv.base_url, inputs))
        _, err = second.communicate(timeout=300)
    finally:
        srv.release()
    _, err1 = first.communicate(timeout=600)
    assert second.returncode == 2 and f"is being written by process {first.pid}" in " ".join(err.split()), err
    assert first.returncode == 0, err1
    assert outputs(job, tmp_path) == reference


def test_a_finished_run_again_sends_nothing(world, tmp_path):
    """The checkpoint, not only the response cache, keeps finished questions: with the cache
    deleted, a second run of a finished job sends no call and writes the same outputs."""
    job, srv, inputs, reference, _ = world
    finish(command(job, tmp_path, srv.base_url, inputs))
    for cache in tmp_path.glob(f"{runs.LLM_CACHE}*"):
        cache.unlink()
    srv.reset_stats()
    finish(command(job, tmp_path, srv.base_url, inputs))
    assert srv.stats()["requests"] == 0
    assert outputs(job, tmp_path) == reference
