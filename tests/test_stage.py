"""The stage executor (trek.stage): resume by input key, error policy, checkpoints, the run lock,
and the synchronous twin."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trek.aio import run_sync
from trek.errors import FatalLLMError, RunFatalError, is_run_fatal
from trek.stage import RunLockedError, Slot, Stage, execute, plan, run_lock, synchronous
from trek.types import Record, iter_json_lines


class Rec(Record):
    question_id: str
    status: str
    value: str | None = None
    error: str | None = None
    input_key: str | None = None


class Toy(Stage[tuple[str, str], Rec]):
    """Items are (id, text); the record's value is the text upper-cased. Texts named in
    ``boom`` raise an internal error, ``fatal`` a run-fatal one, ``pending`` give a pending record."""

    record = Rec
    name = "toy"

    def __init__(self, root: Path, *, boom=(), fatal=(), pending=(), keep_unlisted=False, gate=None):
        self.root, self.boom, self.fatal, self.pending, self.gate = root, set(boom), set(fatal), set(pending), gate
        self.calls: list[str] = []
        self.keep_unlisted = keep_unlisted  # type: ignore[misc]

    def slot(self, item):
        return Slot(self.root / "out.jsonl", item[0])

    def input_key(self, item):
        return f"k:{item[1]}"

    async def produce(self, item, key):
        self.calls.append(item[0])
        if self.gate is not None:
            await self.gate(item)
        if item[1] in self.boom:
            raise KeyError(item[1])
        if item[1] in self.fatal:
            raise FatalLLMError("401 from http://x: bad key", status_code=401)
        if item[1] in self.pending:
            return Rec(question_id=item[0], status="pending", error="judge call failed", input_key=key)
        return Rec(question_id=item[0], status="ok", value=item[1].upper(), input_key=key)

    def failure(self, item, key, error):
        return Rec(question_id=item[0], status="failed", error=error, input_key=key)


def records(path: Path) -> dict[str, dict]:
    return {o["question_id"]: o for _, o in iter_json_lines(path)}


def test_finished_records_with_an_unchanged_key_are_kept_and_a_changed_input_redone(tmp_path):
    items = [("a", "x"), ("b", "y"), ("c", "z")]
    t1 = run_sync(execute(Toy(tmp_path), items, progress=False))
    assert (t1.kept, t1.made, dict(t1.counts)) == (0, 3, {"ok": 3})
    stage = Toy(tmp_path)
    t2 = run_sync(execute(stage, [("a", "x"), ("b", "Y"), ("c", "z")], progress=False))
    assert stage.calls == ["b"] and (t2.kept, t2.made) == (2, 1)
    assert records(tmp_path / "out.jsonl")["b"]["value"] == "Y"
    assert list(records(tmp_path / "out.jsonl")) == ["a", "b", "c"]  # items' order


def test_pending_and_failed_records_are_tried_again(tmp_path):
    run_sync(execute(Toy(tmp_path, pending={"y"}, boom={"z"}), [("a", "x"), ("b", "y"), ("c", "z")], progress=False))
    again = Toy(tmp_path)
    tally = run_sync(execute(again, [("a", "x"), ("b", "y"), ("c", "z")], progress=False))
    assert sorted(again.calls) == ["b", "c"] and dict(tally.counts) == {"ok": 3}


def test_an_internal_error_becomes_a_failed_record_and_the_others_go_on(tmp_path):
    tally = run_sync(execute(Toy(tmp_path, boom={"y"}), [("a", "x"), ("b", "y"), ("c", "z")], progress=False))
    recs = records(tmp_path / "out.jsonl")
    assert recs["b"]["status"] == "failed" and recs["b"]["error"] == "internal error: KeyError: 'y'"
    assert recs["a"]["status"] == recs["c"]["status"] == "ok"
    assert dict(tally.counts) == {"ok": 2, "failed": 1}
    assert tally.errors == ["failed b: internal error: KeyError: 'y'"]


def test_a_run_fatal_error_stops_the_run_after_writing_what_finished(tmp_path):
    done = asyncio.Event()

    async def gate(item):
        if item[1] == "bad":
            await done.wait()  # fail only after the first item has finished

    stage = Toy(tmp_path, fatal={"bad"}, gate=gate)
    real = stage.produce

    async def produce(item, key):
        rec = await real(item, key)
        done.set()
        return rec

    stage.produce = produce
    with pytest.raises(FatalLLMError, match="bad key"):
        run_sync(execute(stage, [("a", "x"), ("b", "bad")], progress=False, limit=2))
    assert records(tmp_path / "out.jsonl") == {"a": {"question_id": "a", "status": "ok", "value": "X", "error": None,
                                                     "input_key": "k:x"}}


def test_run_fatal_rule():
    assert is_run_fatal(FatalLLMError("401 from u: no", status_code=401))
    assert is_run_fatal(FatalLLMError("400 from u: Unsupported parameter: 'temperature'", status_code=400))
    assert is_run_fatal(FatalLLMError("no price"))  # raised before any request
    assert not is_run_fatal(FatalLLMError("400 from u: context too long", status_code=400))
    assert is_run_fatal(RunFatalError("search key missing"))
    assert not is_run_fatal(ValueError("x"))


def test_unlisted_records_are_kept_only_when_the_stage_says_so(tmp_path):
    run_sync(execute(Toy(tmp_path), [("a", "x"), ("b", "y")], progress=False))
    run_sync(execute(Toy(tmp_path, keep_unlisted=True), [("a", "x")], progress=False))
    assert list(records(tmp_path / "out.jsonl")) == ["a", "b"]
    run_sync(execute(Toy(tmp_path, keep_unlisted=False), [("a", "x")], progress=False))
    assert list(records(tmp_path / "out.jsonl")) == ["a"]


def test_owned_outputs_are_written_even_without_items_and_two_items_in_one_slot_are_refused(tmp_path):
    out = tmp_path / "sub" / "out.jsonl"
    run_sync(execute(Toy(tmp_path / "sub"), [], outputs=[out], progress=False))
    assert out.exists() and out.read_text() == ""
    with pytest.raises(ValueError, match="two items would write record 'a'"):
        plan(Toy(tmp_path), [("a", "x"), ("a", "y")])


def test_plan_sees_what_execute_will_do(tmp_path):
    run_sync(execute(Toy(tmp_path, pending={"y"}), [("a", "x"), ("b", "y")], progress=False))
    p = plan(Toy(tmp_path), [("a", "x"), ("b", "y"), ("c", "w")])
    assert [it[0] for it in p.todo] == ["b", "c"] and [s.id for s in p.kept] == ["a"]


def test_checkpoints_are_written_while_the_stage_runs(tmp_path):
    seen: list[int] = []
    out = tmp_path / "out.jsonl"

    async def gate(item):
        await asyncio.sleep(0)  # let the previous item's checkpoint happen first
        seen.append(len(records(out)) if out.exists() else 0)

    run_sync(execute(Toy(tmp_path, gate=gate), [(str(i), str(i)) for i in range(5)], progress=False, limit=1,
                     checkpoint_seconds=0.0))
    assert seen == [0, 1, 2, 3, 4]  # every finished item was on disk before the next one started


HOLD = textwrap.dedent("""
    import sys, time
    from trek.stage import run_lock
    with run_lock(sys.argv[1]):
        print("held", flush=True)
        sys.stdin.readline()
""")


def test_a_second_writer_is_refused_with_the_holders_pid_and_the_lock_dies_with_its_process(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(RunLockedError, match=f"being written by process {proc.pid}"), run_lock(tmp_path):
            pass
        with pytest.raises(RunLockedError):
            run_sync(execute(Toy(tmp_path), [("a", "x")], progress=False))
        assert not (tmp_path / "out.jsonl").exists()
    finally:
        proc.kill()  # like kill -9: no clean-up code runs
        proc.wait()
    with run_lock(tmp_path), run_lock(tmp_path):  # free again, and re-entrant within a process
        pass


def test_synchronous_twin_keeps_the_signature_and_closes_what_it_names(tmp_path):
    class Res:
        closed = 0

        async def aclose(self):
            self.closed += 1

    async def work(items: list[int], client: Res, *, scale: int = 2) -> list[int]:
        """Scale the items."""
        return [i * scale for i in items]

    twin = synchronous(work, close=("client",))
    assert inspect.signature(twin) == inspect.signature(work)
    r = Res()
    assert twin([1, 2], r, scale=3) == [3, 6] and r.closed == 1
    with pytest.raises(TypeError, match="no parameter"):
        synchronous(work, close=("nope",))


def test_no_module_outside_trek_llm_reaches_into_the_clients_private_closing():
    root = Path(__file__).resolve().parents[1] / "trek"
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if "llm" not in p.relative_to(root).parts[:1] and "._closing(" in p.read_text(encoding="utf-8")]
    assert offenders == []


def test_records_are_never_torn(tmp_path):
    out = tmp_path / "out.jsonl"
    run_sync(execute(Toy(tmp_path), [(str(i), "x" * 1000) for i in range(50)], progress=False,
                     checkpoint_seconds=0.0))
    lines = out.read_text().splitlines()
    assert len(lines) == 50 and all(json.loads(x)["value"] == "X" * 1000 for x in lines)
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


# -- the record journal ----------------------------------------------------------------------------
def count_rewrites(monkeypatch) -> list[Path]:
    import trek.stage

    seen: list[Path] = []
    real = trek.stage.write_jsonl

    def counting(path, recs):
        seen.append(Path(path))
        return real(path, recs)

    monkeypatch.setattr(trek.stage, "write_jsonl", counting)
    return seen


def test_finished_records_are_appended_and_the_file_is_rewritten_once_per_run(tmp_path, monkeypatch):
    rewrites = count_rewrites(monkeypatch)
    out = tmp_path / "out.jsonl"
    sizes: list[int] = []

    async def gate(item):
        await asyncio.sleep(0)
        sizes.append(out.stat().st_size if out.exists() else 0)

    items = [(f"{i:03d}", f"v{i}") for i in range(200)]
    run_sync(execute(Toy(tmp_path, gate=gate), items, progress=False, limit=1, checkpoint_seconds=0.0))
    assert rewrites == [out]  # 200 checkpoints, one whole-file write (the compaction at the end)
    assert sizes == sorted(sizes) and sizes[-1] > 0  # the journal only grew while the stage ran
    assert list(records(out)) == [i for i, _ in items]
    # a second run that keeps every record writes nothing at all
    rewrites.clear()
    before = out.stat().st_mtime_ns, out.stat().st_ino
    run_sync(execute(Toy(tmp_path), items, progress=False))
    assert rewrites == [] and (out.stat().st_mtime_ns, out.stat().st_ino) == before


def test_a_torn_last_line_is_dropped_with_a_warning_and_its_record_made_again(tmp_path, caplog):
    out = tmp_path / "out.jsonl"
    run_sync(execute(Toy(tmp_path), [("a", "x"), ("b", "y")], progress=False))
    whole = out.read_bytes()
    out.write_bytes(whole + b'{"question_id": "c", "status": "o')  # a writer killed mid-line
    toy = Toy(tmp_path)
    with caplog.at_level("WARNING", logger="trek"):
        run_sync(execute(toy, [("a", "x"), ("b", "y"), ("c", "z")], progress=False))
    assert toy.calls == ["c"]
    assert any("partial last line" in r.getMessage() and "out.jsonl, line 3" in r.getMessage() for r in caplog.records)
    assert [json.loads(x)["question_id"] for x in out.read_text().splitlines()] == ["a", "b", "c"]


def test_a_superseded_line_left_by_a_kill_is_compacted_away_on_resume(tmp_path):
    out = tmp_path / "out.jsonl"
    run_sync(execute(Toy(tmp_path, pending={"y"}), [("a", "x"), ("b", "y")], progress=False))
    # as after a kill: the journal holds an old line of b and a newer one appended after it
    lines = out.read_text().splitlines()
    newer = json.dumps({"question_id": "b", "status": "ok", "value": "Y", "input_key": "k:y"})
    out.write_text("\n".join([*lines, newer]) + "\n")
    toy = Toy(tmp_path)
    run_sync(execute(toy, [("a", "x"), ("b", "y")], progress=False))
    assert toy.calls == []  # the newer line of b counts
    assert [json.loads(x)["status"] for x in out.read_text().splitlines()] == ["ok", "ok"]


def test_journal_completes_a_whole_last_line_and_cuts_a_partial_one(tmp_path):
    from trek.journal import Journal

    whole, partial = tmp_path / "whole.jsonl", tmp_path / "partial.jsonl"
    whole.write_bytes(b'{"question_id": "a"}\n{"question_id": "b"}')
    partial.write_bytes(b'{"question_id": "a"}\n{"question_id": "b", "sta')
    for p in (whole, partial):
        with Journal(p) as j:
            j.add({"question_id": "c"})
            j.flush()
            assert j.lines == 1 and j.bytes == len(b'{"question_id":"c"}\n')
    assert [o["question_id"] for _, o in iter_json_lines(whole)] == ["a", "b", "c"]
    assert [o["question_id"] for _, o in iter_json_lines(partial)] == ["a", "c"]
