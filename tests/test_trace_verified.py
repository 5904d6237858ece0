"""Where ``trek trace verify``'s verdicts show: Figure 2's verification table and the bars'
annotations, the case viewer, ``trek trace export`` (Langfuse, OTLP) and ``trek.load(...).frame()``.

The fast tests read hand-written ``verify.jsonl`` records (tests/_verify_records.py) over a copy
of the frozen recorded agentic run, so each expected value is known from the records written;
the slow ones read a run that ``trek trace verify`` really verified (the scripted run with a
planted distractor of tests/test_trace_verify.py). Without ``verify.jsonl`` everything is as
before."""

from __future__ import annotations

import json
import math
import re
import shutil
from collections import Counter
from pathlib import Path

import matplotlib
import pandas as pd
import pytest
from _verify_records import HOSTILE, plant, state
from test_api import FROZEN, wilson
from test_trace_export import traced  # noqa: F401  (the fixture: an imported Langfuse run, traced)
from test_trace_view import _chromium, dump_dom
from typer.testing import CliRunner

import trek
from trek import api, runs
from trek.cli import app
from trek.report import trace as report
from trek.trace import load_trace
from trek.trace.export import export_labels, otlp_request, scores
from trek.trace.labels import LABELS
from trek.trace.verify import load_verify
from trek.trace.view import write_view
from trek.types import write_jsonl

matplotlib.use("Agg")


@pytest.fixture
def agentic(tmp_path) -> Path:
    return Path(shutil.copytree(FROZEN, tmp_path / "agentic"))


@pytest.fixture
def verified_agentic(agentic) -> tuple[Path, list]:
    return agentic, plant(agentic, load_trace(agentic))


# -- Figure 2 --------------------------------------------------------------------------------------
def test_the_table_counts_the_verdicts_of_each_labels_cases(verified_agentic):
    rd, written = verified_agentic
    traces = {r.question_id: r for r in load_trace(rd)}
    table = report.verified_shares({"agentic": rd})
    datasets = list(dict.fromkeys(r.dataset for r in traces.values()))
    assert list(table.index.get_level_values(1).unique()) == [*datasets, "all"]
    by = {(v.question_id, v.label): state(v) for v in written}
    for ds in [*datasets, "all"]:
        done = [r for r in traces.values() if r.status == "done" and ds in ("all", r.dataset)]
        for lab in LABELS:
            row = table.loc[("agentic", ds, lab)]
            having = [r for r in done if lab in r.labels]
            verdicts = Counter(by.get((r.question_id, lab)) for r in having)
            n = verdicts["confirmed"] + verdicts["refuted"] + verdicts["inconclusive"]
            assert (row["cases"], row["labelled"], row["tested"]) == (len(done), len(having), n), (ds, lab)
            assert row["share"] == round(100 * len(having) / len(done), 1)
            for v in ("confirmed", "refuted", "inconclusive", "skipped"):
                assert row[v] == verdicts[v], (ds, lab, v)
            assert row["untested"] == verdicts["pending"] + verdicts[None]
            if n:
                low, high = wilson(verdicts["confirmed"], n)
                k = verdicts["confirmed"]
                assert row["confirmed_share"] == round(100 * k / n, 1)
                assert (row["low"], row["high"]) == (round(100 * low, 1), round(100 * high, 1))
                assert row["verification"] == (f"confirmed {k}/{n} ({100 * k / n:.0f}%, 95% Wilson CI "
                                               f"{100 * low:.0f}-{100 * high:.0f}%)")
            else:
                assert math.isnan(row["confirmed_share"]) and row["verification"].startswith("not tested")
    # the labels nothing tests, and the ones the planted verdicts do test
    assert (table.xs("Interpretation", level=2)["verification"] == "not tested").all()
    assert table.loc[("agentic", "all", "Distraction"), "tested"] > 0
    assert table.loc[("agentic", "all", "Pre-retrieval"), "tested"] > 0


def test_the_shares_beside_the_verdicts_are_figure_2s(verified_agentic):
    rd, _ = verified_agentic
    shares = report.label_shares({"agentic": rd})
    table = report.verified_shares({"agentic": rd})
    for (run, ds), row in shares.iterrows():
        for lab in LABELS:
            assert table.loc[(run, ds, lab), "share"] == row[lab]
            assert table.loc[(run, ds, lab), "cases"] == row["cases"]


def test_without_verify_jsonl_every_label_is_not_tested_and_the_figure_is_the_plain_one(agentic):
    assert report.verified_runs({"agentic": agentic}) == []
    table = report.verified_shares({"agentic": agentic})
    assert (table["verification"] == "not tested").all() and (table["tested"] == 0).all()
    assert (table["untested"] == table["labelled"]).all()
    fig = report.plot_label_shares(report.label_shares({"agentic": agentic}), "t", verified=table)
    assert not [t for ax in fig.axes for t in ax.texts if t.get_gid() == "verified"]


def test_the_bars_of_each_tested_label_carry_its_confirmed_k_of_n(verified_agentic):
    rd, _ = verified_agentic
    table = report.verified_shares({"agentic": rd})
    assert report.verified_runs({"agentic": rd}) == ["agentic"]
    fig = report.plot_label_shares(report.label_shares({"agentic": rd}), "t", verified=table)
    notes = {LABELS[round(t.xy[0])]: t.get_text() for t in fig.axes[0].texts if t.get_gid() == "verified"}
    tested = table.xs(("agentic", "all"), level=(0, 1))
    assert set(notes) == {lab for lab in LABELS if tested.loc[lab, "tested"] > 0}
    for lab, text in notes.items():
        row = tested.loc[lab]
        assert text.startswith(f"confirmed {row['confirmed']}/{row['tested']}\n")
        assert f"[{row['low']:.0f}-{row['high']:.0f}%]" in text


def test_a_verdict_made_for_other_labels_is_stale_and_counts_nowhere(agentic):
    recs = load_trace(agentic)
    written = plant(agentic, recs)
    first = next(v for v in written if v.experiment == "distractor_search" and v.verdict == "confirmed")
    # the case was traced again since and lost its Distraction label
    write_jsonl(agentic / runs.TRACE, [r.model_copy(update={"labels": [x for x in r.labels if x != "Distraction"]})
                                       if r.question_id == first.question_id else r for r in recs])
    before = report.verified_shares({"agentic": agentic})
    confirmed = sum(v.verdict == "confirmed" for v in written if v.experiment == "distractor_search"
                    and v.question_id != first.question_id)
    assert before.loc[("agentic", "all", "Distraction"), "confirmed"] == confirmed
    # its query repair was made for the old labels too: not counted, not in the frame
    frame = trek.load(agentic).frame().set_index("question_id")
    assert pd.isna(frame.loc[first.question_id, "verify_distractor_search"])
    assert pd.isna(frame.loc[first.question_id, "verify_query_repair"])


# -- the case viewer -------------------------------------------------------------------------------
def _block(page: str, qid: str) -> str:
    start = page.rindex('<details class="case"', 0, page.index(f"<b>{qid}</b>"))
    end = page.find('<details class="case"', start + 1)
    return page[start: end if end > 0 else len(page)]


def test_the_viewer_shows_verdicts_minimal_sets_and_repaired_queries(verified_agentic):
    rd, written = verified_agentic
    page = write_view([rd]).read_text()
    assert HOSTILE not in page and "&lt;script&gt;document.title" in page
    for v in written:
        block = _block(page, v.question_id)
        assert "Verification (trek trace verify" in block
        assert f"{v.label} {state(v)}</span>" in block  # the badge beside the (unchanged) labels
        why = v.reason if v.status == "done" else v.error
        if why:
            assert why.replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#x27;") in block
        for p in v.minimal_set or []:
            assert f"<li>{p.url}" + (f' <span class="meta">Ctrl: {p.ctrl_kind}</span>' if p.ctrl_kind else "</li>") \
                in block
        for q in v.repaired_queries or []:
            back = "yes" if set(v.results[q]) & set(v.found_urls) else "no"
            esc = q.replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#x27;")
            assert f"<tr><td>{esc}</td><td>{back}</td>" in block
        if v.found_urls:
            assert f"<mark>{v.found_urls[0]}</mark>" in block
    # a case without an experiment shows no verification
    untested = next(r for r in load_trace(rd) if r.labels == ["Interpretation"])
    assert "Verification (trek trace verify" not in _block(page, untested.question_id)


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed")
def test_in_a_headless_browser_the_verification_runs_nothing(verified_agentic, tmp_path):
    rd, _ = verified_agentic
    dom = dump_dom(write_view([rd], tmp_path / "view.html"), tmp_path)
    assert "PWNED" not in dom and "Minimal distracting set" in dom and "repaired query" in dom
    assert "&lt;script&gt;document.title" in dom  # shown as text


def test_the_viewer_without_verify_jsonl_is_unchanged_but_for_its_style(agentic):
    plain = write_view([agentic], agentic / "plain.html").read_text()
    assert "Verification (trek trace verify" not in plain and "v-confirmed\"" not in plain
    plant(agentic, load_trace(agentic))
    (agentic / runs.VERIFY).unlink()
    assert write_view([agentic], agentic / "again.html").read_text() == plain


def test_trek_view_puts_the_verdicts_beside_the_labels(agentic, tmp_path):
    from trek.runview import write_run_view

    plain = write_run_view(agentic, tmp_path / "plain.html").read_text()
    assert "verified:" not in plain
    written = plant(agentic, load_trace(agentic))
    page = write_run_view(agentic, tmp_path / "view.html").read_text()
    traces = {r.question_id: r for r in load_trace(agentic)}
    for qid, r in traces.items():
        mine = [v for v in written if v.question_id == qid]
        start = page.index(f">{qid} · ")
        meta = page[start: page.index("</div>", start)]
        if mine:
            words = ", ".join(f"{v.label} {state(v)}" for v in mine)
            assert meta.endswith(f"{', '.join(r.labels)} · verified: {words}"), meta
        else:
            assert "verified:" not in meta
    (agentic / runs.VERIFY).unlink()
    assert write_run_view(agentic, tmp_path / "again.html").read_text() == plain


# -- trek trace export -----------------------------------------------------------------------------
def test_langfuse_and_otlp_carry_the_verdicts_and_leave_the_labels(traced, tmp_path):  # noqa: F811
    before = {(s.trace_id, s.name): (s.value, s.status) for s in scores(traced)}
    written = plant(traced, load_trace(traced))
    assert written, "the traced fixture has no case a label calls an experiment for"
    items = scores(traced)
    # the label scores are exactly as before; the verdicts come beside them
    assert {(s.trace_id, s.name): (s.value, s.status) for s in items if not s.name.startswith("trektrace.verify_")} \
        == before
    path, n, _ = export_labels(traced, "langfuse", tmp_path / "scores.jsonl")
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    verify_rows = {(r["metadata"]["question_id"], r["name"]): r for r in rows if r["name"].startswith("trektrace.verify")}
    assert set(verify_rows) == {(v.question_id, f"trektrace.verify_{v.experiment}") for v in written}
    for v in written:
        row = verify_rows[(v.question_id, f"trektrace.verify_{v.experiment}")]
        assert row["value"] == state(v) and row["dataType"] == "CATEGORICAL" and row["metadata"]["label"] == v.label
        assert (v.reason or v.error or "") in row["comment"]
        if v.experiment == "distractor_search":
            assert row["metadata"]["minimal_set"] == [{"url": p.url, "ctrl_kind": p.ctrl_kind}
                                                      for p in v.minimal_set or []]
            assert row["metadata"]["noise_pages"] == v.noise_pages
        else:
            assert row["metadata"]["repaired_queries"] == (v.repaired_queries or [])
            assert row["metadata"]["gold_found"] == (None if v.results is None else bool(v.found_urls))
    assert len({r["id"] for r in rows}) == len(rows) == n
    # OTLP: one evaluation event per verdict, its details as attributes, valid as protobuf
    req = otlp_request(items, traced)
    events = {}
    for span in req["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        qid = span["attributes"][0]["value"]["stringValue"]
        for e in span["events"]:
            attrs = {a["key"]: a["value"] for a in e["attributes"]}
            events[(qid, attrs["gen_ai.evaluation.name"]["stringValue"])] = attrs
    for v in written:
        attrs = events[(v.question_id, f"trektrace.verify_{v.experiment}")]
        assert attrs["gen_ai.evaluation.score.label"] == {"stringValue": state(v)}
        assert attrs["trek.verify.label"] == {"stringValue": v.label}
        if v.minimal_set:
            urls = attrs["trek.verify.minimal_set"]["arrayValue"]["values"]
            assert [u["stringValue"] for u in urls] == [p.url for p in v.minimal_set]
        if v.repaired_queries:
            qs = attrs["trek.verify.repaired_queries"]["arrayValue"]["values"]
            assert [q["stringValue"] for q in qs] == v.repaired_queries
            assert attrs["trek.verify.gold_found"] == {"boolValue": bool(v.found_urls)}
    pytest.importorskip("opentelemetry.proto")
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from trek.trace.destinations import otlp_protobuf

    back = ExportTraceServiceRequest.FromString(otlp_protobuf(req))
    as_json = json_format.MessageToDict(back)
    names = [a["value"]["stringValue"] for s in as_json["resourceSpans"][0]["scopeSpans"][0]["spans"]
             for e in s["events"] for a in e["attributes"] if a["key"] == "gen_ai.evaluation.name"]
    assert sum(x.startswith("trektrace.verify_") for x in names) == len(written)


def test_export_without_verify_jsonl_writes_no_verdict(traced, tmp_path):  # noqa: F811
    path, _, _ = export_labels(traced, "langfuse", tmp_path / "scores.jsonl")
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert rows and not [r for r in rows if "verify" in r["name"]]
    assert all(set(r["metadata"]) == {"question_id", "trek_version"} for r in rows)


def test_phoenix_marks_a_verdict_that_went_stale_not_tested(traced):  # noqa: F811
    from trek.trace.destinations import phoenix_annotations, phoenix_untested

    recs = load_trace(traced)
    written = plant(traced, recs)
    items = scores(traced)
    made = {(v.question_id, f"trektrace.verify_{v.experiment}") for v in written}
    untested = {(a["metadata"]["question_id"], a["name"]) for a in phoenix_untested(items, traced) if "verify" in a["name"]}
    # "not tested" only where no experiment ran: a case with a verdict keeps it
    assert untested and not untested & made
    assert {q for q, _ in untested} == {r.question_id for r in recs} - {v.question_id for v in written}
    sent = [a for a in phoenix_annotations(items, traced) if a["name"].startswith("trektrace.verify_")]
    assert len(sent) == len(written) and all(a["metadata"]["label"] for a in sent)
    write_jsonl(traced / runs.TRACE, [r.model_copy(update={"labels": []}) for r in recs])
    stale = [a for a in phoenix_untested(scores(traced), traced) if "verify" in a["name"]]
    assert {(a["metadata"]["question_id"], a["name"]) for a in stale} >= made
    assert {a["result"]["label"] for a in stale} == {"not tested"}


# -- trek.load(...).frame() ------------------------------------------------------------------------
def test_the_frame_joins_the_verdicts_per_question(verified_agentic):
    rd, written = verified_agentic
    frame = trek.load(rd).frame()
    cols = list(frame.columns)
    at = cols.index("log_coverage") + 1
    assert cols == [*api.FRAME_COLUMNS[:at], *api.VERIFY_COLUMNS, *api.FRAME_COLUMNS[at:]]
    f = frame.set_index("question_id")
    by = {(v.question_id, v.experiment): v for v in written}
    for qid in f.index:
        for exp in ("distractor_search", "query_repair"):
            v = by.get((qid, exp))
            got = f.loc[qid, f"verify_{exp}"]
            assert (pd.isna(got) if v is None else got == state(v)), (qid, exp)
            why = f.loc[qid, f"verify_{exp}_reason"]
            want = None if v is None else (v.reason if v.status == "done" else v.error)
            assert (pd.isna(why) if want is None else why == want), (qid, exp)
        s, r = by.get((qid, "distractor_search")), by.get((qid, "query_repair"))
        ms = f.loc[qid, "minimal_set"]
        assert ms == (tuple(p.url for p in s.minimal_set) if s is not None and s.minimal_set else None)
        kinds = f.loc[qid, "minimal_set_ctrl_kinds"]
        assert kinds == (tuple(p.ctrl_kind for p in s.minimal_set) if s is not None and s.minimal_set else None)
        rq = f.loc[qid, "repaired_queries"]
        assert rq == (tuple(r.repaired_queries) if r is not None and r.repaired_queries else None)
        found = f.loc[qid, "repair_gold_found"]
        assert (pd.isna(found) if r is None or r.results is None else bool(found) == bool(r.found_urls))
    assert frame["verify_distractor_search"].dtype == "category"
    assert list(frame["verify_distractor_search"].cat.categories[:6]) == list(api.VERIFY_STATES)
    # the label columns are the trace's, unchanged by the verdicts
    for lab in LABELS:
        want = [lab in r.labels for r in load_trace(rd)]
        assert f.loc[[r.question_id for r in load_trace(rd)], lab].tolist() == want


def test_the_frame_without_verify_jsonl_has_its_columns_as_before(agentic):
    assert list(trek.load(agentic).frame().columns) == api.FRAME_COLUMNS


def test_an_inline_case_and_the_runs_verified_shares(verified_agentic):
    rd, written = verified_agentic
    run = trek.load(rd)
    v = next(x for x in written if x.minimal_set)
    html = run.case(v.question_id)._repr_html_()
    assert "Verification (trek trace verify" in html and v.minimal_set[0].url in html
    assert "<script>document" not in html
    assert run.cases(label="Distraction")[0].verification is not None
    shares = run.verified_shares(by_dataset=False)
    assert list(shares["label"]) == list(LABELS)
    table = report.verified_shares({run.name: rd}).xs((run.name, "all"), level=(0, 1))
    assert shares.set_index("label")["verification"].to_dict() == table["verification"].to_dict()


def test_a_bad_verify_line_is_an_error_naming_the_file(agentic):
    (agentic / runs.VERIFY).write_text('{"question_id": "mini:01", "experiment": "distractor_search"}\n'
                                       '{"question_id": "mini:02"}\n')
    with pytest.raises(Exception, match=re.escape(str(agentic / runs.VERIFY))):
        trek.load(agentic).frame()


# -- a run that trek trace verify really verified (slow) --------------------------------------------
from test_trace_verify import _env, planted_run, verified  # noqa: E402,F401  (module fixtures)


@pytest.mark.slow  # builds, grades, traces and verifies a run (about 12 s)
def test_a_really_verified_run_shows_its_verdicts_everywhere(verified, tmp_path):  # noqa: F811
    _, rd, planted, res, _, _ = verified
    assert res.exit_code == 0, res.output
    recs = load_verify(rd)
    assert recs and any(v.verdict == "confirmed" and v.minimal_set for v in recs)
    traces = {r.question_id: r for r in load_trace(rd)}
    # Figure 2's table: the Distraction cases confirmed, over the fully traced ones
    table = report.verified_shares({"planted": rd})
    done = {q for q, r in traces.items() if r.status == "done"}
    confirmed = sum(v.verdict == "confirmed" for v in recs if v.experiment == "distractor_search" and v.question_id
                    in done)
    assert table.loc[("planted", "all", "Distraction"), "confirmed"] == confirmed > 0
    # the viewer: every minimal set's page in its case's block
    page = write_view([rd], tmp_path / "view.html").read_text()
    for v in recs:
        block = _block(page, v.question_id)
        assert f"{v.label} {state(v)}</span>" in block
        for p in v.minimal_set or []:
            assert p.url == planted and f"<li>{p.url}" in block
        if v.tests:  # every probe the search asked, and every call the experiments made
            assert f"<summary>{len(v.tests)} probe(s) asked</summary>" in block
        calls = sum(len(x.steps) for x in recs if x.question_id == v.question_id)
        assert (f"<summary>{calls} verification call(s)</summary>" in block) == bool(calls)
    # the frame
    f = trek.load(rd).frame().set_index("question_id")
    for v in recs:
        assert f.loc[v.question_id, f"verify_{v.experiment}"] == state(v)
        if v.minimal_set:
            assert f.loc[v.question_id, "minimal_set"] == (planted,)
        if v.repaired_queries:
            assert f.loc[v.question_id, "repaired_queries"] == tuple(v.repaired_queries)
    # the CLI viewer
    res = CliRunner().invoke(app, ["trace", "view", str(rd), "--out", str(tmp_path / "cli.html")])
    assert res.exit_code == 0 and "Minimal distracting set" in (tmp_path / "cli.html").read_text()
