"""``make runs`` (trek.experiments): record, replay byte for byte, re-run only what a change touched.

The model is the scripted fake server standing in for the embedded one (``server=``), so these
tests speak the real OpenAI wire format without llama.cpp. The last test replays the committed
``data/runs`` with no model at all.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from trek import templates
from trek.ctrl.pools import from_mini, shorten
from trek.experiments import REPLAY, ExperimentsError, Settings, question_ids_by_style, run_experiments
from trek.llm import FatalLLMError, LLMCache, LLMClient
from trek.llm.structured import achat_json, object_schema
from trek.local import LocalModelUnavailable
from trek.testing.fake_openai import FakeOpenAIServer
from trek.types import RecordError, Usage, utcnow, write_jsonl

REPO = Path(__file__).resolve().parents[1]
QUIET = {"progress": False, "echo": lambda _: None}
#: SealQA's judge says "incorrect" (B), so TrekTrace gets failures to attribute; every other reply
#: is the fake server's default text (unreadable as JSON: unparsed grades, unknown judgments).
SCRIPT = [{"any_pattern": "Gold target:", "reply": json.dumps({"verdict": "B"})}]
SMALL = replace(Settings(), wild_questions=3, ctrl_questions=1, ctrl_conditions=("OO", "GOLD"),
                ctrl_ablations=("OO:k=5",), ctrl_trace_runs=("direct:OO",))


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` but the run locks (which git ignores)."""
    from trek.stage import LOCK_FILE

    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != LOCK_FILE}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    root = tmp_path_factory.mktemp("experiments")
    with FakeOpenAIServer(script=SCRIPT) as srv:
        report = run_experiments(root / "runs", work=root / "work", settings=SMALL, server=lambda: srv, **QUIET)
        served = srv.stats()["requests"]
    return root, report, served


def test_a_recording_writes_every_stage_and_its_replay_log(recorded):
    root, report, served = recorded
    out = root / "runs"
    assert report.calls == served > 0
    assert report.passes == 2  # the first pass called the model, the second wrote the files from the cache
    names = {s.name for s in report.stages}
    assert {"wild no-search", "wild agentic", "trace agentic", "ctrl build (fabrication)", "ctrl grading"} <= names
    for label in ("no-search", "search-then-read", "agentic"):
        assert {"run.json", "questions.jsonl", "answers.jsonl", "grades.jsonl"} <= set(tree(out / "wild" / label))
    assert (out / "wild" / "agentic" / "trace.jsonl").read_text().strip()  # the SealQA failure was traced
    assert not (out / "wild" / "no-search" / "trace.jsonl").exists()
    ctrl_runs = sorted(p.name for p in (out / "ctrl" / "runs").iterdir())
    assert len(ctrl_runs) == 4 * 1 + 1 + 1  # four methods on OO, Direct on GOLD and on OO:k=5
    assert not [p for p in out.rglob("*") if p.suffix in (".sqlite", ".tmp")]
    readme = (out / "README.md").read_text()
    assert "TrekBench-Mini" in readme and '"wild_questions": 3' in readme
    entries = [json.loads(x) for x in gzip.decompress((out / REPLAY).read_bytes()).decode().splitlines()]
    assert len(entries) == served and [e["key"] for e in entries] == sorted(e["key"] for e in entries)


def test_no_absolute_path_or_wall_clock_time_reaches_the_results(recorded):
    root, _, _ = recorded
    for name, data in tree(root / "runs").items():
        if name.endswith(".gz"):
            continue
        text = data.decode("utf-8")
        assert str(root) not in text and str(REPO) not in text, name
        stamps = set(re.findall(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z", text))
        assert stamps <= {"2026-12-01T00:00:00Z"}, (name, stamps)


def test_the_replay_log_alone_reproduces_every_file_with_no_model(recorded, tmp_path):
    root, _, _ = recorded
    report = run_experiments(tmp_path / "again", work=tmp_path / "work", replay=root / "runs" / REPLAY,
                             replay_only=True, settings=SMALL, **QUIET)
    assert report.calls == 0 and report.passes == 1
    assert tree(tmp_path / "again") == tree(root / "runs")


def test_a_changed_prompt_calls_the_model_only_for_what_it_changed(recorded, tmp_path):
    root, _, _ = recorded
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "rag.answer.txt").write_text(
        "Documents:\n{docs_block}\n\nAs of {effective_year}: {question}\nShort answer:", encoding="utf-8")
    with FakeOpenAIServer(script=SCRIPT) as srv, templates.prompts_folder(prompts):
        report = run_experiments(tmp_path / "changed", work=tmp_path / "work", replay=root / "runs" / REPLAY,
                                 settings=SMALL, server=lambda: srv, **QUIET)
        served = srv.stats()["requests"]
    by_stage = {s.name: s.calls for s in report.stages}
    assert served == report.calls > 0
    assert all(calls == 0 for name, calls in by_stage.items() if not name.startswith("ctrl runs")
               and name != "ctrl grading"), by_stage
    assert by_stage["ctrl runs (baselines)"] > 0


def test_replay_only_names_the_stage_whose_reply_is_missing(tmp_path):
    with pytest.raises(ExperimentsError, match="wild no-search: .*replay only"):
        run_experiments(tmp_path / "out", work=tmp_path / "work", replay_only=True, settings=SMALL, **QUIET)
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_a_missing_replay_log_is_an_error(tmp_path):
    with pytest.raises(ExperimentsError, match="does not exist"):
        run_experiments(tmp_path / "out", work=tmp_path / "work", replay=tmp_path / "nope.jsonl.gz", **QUIET)


@pytest.mark.slow
def test_make_runs_replays_the_committed_results_byte_for_byte(tmp_path):
    committed = REPO / "data" / "runs"
    report = run_experiments(tmp_path / "runs", work=tmp_path / "work", replay=committed / REPLAY,
                             replay_only=True, **QUIET)
    assert report.calls == 0
    assert tree(tmp_path / "runs") == tree(committed)


def test_the_command_prints_each_stage_line_once(recorded, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import trek.experiments
    from trek.cli import app

    root, report, _ = recorded
    monkeypatch.setattr(trek.experiments, "Settings", lambda: SMALL)  # the command's settings: the small ones
    res = CliRunner().invoke(app, ["experiments", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"),
                                   "--replay", str(root / "runs" / REPLAY), "--replay-only", "--ctrl-questions", "1",
                                   "--no-progress"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    for stage in report.stages:
        assert sum(line.startswith(f"{stage.name} ") for line in lines) == 1, stage.name
    assert lines[-1].startswith("0 model calls, 1 pass(es)")


def test_out_replaces_only_what_it_wrote(recorded, tmp_path):
    import shutil

    from trek.experiments import MANIFEST

    root, _, _ = recorded
    out = tmp_path / "runs"
    shutil.copytree(root / "runs", out)
    assert set((out / MANIFEST).read_text().splitlines()[1:]) == {n for n in tree(root / "runs") if n != MANIFEST}
    (out / "notes.txt").write_text("my notes")  # not written by trek experiments: kept
    (out / "wild" / "mine").mkdir()
    (out / "wild" / "mine" / "answers.jsonl").write_text("{}\n")
    (out / "wild" / "gone").mkdir()  # written by an earlier run (in its manifest), no longer made: removed
    (out / "wild" / "gone" / "answers.jsonl").write_text("{}\n")
    with (out / MANIFEST).open("a") as fh:
        fh.write("wild/gone/answers.jsonl\n")
    run_experiments(out, work=tmp_path / "work", replay=root / "runs" / REPLAY, replay_only=True, settings=SMALL,
                    **QUIET)
    assert (out / "notes.txt").read_text() == "my notes"
    assert (out / "wild" / "mine" / "answers.jsonl").read_text() == "{}\n"
    assert not (out / "wild" / "gone").exists()
    got = tree(out)
    del got["notes.txt"], got["wild/mine/answers.jsonl"]
    assert got == tree(root / "runs")


def test_out_must_be_a_folder_this_command_made(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    (tmp_path / "file").write_text("x")
    cases = [(mine, "did not make"), (tmp_path / "file", "must be a folder"), (tmp_path / "work" / "out", "overlap"),
             (tmp_path, "overlap")]
    for out, why in cases:
        with pytest.raises(ExperimentsError, match=why):
            run_experiments(out, work=tmp_path / "work", replay_only=True, settings=SMALL, **QUIET)
    assert (mine / "thesis.tex").read_text() == "years of work" and (tmp_path / "file").read_text() == "x"
    assert not (tmp_path / "work").exists()  # refused before any work
    from typer.testing import CliRunner

    from trek.cli import app

    res = CliRunner().invoke(app, ["experiments", "--out", str(mine), "--work", str(tmp_path / "w"), "--replay-only"])
    assert res.exit_code == 2 and "did not make" in res.output


# -- the pieces ---------------------------------------------------------------------------------
def test_question_ids_by_style_take_each_style_in_turn():
    from trek.datasets import mini

    qs = mini.load().questions
    ids = question_ids_by_style(qs, 6)
    styles = [next(q for q in qs if q.id == i).metadata["style"] for i in ids]
    assert sorted(styles) == sorted(["freshqa", "infodeepseek", "sealqa"] * 2)
    assert ids == sorted(ids, key=[q.id for q in qs].index)
    assert question_ids_by_style(qs, None) == [q.id for q in qs]


def test_shorten_keeps_the_supported_answer_and_records_the_cut():
    pool = from_mini(question_ids=["mini:01"])[0]
    short = shorten(pool, 160)
    for before, after in zip(pool.documents, short.documents, strict=True):
        assert len(after.text) <= 160
        cut = after.metadata["shortened"]
        assert before.text[cut["start"]:cut["end"]].strip() == after.text and cut["of"] == len(before.text)
        if before.supports_answer and before.supports_answer in before.text:
            assert before.supports_answer in after.text
    assert short.notes["shortened_to_chars"] == 160
    with pytest.raises(ValueError, match="at least 1"):
        shorten(pool, 0)
    # an annotated answer span is where the passage is centred, and it moves with the cut
    from trek.datasets.mini import answer_span

    for before, after in zip(pool.documents, short.documents, strict=True):
        if answer_span(before) is not None:
            a, b = answer_span(before), answer_span(after)
            assert b is not None and after.text[b.start:b.end] == before.text[a.start:a.end]


def test_the_recorded_ctrl_build_gives_every_condition_and_ablation_its_documents(tmp_path):
    """The Ctrl build of ``make runs`` (the default Settings, no model): OO at k = 5/10/15/20 holds
    exactly k outdated documents, the contexts Rerank works on hold more than its 10, and SAA
    holds exact fabrications for most questions (none that names the reference answer)."""
    from trek.contexts import read_contexts
    from trek.ctrl import conditions as cond
    from trek.ctrl.build import build
    from trek.datasets import load_questions

    s = Settings()
    ids = question_ids_by_style(load_questions("mini"), s.ctrl_questions)
    assert len(ids) == 12 and s.fabricator == "exact" and s.ctrl_budgets == cond.Budgets()
    build(from_mini(question_ids=ids), tmp_path, conditions=(*s.ctrl_conditions, *s.ctrl_ablations),
          budgets=s.ctrl_budgets, fabricator=s.fabricator, doc_chars=s.ctrl_doc_chars, count_tokens=False)
    ctx = {(c.question_id, c.condition): c for c in read_contexts(tmp_path / "contexts.jsonl")}

    def count(qid, condition, role):
        return sum(d.role == role for d in ctx[qid, condition].documents)

    for qid in ids:
        outdated = [{d.doc_id for d in ctx[qid, f"OO:k={k}"].documents if d.role == "outdated"} for k in (5, 10, 15, 20)]
        assert [len(o) for o in outdated] == [5, 10, 15, 20] and outdated[0] < outdated[1] < outdated[2] < outdated[3]
        assert count(qid, "OO", "outdated") == 20
        assert count(qid, "MND", "outdated") == 10 and count(qid, "MND", "relevance") == 10
        for c in ("OO", "MND", "SAA", "SBA"):
            assert len(ctx[qid, c].documents) > 10, (qid, c)  # Rerank keeps 10 of them
        # up to 5 fabrications; fewer where the timeline has fewer other answers or the edited windows (every
        # mention of the reference replaced) fall below the similarity floor (mini:13: none)
        assert count(qid, "SAA", "republication") == 5 and 0 <= count(qid, "SAA", "fabrication") <= 5
        assert all(len(d.text) <= s.ctrl_doc_chars + 5 for d in ctx[qid, "SAA"].documents)
    fabs = [(qid, d) for qid in ids for d in ctx[qid, "SAA"].documents if d.role == "fabrication"]
    assert len(fabs) >= 30 and sum(count(qid, "SAA", "fabrication") >= 1 for qid in ids) >= 10
    assert s.systems["agentic"]["first_search"] is True and s.method_settings["structured"]["json_answer"] is True


def test_a_cache_travels_as_a_sorted_gzipped_replay_log(tmp_path):
    a = LLMCache(tmp_path / "a.sqlite", track=True)
    reqs = [{"endpoint": "e", "body": {"n": i}} for i in range(3)]
    from trek.llm.cache import request_key

    for r in reqs:
        a.store(request_key(r), r, {"choices": [{"message": {"content": f"reply {r['body']['n']}"}}]})
    assert len(a.touched) == 3
    assert a.dump(tmp_path / "all.jsonl.gz") == 3
    assert a.dump(tmp_path / "one.jsonl.gz", [request_key(reqs[1])]) == 1
    first = (tmp_path / "all.jsonl.gz").read_bytes()
    a.dump(tmp_path / "all.jsonl.gz")
    assert (tmp_path / "all.jsonl.gz").read_bytes() == first  # no time stamp in the gzip header
    with pytest.raises(KeyError, match="no entry"):
        a.dump(tmp_path / "x.jsonl.gz", ["0" * 64])
    b = LLMCache(tmp_path / "b.sqlite")
    assert b.load(tmp_path / "all.jsonl.gz") == 3 and b.load(tmp_path / "all.jsonl.gz") == 0
    assert b.lookup(request_key(reqs[2]))["choices"][0]["message"]["content"] == "reply 2"


def test_a_damaged_replay_log_names_file_and_line_and_adds_nothing(tmp_path):
    good = {"key": "k", "request": {"a": 1}, "response": {}}
    from trek.llm.cache import request_key

    good["key"] = request_key(good["request"])
    bad = tmp_path / "bad.jsonl.gz"
    write_jsonl(bad, [good, {"key": "0" * 64, "request": {"a": 2}, "response": {}}])
    c = LLMCache(tmp_path / "c.sqlite")
    with pytest.raises(RecordError, match=r"bad.jsonl.gz, line 2: .*not the digest"):
        c.load(bad)
    write_jsonl(bad, [{"key": "x", "request": {}}])
    with pytest.raises(RecordError, match="line 1: replay entry lacks response"):
        c.load(bad)
    bad.write_bytes(gzip.compress(b'{"key": 1}\n')[:-6])
    with pytest.raises(RecordError, match="bad.jsonl.gz"):
        c.load(bad)
    assert len(c) == 0


def test_source_date_epoch_fixes_every_time_stamp(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1796083200")
    assert utcnow() == "2026-12-01T00:00:00Z"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(ValueError, match="SOURCE_DATE_EPOCH"):
        utcnow()


def test_a_schema_is_sent_only_to_an_endpoint_that_enforces_it(tmp_path):
    import asyncio

    schema = object_schema({"ok": "boolean", "why": "text"})
    sent = []
    with FakeOpenAIServer(script=[{"pattern": "judge", "reply": '{"ok": true, "why": "fine"}'}]) as srv:
        for local in (False, True):
            cache = LLMCache(tmp_path / f"{local}.sqlite")
            kw = {"local_server": lambda: srv} if local else {"base_url": srv.base_url}
            client = LLMClient("local" if local else "m", cache=cache, progress=False, **kw)
            out = asyncio.run(achat_json(client, [{"role": "user", "content": "judge this"}], schema=schema))
            assert out.value == {"ok": True, "why": "fine"}
            cache.dump(tmp_path / "log.jsonl")
            (entry,) = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
            sent.append(entry["request"]["body"].get("response_format"))
    assert sent == [None, {"type": "json_object", "schema": schema}]
    assert schema["required"] == ["ok", "why"] and schema["properties"]["why"]["maxLength"] > 0
    with pytest.raises(ValueError, match="unknown type"):
        object_schema({"x": "date"})


def test_the_local_model_goes_one_request_at_a_time_and_a_refusal_is_fatal():
    def refuse():
        raise LocalModelUnavailable("not installed here")

    client = LLMClient("local", cache=None, progress=False, local_server=refuse)
    assert client.max_connections == 1 and LLMClient("m", base_url="http://h/v1").max_connections == 16
    with pytest.raises(FatalLLMError, match="not cached: not installed here"):
        client.chat([{"role": "user", "content": "hi"}])
    assert Usage().calls == 0


def test_the_command_stops_with_exit_2_and_names_the_stage(tmp_path):
    from typer.testing import CliRunner

    from trek.cli import app

    res = CliRunner().invoke(app, ["experiments", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"),
                                   "--replay-only", "--ctrl-questions", "1", "--no-progress"])
    assert res.exit_code == 2
    assert "error: wild no-search: the local model is needed for a call that is not cached" in res.output
    assert not (tmp_path / "out").exists()


def test_a_cache_keeps_the_keys_it_touched_only_when_asked(tmp_path):
    from trek.llm.cache import request_key

    req = {"endpoint": "e", "body": {"n": 1}}
    plain = LLMCache(tmp_path / "plain.sqlite")
    plain.store(request_key(req), req, {"choices": []})
    assert plain.lookup(request_key(req)) == {"choices": []}
    with pytest.raises(RuntimeError, match="without track=True"):  # a long run's keys are not held
        _ = plain.touched
    tracked = LLMCache(tmp_path / "plain.sqlite", track=True)
    assert tracked.lookup(request_key(req)) == {"choices": []}
    assert tracked.touched == {request_key(req)}
    plain.close()
    tracked.close()


# -- verification of the traced runs (trek trace verify), Wild and Ctrl --------------------------
WRONG = "a wrong guess"


def verify_script() -> tuple[list[dict], set[str]]:
    """A model that answers every Ctrl context wrongly and TrekTrace's probes in their JSON: right
    from the gold pages alone, wrong from any context that shows a page of the question that is not
    gold (every such page distracts it), right otherwise. Returns the script and those pages' URLs."""
    from trek.ctrl.pools import from_mini as pools_of
    from trek.datasets import load_benchmark

    bench = load_benchmark("mini")
    ids = set(question_ids_by_style(bench.questions, SMALL.wild_questions)) | set(
        question_ids_by_style(bench.questions, SMALL.ctrl_questions))
    rules = [*SCRIPT, {"any_pattern": "=== DOCUMENTS ===", "reply": WRONG}]
    distracting: set[str] = set()
    for q in (q for q in bench.questions if q.id in ids):
        gold = set(q.gold_urls)
        urls = {d.url for d in bench.documents_for(q.id) if d.url and d.url not in gold}
        urls |= {d.url for p in pools_of(question_ids=[q.id]) for d in p.documents if d.url and d.url not in gold}
        distracting |= urls
        qt = re.escape(q.question)

        def answer(ok, right=q.answers[0]):
            return json.dumps({"answer": right if ok else WRONG, "used_urls": [], "reasoning": "r"})
        rules.append({"any_pattern": rf"\[TrekTrace: gold-only probe\][\s\S]*{qt}", "reply": answer(True)})
        probe = rf"\[TrekTrace: gold-plus-noise probe\][\s\S]*{qt}"
        alternatives = "|".join(re.escape(u) for u in sorted(urls))
        rules.append({"any_pattern": rf"{probe}[\s\S]*URL: (?:{alternatives})\n", "reply": answer(False)})
        rules.append({"any_pattern": probe, "reply": answer(True)})
    return rules, distracting


@pytest.fixture(scope="module")
def verified_recording(tmp_path_factory):
    root = tmp_path_factory.mktemp("verified")
    rules, distracting = verify_script()
    with FakeOpenAIServer(script=rules) as srv:
        report = run_experiments(root / "runs", work=root / "work", settings=SMALL, server=lambda: srv, **QUIET)
    return root / "runs", report, distracting


def test_the_traced_runs_are_verified_wild_and_ctrl(verified_recording):
    out, report, _ = verified_recording
    names = [s.name for s in report.stages]
    assert {"verify search-then-read", "verify agentic", "trace ctrl direct__OO", "verify ctrl direct__OO"} <= set(names)
    assert names.index("verify ctrl direct__OO") > names.index("trace ctrl direct__OO") > names.index("ctrl grading")
    (ctrl,) = [d for d in (out / "ctrl" / "runs").iterdir() if d.name.endswith("__direct__OO")]
    for rd in (out / "wild" / "search-then-read", out / "wild" / "agentic", ctrl):
        assert (rd / "trace.jsonl").is_file() and (rd / "verify.jsonl").is_file(), rd
    # only the runs Settings.ctrl_trace_runs names are traced (GOLD is not one of them)
    assert [d.name for d in (out / "ctrl" / "runs").iterdir() if (d / "trace.jsonl").exists()] == [ctrl.name]


def test_a_confirmed_minimal_set_is_one_page_that_distracts_and_ctrl_names_its_kind(verified_recording):
    from trek.trace.verify import load_verify

    out, _, distracting = verified_recording
    searched = confirmed = 0
    for rd in [*(out / "wild").iterdir(), *(out / "ctrl" / "runs").iterdir()]:
        for r in load_verify(rd):
            if r.experiment != "distractor_search" or r.verdict is None:
                continue
            searched += 1
            if r.verdict == "confirmed":
                confirmed += 1
                assert len(r.minimal_set) == 1 and r.minimal_set[0].url in distracting, (rd.name, r.question_id)
                # a Ctrl page carries its kind (OO: outdated pages only); a Wild page none
                assert r.minimal_set[0].ctrl_kind == ("outdated" if rd.parent.name == "runs" else None)
    assert confirmed >= 2 and searched >= confirmed


def test_the_readme_reports_verification_from_the_records(verified_recording):
    from trek.stats import wilson_ci
    from trek.trace.verify import load_verify

    out, _, _ = verified_recording
    readme = (out / "README.md").read_text()
    section = readme.split("## TrekTrace verification", 1)[1].split("\n## ", 1)[0]
    lines = section.splitlines()
    rows = 0
    for rd in sorted([*(out / "wild").iterdir(), *(out / "ctrl" / "runs").iterdir()]):
        recs = [r for r in load_verify(rd) if r.status == "done"]
        name = f"wild/{rd.name}" if rd.parent.name == "wild" else "ctrl/" + rd.name.split("__", 1)[1]
        for label in sorted({r.label for r in recs}):
            mine = [r for r in recs if r.label == label]
            k = sum(r.verdict == "confirmed" for r in mine)
            n = sum(r.verdict != "skipped" for r in mine)
            (line,) = [x for x in lines if x.split()[:2] == [name, label]]
            low, high = wilson_ci(k, n, 0.95)
            assert f"{k}/{n} ({100 * k / n:.1f}%)" in line and f"{100 * low:.1f}-{100 * high:.1f}" in line, line
            refuted = [r.question_id for r in mine if r.verdict == "refuted"]
            assert line.rstrip().endswith(", ".join(refuted) if refuted else "-"), line
            rows += 1
    assert rows >= 3
    # Ctrl: how many confirmed sets hold an injected page, counted from the records
    sets = [r for d in (out / "ctrl" / "runs").iterdir() for r in load_verify(d)
            if r.experiment == "distractor_search" and r.verdict == "confirmed"]
    injected = sum(any(p.ctrl_kind for p in r.minimal_set) for r in sets)
    assert sets and f"{injected}/{len(sets)} ({100 * injected / len(sets):.1f}%)" in section


def test_verification_leaves_the_labels_as_they_were(verified_recording, tmp_path):
    out, _, _ = verified_recording
    plain = run_experiments(tmp_path / "plain", work=tmp_path / "work", replay=out / REPLAY, replay_only=True,
                            settings=replace(SMALL, verify=False), **QUIET)
    assert plain.calls == 0
    traces = sorted(p.relative_to(out) for p in out.rglob("trace.jsonl"))
    assert traces and traces == sorted(p.relative_to(tmp_path / "plain") for p in (tmp_path / "plain").rglob("trace.jsonl"))
    for rel in traces:
        assert (out / rel).read_bytes() == (tmp_path / "plain" / rel).read_bytes(), rel
    assert not list((tmp_path / "plain").rglob("verify.jsonl"))
    assert "## TrekTrace verification" not in (tmp_path / "plain" / "README.md").read_text()
