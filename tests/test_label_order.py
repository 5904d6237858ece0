"""Labels come in C.4's order (Pre-retrieval, Retrieval, Interpretation, Distraction, Randomness)
wherever Trek prints, writes or plots them, whatever order a trace file holds them in.

The run here is a copy of the frozen recorded agentic run (every label occurs, and cases carry two)
with each record's labels written backwards and the records themselves in reverse, so any place
that keeps the file's order, or the order labels are first met, prints them out of order."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trek.cli import app
from trek.trace.labels import LABELS, in_c4_order

FIXTURE = Path(__file__).parent / "fixtures" / "recorded-agentic"
#: A label name standing alone ("Retrieval" is no part of "Pre-retrieval": case differs, and the
#: lookbehind keeps "-Retrieval" out too).
LABEL = re.compile(r"(?<![\w-])(" + "|".join(re.escape(lab) for lab in LABELS) + r")(?![\w-])")
RANK = {lab: i for i, lab in enumerate(LABELS)}
#: Labels listed together: "A, B", "A + B" or "|A|B|" (a viewer's data attribute).
LISTED = re.compile(rf"{LABEL.pattern}(?:(?:, | \+ |\|){LABEL.pattern})+")


def labels_named(text: str) -> list[str]:
    return LABEL.findall(text)


def out_of_order(text: str) -> list[str]:
    """The lines of ``text`` that name two labels against C.4's order."""
    bad = []
    for line in text.splitlines():
        ranks = [RANK[lab] for lab in labels_named(line)]
        if any(a > b for a, b in zip(ranks, ranks[1:], strict=False)):
            bad.append(line)
    return bad


def lists_out_of_order(text: str) -> list[str]:
    """The lists of labels in ``text`` (one case's labels) that go against C.4's order."""
    return [m.group(0) for m in LISTED.finditer(text) if labels_named(m.group(0)) != in_c4_order(labels_named(m.group(0)))]


def first_mentions(text: str) -> list[str]:
    return list(dict.fromkeys(labels_named(text)))


@pytest.fixture
def backwards(tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    lines = (run / "trace.jsonl").read_text().splitlines()
    out = []
    for line in reversed(lines):
        rec = json.loads(line)
        rec["labels"] = sorted(rec["labels"], key=lambda lab: -RANK[lab])
        out.append(json.dumps(rec))
    (run / "trace.jsonl").write_text("\n".join(out) + "\n")
    # the file now holds two labels against the order, and meets Randomness before Pre-retrieval
    held = [json.loads(x)["labels"] for x in out]
    assert any(len(x) > 1 for x in held)
    met = list(dict.fromkeys(lab for x in held for lab in x))
    assert met != [lab for lab in LABELS if lab in met]
    return run


def test_in_c4_order_sorts_known_labels_and_puts_others_after():
    assert in_c4_order(["Randomness", "Interpretation", "Pre-retrieval"]) == ["Pre-retrieval", "Interpretation",
                                                                            "Randomness"]
    assert in_c4_order(Counter({"zeta": 1, "Distraction": 2, "alpha": 3, "Retrieval": 1})) == [
        "Retrieval", "Distraction", "alpha", "zeta"]
    assert in_c4_order(["Distraction", "Distraction"]) == ["Distraction"]


def test_a_record_read_back_holds_its_labels_in_c4_order(backwards):
    from trek.trace.pipeline import load_trace

    records = load_trace(backwards)
    assert any(len(r.labels) > 1 for r in records)
    for r in records:
        assert r.labels == [lab for lab in LABELS if lab in r.labels], r.labels


def test_the_trace_summary_counts_labels_in_c4_order(backwards):
    from trek.trace.inputs import Selection
    from trek.trace.pipeline import TraceReport, TraceTotals

    totals = TraceTotals.read(backwards / "trace.jsonl")
    text = TraceReport(selection=Selection(cases=[], skipped=Counter(), total=0), totals=totals).describe()
    line = next(x for x in text.splitlines() if x.startswith("labels of the fully traced cases"))
    assert labels_named(line) == list(LABELS), line
    # a Counter that met the labels backwards prints them forwards too
    totals.labels = Counter({lab: 1 for lab in reversed(LABELS)})
    text = TraceReport(selection=Selection(cases=[], skipped=Counter(), total=0), totals=totals).describe()
    assert out_of_order(text) == []


def test_trace_shares_prints_its_rows_in_c4_order(backwards):
    r = CliRunner().invoke(app, ["trace", "shares", str(backwards)], env={"COLUMNS": "80"}, terminal_width=80)
    assert r.exit_code == 0, r.output
    assert first_mentions(r.stdout) == list(LABELS), r.stdout
    rows = [labels_named(x) for x in r.stdout.splitlines() if labels_named(x)]
    assert [x[0] for x in rows] == list(LABELS)  # one row per label, once each, in order


def test_the_run_page_and_the_case_viewer_list_each_case_s_labels_in_c4_order(backwards, tmp_path):
    from trek.runview import write_run_view
    from trek.trace.view import write_view

    for page in (write_run_view(backwards, tmp_path / "run.html"), write_view([backwards], tmp_path / "cases.html")):
        text = page.read_text()
        assert LISTED.search(text), page.name  # a two-label case is shown
        assert lists_out_of_order(text) == [], (page.name, lists_out_of_order(text)[:2])


def test_the_api_frame_and_the_figure_table_follow_c4_order(backwards):
    import trek
    from trek.report.trace import label_shares

    frame = trek.load(backwards).frame()
    combos = [str(c) for c in frame["labels"].dropna().unique()]
    assert any("+" in c for c in combos)
    for c in combos:
        assert c.split(" + ") == in_c4_order(c.split(" + ")), c
    assert [c for c in label_shares({"run": backwards}).columns if c in LABELS] == list(LABELS)


def test_the_palette_lists_the_labels_in_c4_order():
    from trek.report import palette

    assert list(palette.LABELS) == list(LABELS)
