"""Bounded memory of the stage executor and of the run readers (issue 31): resume indexes a
record file instead of loading it, the tally holds counts and not records, finished records are
released, compaction copies lines from the file, and ``runs.frame`` reads only what its
columns need. Memory is measured with ``tracemalloc`` on records far larger than the bound."""

from __future__ import annotations

import dataclasses
import json
import tracemalloc
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import model_validator

from trek import runs
from trek.aio import fan_out, run_sync
from trek.stage import Slot, Stage, StageTally, execute, plan
from trek.types import Grade, Question, Record, RecordError, Trajectory, Usage, iter_json_lines, write_jsonl


class Counted(Record):
    """A record that counts how often a whole one is built (validated or constructed)."""

    built: ClassVar[int] = 0
    question_id: str
    status: str
    value: str = ""
    error: str | None = None
    input_key: str | None = None

    @model_validator(mode="after")
    def _count(self) -> Counted:
        type(self).built += 1
        return self


class Big(Stage[tuple[str, str], Counted]):
    """Items are (id, text); each record carries ``size`` characters (so records dwarf the index)."""

    record = Counted
    name = "big"
    head_fields: ClassVar[tuple[str, ...] | None] = ("question_id", "status", "input_key", "error")

    def __init__(self, root: Path, size: int = 10, heads: bool = True):
        self.root, self.size, self.calls = root, size, 0
        if not heads:
            self.head_fields = None  # type: ignore[misc]

    def slot(self, item):
        return Slot(self.root / "out.jsonl", item[0])

    def input_key(self, item):
        return f"k:{item[1]}"

    async def produce(self, item, key):
        self.calls += 1
        return Counted(question_id=item[0], status="ok", value=item[1] * self.size, input_key=key)

    def failure(self, item, key, error):
        return Counted(question_id=item[0], status="failed", error=error, input_key=key)


def lines(path: Path) -> list[dict]:
    return [o for _, o in iter_json_lines(path)]


def test_resume_reads_only_the_head_fields_and_builds_no_record(tmp_path):
    items = [(f"q{i}", "x") for i in range(20)]
    run_sync(execute(Big(tmp_path), items, progress=False))
    before = (tmp_path / "out.jsonl").read_bytes()
    Counted.built = 0
    again = Big(tmp_path)
    t = run_sync(execute(again, items, progress=False))
    assert (again.calls, t.kept, Counted.built) == (0, 20, 0)
    assert (tmp_path / "out.jsonl").read_bytes() == before  # nothing to compact: not rewritten
    # a stage that names no head fields has every previous line validated as a whole record
    Counted.built = 0
    run_sync(execute(Big(tmp_path, heads=False), items, progress=False))
    assert Counted.built == 20


def test_compaction_copies_kept_lines_from_the_file_in_the_items_order(tmp_path):
    run_sync(execute(Big(tmp_path), [("a", "x"), ("b", "y"), ("c", "z")], progress=False))
    Counted.built = 0
    stage = Big(tmp_path)
    run_sync(execute(stage, [("c", "z"), ("b", "Y"), ("a", "x")], progress=False))
    assert stage.calls == 1 and Counted.built == 1  # only the record made now (b) was built
    assert [(o["question_id"], o["value"]) for o in lines(tmp_path / "out.jsonl")] == \
        [("c", "z" * 10), ("b", "Y" * 10), ("a", "x" * 10)]


def test_the_tally_holds_counts_not_records_and_reads_them_back_from_the_file(tmp_path):
    assert "records" not in {f.name for f in dataclasses.fields(StageTally)}
    t = run_sync(execute(Big(tmp_path), [("a", "x"), ("b", "y")], progress=False))
    assert dict(t.counts) == {"ok": 2} and [r.question_id for r in t.iter(tmp_path / "out.jsonl")] == ["a", "b"]
    # what the tally returns is what the file holds now, not a copy kept in memory
    recs = lines(tmp_path / "out.jsonl")
    recs[0]["value"] = "changed"
    write_jsonl(tmp_path / "out.jsonl", recs)
    assert [r.value for r in t.of(tmp_path / "out.jsonl")] == ["changed", "y" * 10]


def test_a_plan_keeps_heads_not_records(tmp_path):
    run_sync(execute(Big(tmp_path), [("a", "x"), ("b", "y")], progress=False))
    p = plan(Big(tmp_path), [("a", "x"), ("b", "Y")])
    (head,) = p.kept.values()
    assert not isinstance(head, Counted) and (head.key, head.final, head.status) == ("k:x", True, "ok")
    assert [it[0] for it in p.todo] == ["b"]


def test_a_run_of_large_records_stays_in_bounded_memory(tmp_path):
    # 150 records of 64 KB (about 10 MB): neither the run nor its resume with every other input
    # changed (a compaction that copies the kept half) may hold them
    n, size = 150, 64 * 1024
    items = [(f"q{i:03d}", "a") for i in range(n)]
    tracemalloc.start()
    try:
        run_sync(execute(Big(tmp_path, size), items, progress=False, checkpoint_seconds=0, limit=4))
        _, first = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        changed = [(i, "b" if k % 2 else t) for k, (i, t) in enumerate(items)]
        run_sync(execute(Big(tmp_path, size), changed, progress=False, checkpoint_seconds=0, limit=4))
        _, second = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (tmp_path / "out.jsonl").stat().st_size > n * size
    assert first < 3 * 2**20 and second < 3 * 2**20, (first, second)
    assert [o["value"][0] for o in lines(tmp_path / "out.jsonl")] == ["a", "b"] * (n // 2)


def test_fan_out_without_results_keeps_none_and_bounds_the_jobs_in_flight():
    alive = peak = 0
    seen: list[int] = []

    async def job(x):
        nonlocal alive, peak
        alive += 1
        peak = max(peak, alive)
        await __import__("asyncio").sleep(0)
        alive -= 1
        return x * 2

    out = run_sync(fan_out(range(50), job, limit=3, progress=False, keep_results=False,
                           on_result=lambda i, r: seen.append(r)))
    assert out == [] and sorted(seen) == [x * 2 for x in range(50)] and peak <= 3
    assert run_sync(fan_out([1, 2], job, progress=False)) == [2, 4]


def _run_dir(tmp_path: Path) -> Path:
    rd = tmp_path / "run"
    rd.mkdir()
    write_jsonl(rd / runs.QUESTIONS, [Question(id=f"q{i}", dataset="freshqa", question="?", answers=["x"])
                                      for i in range(3)])
    write_jsonl(rd / runs.ANSWERS, [
        Trajectory(question_id="q0", model="m", final_answer="x", usage=Usage(prompt_tokens=5, cost_usd=0.5)),
        Trajectory(question_id="q1", model="m", status="pending"),
    ])
    write_jsonl(rd / runs.GRADES, [Grade(question_id="q0", dataset="freshqa", response="x", outcome="correct",
                                         grader="freshqa", grader_version="1")])
    return rd


def test_frame_builds_only_the_columns_asked_for_and_reads_only_their_files(tmp_path):
    rd = _run_dir(tmp_path)
    full = runs.frame(rd)
    assert list(full.columns) == runs.FRAME_COLUMNS
    assert list(full["answer_status"]) == ["ok", "pending", "missing"]
    assert list(full["correct"]) == [True, False, False] and list(full["prompt_tokens"]) == [5, 0, 0]
    some = runs.frame(rd, columns=["outcome", "question_id"])
    assert list(some.columns) == ["outcome", "question_id"]
    assert some.to_dict("list") == {"outcome": ["correct", "ungraded", "ungraded"], "question_id": ["q0", "q1", "q2"]}
    # no answer column: answers.jsonl is not read (a broken line there does not matter)
    with (rd / runs.ANSWERS).open("a") as fh:
        fh.write("{not json\n")
    assert runs.frame(rd, columns=["question_id", "correct"])["correct"].tolist() == [True, False, False]
    with pytest.raises(RecordError, match="answers.jsonl"):
        runs.frame(rd)
    with pytest.raises(ValueError, match="unknown column"):
        runs.frame(rd, columns=["question_id", "nope"])


def test_frame_still_refuses_an_answer_to_an_unknown_question(tmp_path):
    rd = _run_dir(tmp_path)
    with (rd / runs.ANSWERS).open("a") as fh:
        fh.write(json.dumps({"question_id": "zz", "model": "m"}) + "\n")
    with pytest.raises(RecordError, match="'zz' is not in questions.jsonl"):
        runs.frame(rd, columns=["answer"])


class Item:
    """An item that can be watched (weak references): how many are alive at a time."""

    alive = 0
    most = 0

    def __init__(self, rid: str, text: str):
        self.rid, self.text = rid, text
        type(self).alive += 1
        type(self).most = max(type(self).most, type(self).alive)

    def __del__(self):
        type(self).alive -= 1

    def __getitem__(self, i):
        return (self.rid, self.text)[i]


def test_a_re_readable_source_is_read_twice_and_no_item_is_held(tmp_path):
    from trek.stage import Reread

    passes = []

    def items():
        passes.append(1)
        for i in range(300):
            yield Item(f"q{i:03d}", "a")

    Item.alive = Item.most = 0
    t = run_sync(execute(Big(tmp_path), Reread(items, 300), progress=False, limit=4))
    assert (t.items, t.made, len(passes)) == (300, 300, 2)  # the plan's pass, then the items to run
    assert Item.most <= 4 + 2 and Item.alive == 0  # those in flight (and the one being read)
    assert [o["question_id"] for o in lines(tmp_path / "out.jsonl")] == [f"q{i:03d}" for i in range(300)]
    # a resume with every record kept reads the source once, holding the item read (and the one before)
    passes.clear()
    Item.most = 0
    again = Big(tmp_path)
    t = run_sync(execute(again, Reread(items, 300), progress=False, limit=4))
    assert (t.kept, again.calls, len(passes)) == (300, 0, 1) and Item.most <= 2
    # a list still works, and gives the same file
    before = (tmp_path / "out.jsonl").read_bytes()
    run_sync(execute(Big(tmp_path), [(f"q{i:03d}", "a") for i in range(300)], progress=False))
    assert (tmp_path / "out.jsonl").read_bytes() == before


def test_a_plan_reads_its_source_once_and_keeps_ids_and_keys_not_items(tmp_path):
    from trek.stage import Reread

    run_sync(execute(Big(tmp_path), [("a", "x"), ("b", "y"), ("c", "z")], progress=False))
    Item.alive = Item.most = 0
    p = plan(Big(tmp_path), Reread(lambda: iter([Item("a", "x"), Item("b", "Y"), Item("c", "z")]), 3))
    assert Item.alive == 0  # the plan holds none of them
    assert (p.items, p.runs, p.n_kept, [s.id for s in p.slots]) == (3, 1, 2, ["a", "b", "c"])
    assert [it.rid for it in p.todo] == ["b"] and p.keys == ["k:Y"] and list(p.run) == [0, 1, 0]


def test_an_iterator_is_refused_as_it_cannot_be_read_twice(tmp_path):
    with pytest.raises(TypeError, match="re-readable"):
        run_sync(execute(Big(tmp_path), iter([("a", "x")]), progress=False))
    assert not (tmp_path / "out.jsonl").exists()


def test_a_source_that_changes_between_passes_is_an_error(tmp_path):
    from trek.stage import Reread

    calls = []

    def items():
        calls.append(1)
        return [("a", "x"), ("b", "y")] if len(calls) == 1 else [("b", "y"), ("a", "x")]

    with pytest.raises(RuntimeError, match="changed between two passes"):
        run_sync(execute(Big(tmp_path), Reread(items), progress=False))


def test_strings_keep_every_text_as_given():
    from trek.stage import Strings

    texts = ["q1", "", "élan:ü/日本", "x" * 300, "q1"]
    s = Strings(texts)
    assert len(s) == 5 and list(s) == texts and s == texts and s == Strings(texts)
    assert [s[i] for i in range(5)] == texts and s[-1] == "q1" and s[2] == "élan:ü/日本"
    with pytest.raises(IndexError):
        s[5]
    with pytest.raises(IndexError):
        s[-6]
    s.append("new")
    assert s[5] == "new" and s != texts and s == [*texts, "new"]


def test_records_made_now_keep_their_status_and_error_through_compaction(tmp_path):
    # one record file, three items: one kept from an earlier run, two made now (one failed)
    from trek.aio import run_sync
    from trek.stage import Slot, Stage, execute
    from trek.types import Record

    class Rec(Record):
        question_id: str
        status: str
        error: str | None = None
        input_key: str | None = None

    class S(Stage):
        record = Rec
        name = "s"

        def __init__(self, out, bad):
            self.out, self.bad = out, bad

        def slot(self, item):
            return Slot(self.out, item)

        def input_key(self, item):
            return f"k:{item}"

        async def produce(self, item, key):
            if item in self.bad:
                raise RuntimeError(f"{item} broke")
            return Rec(question_id=item, status="ok", input_key=key)

        def failure(self, item, key, error):
            return Rec(question_id=item, status="failed", error=error, input_key=key)

    out = tmp_path / "recs.jsonl"
    run_sync(execute(S(out, set()), ["a"], progress=False))
    t = run_sync(execute(S(out, {"c"}), ["a", "b", "c"], progress=False))
    assert (t.kept, t.made, dict(t.counts)) == (1, 2, {"ok": 2, "failed": 1})
    assert t.errors == ["failed c: internal error: RuntimeError: c broke"]
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["question_id"], r["status"]) for r in recs] == [("a", "ok"), ("b", "ok"), ("c", "failed")]


class Waiting(Big):
    """:class:`Big` whose items each wait a few turns of the loop, counting the items in flight
    and the loop's tasks at their most, with clients that allow ``connections`` requests."""

    def __init__(self, root: Path, clients: list):
        super().__init__(root)
        self.clients, self.alive, self.most, self.most_tasks = clients, 0, 0, 0

    def llm_clients(self):
        return self.clients

    async def produce(self, item, key):
        import asyncio

        self.alive += 1
        self.most = max(self.most, self.alive)
        self.most_tasks = max(self.most_tasks, len(asyncio.all_tasks()))
        for _ in range(3):
            await asyncio.sleep(0)
        self.alive -= 1
        return await super().produce(item, key)


def test_without_a_limit_the_executor_runs_a_bounded_window_of_items(tmp_path):
    from types import SimpleNamespace

    from trek.stage import WINDOW, window

    n = 3 * WINDOW + 7
    items = [(f"q{i:04d}", "a") for i in range(n)]
    stage = Waiting(tmp_path, [SimpleNamespace(max_connections=8)])
    t = run_sync(execute(stage, items, progress=False))
    assert (t.made, stage.calls) == (n, n)
    # the window is full (the clients are kept busy) but never more: one task an item in flight,
    # besides the task running the stage itself
    assert stage.most == window(stage) == WINDOW
    assert stage.most_tasks <= WINDOW + 2, stage.most_tasks
    assert [o["question_id"] for o in lines(tmp_path / "out.jsonl")] == [i for i, _ in items]
    # an explicit limit is kept as given
    wide = Waiting(tmp_path / "b", [])
    run_sync(execute(wide, items, progress=False, limit=5))
    assert wide.most == 5


def test_the_window_follows_the_clients_connections():
    from types import SimpleNamespace

    from trek.llm.client import LLMClient
    from trek.stage import WINDOW, window

    def stage(*clients):
        return Waiting(Path("."), list(clients))

    assert window(stage(), 7) == 7 and window(stage()) == WINDOW
    assert window(stage(None, SimpleNamespace(max_connections=3))) == WINDOW  # few connections: the floor
    assert window(stage(SimpleNamespace(max_connections=100), SimpleNamespace(max_connections=60))) == 320
    assert window(stage(SimpleNamespace(connections=300, max_connections=100))) == 600
    pool = LLMClient(model="m", base_url="http://a.invalid/v1,http://b.invalid/v1", max_connections=200)
    single = LLMClient(model="m", base_url="http://a.invalid/v1", max_connections=200)
    assert (pool.connections, single.connections) == (400, 200)
    assert window(stage(pool)) == 800 and window(stage(single)) == 400
