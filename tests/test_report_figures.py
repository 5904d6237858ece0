"""One palette for every figure: each bar's colour is its name's fixed colour and its legend entry's."""

from __future__ import annotations

import pytest
from matplotlib.colors import to_rgba
from matplotlib.container import BarContainer

from trek import runs
from trek.ctrl.conditions import ALL_CONDITIONS
from trek.ctrl.shortcuts import HEURISTICS
from trek.rag import METHODS
from trek.report import palette, wild
from trek.report import trace as trace_report
from trek.trace.labels import LABELS
from trek.trace.records import TraceRecord
from trek.types import RunMeta, write_jsonl


def test_the_palette_knows_every_name_and_keeps_them_apart():
    assert set(LABELS) <= set(palette.LABELS) and set(METHODS) <= set(palette.METHODS)
    assert set(ALL_CONDITIONS) <= set(palette.CONDITIONS) and set(HEURISTICS) <= set(palette.HEURISTICS)
    assert set(wild.WILD_DATASETS) <= set(palette.DATASETS)
    for kind, table in palette.KINDS.items():
        named = {k: v for k, v in table.items() if k not in ("all", "micro", "total")}  # aggregates share a grey
        assert len(set(named.values())) == len(named), kind
    assert palette.DATASETS["all"] not in {palette.DATASETS[d] for d in wild.WILD_DATASETS}


def test_unknown_names_get_distinct_spare_colours_that_do_not_depend_on_order():
    drawn = palette.colours("dataset", ["sealqa", "my-set", "other-set"])
    assert drawn["sealqa"] == palette.DATASETS["sealqa"]
    assert len(set(drawn.values())) == 3 and set(drawn.values()) - {drawn["sealqa"]} <= set(palette.SPARE)
    assert palette.colour("run", "x") == palette.colour("run", "x") in palette.SPARE
    with pytest.raises(ValueError, match="unknown colour kind"):
        palette.colour("colour", "x")


def rec(qid, dataset, labels):
    return TraceRecord(question_id=qid, dataset=dataset, question="?", answers=["a"], original_outcome="incorrect",
                       status="done", labels=labels)


@pytest.fixture
def traced(tmp_path):
    """Two traced runs with different datasets: freshqa + sealqa, and infodeepseek alone."""
    specs = {
        "search-then-read": [rec("1", "sealqa", ["Randomness"]), rec("2", "freshqa", ["Retrieval"]),
                             rec("3", "sealqa", ["Distraction"])],
        "agentic": [rec("4", "infodeepseek", ["Pre-retrieval"]), rec("5", "infodeepseek", ["Interpretation"])],
    }
    for order, (name, recs) in enumerate(specs.items()):
        d = tmp_path / name
        d.mkdir()
        runs.write_meta(d, RunMeta(run_id=name, kind="wild", model="m",
                                   config={"order": order, "system": {"system": "agentic", "search": "local"}}))
        write_jsonl(d / runs.TRACE, recs)
    return trace_report.traced_runs(runs_dir=tmp_path)


def legend_colours(legend):
    return {t.get_text(): to_rgba(h.get_facecolor()) for t, h in zip(legend.get_texts(), legend.legend_handles,
                                                                     strict=True)}


def drawn_bars(axes):
    """{(panel, series label): facecolours of its bars} for every bar series drawn."""
    out = {}
    for i, ax in enumerate(axes):
        for container in (c for c in ax.containers if isinstance(c, BarContainer)):
            out[(i, container.get_label())] = {to_rgba(p.get_facecolor()) for p in container.patches}
    return out


def check_bars_match_legend_and_palette(fig, legend, kind):
    shown = legend_colours(legend)
    bars = drawn_bars(fig.axes)
    assert bars, "no bars drawn"
    assert set(shown) == {name for _, name in bars}  # the legend names exactly what is drawn
    for (panel, name), faces in bars.items():
        assert faces == {to_rgba(palette.colour(kind, name))}, (panel, name, faces)
        assert shown[name] == to_rgba(palette.colour(kind, name)), name


def test_figure2_bars_take_their_dataset_colour_in_every_panel(traced):
    table = trace_report.label_shares(traced)
    fig = trace_report.plot_label_shares(table, "T")
    check_bars_match_legend_and_palette(fig, fig.legends[0], "dataset")
    bars = drawn_bars(fig.axes)
    # the agentic panel draws infodeepseek and all; its "all" bar is grey like the first panel's
    assert {name for panel, name in bars if panel == 1} == {"infodeepseek", "all"}
    assert bars[(1, "all")] == bars[(0, "all")] == {to_rgba(palette.DATASETS["all"])}
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["freshqa", "infodeepseek", "sealqa", "all"]


def test_figure2_bars_carry_their_wilson_interval_and_panels_their_n(traced):
    from trek.stats import wilson_ci

    table = trace_report.label_shares(traced)
    fig = trace_report.plot_label_shares(table, "T")
    for ax, run in zip(fig.axes, traced, strict=True):
        bars = [c for c in ax.containers if isinstance(c, BarContainer)]
        assert bars and all(c.errorbar is not None for c in bars)  # every share bar has its interval
        per = ", ".join(f"{ds} {int(r['cases'])}" for (rn, ds), r in table.iterrows() if rn == run and ds != "all")
        assert ax.get_title().splitlines()[1] == f"fully traced per dataset: {per}"
        for c in bars:  # the interval drawn is the Wilson interval of k of n
            row = table.loc[(run, c.get_label())]
            n = int(row["cases"])
            segments = c.errorbar.lines[2][0].get_segments()
            for label, seg in zip(LABELS, segments, strict=True):
                lo, hi = wilson_ci(round(row[label] * n / 100), n)
                assert seg[0][1] == pytest.approx(100 * lo) and seg[1][1] == pytest.approx(100 * hi)
    assert not fig.axes[0].get_legend() and len(fig.legends) == 1  # one legend, below the panels


def test_counts_behind_rounded_shares_and_their_wilson_errors():
    import numpy as np

    from trek.report.figures import counts_of_shares, wilson_errors

    assert counts_of_shares([0.0, 33.3, 66.7, 100.0, float("nan")], 3)[:4].tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="not counts of 3"):
        counts_of_shares([50.0], 3)
    err = wilson_errors([0, 3], 3)
    assert err[0, 0] == 0 and err[1, 0] == pytest.approx(56.15, abs=0.01)  # 0 of 3: [0, 56.1%]
    assert err[1, 1] == 0 and err[0, 1] == pytest.approx(56.15, abs=0.01)
    assert np.isnan(wilson_errors([float("nan")], 3)).all()


def test_table1_figure_has_dataset_colours_and_interval_bars(demo_runs):
    table = wild.wild_accuracy({"a": demo_runs["demo-lm"], "b": demo_runs["demo-lm-read"]})
    fig = wild.plot_wild_accuracy(table, "T")
    ax = fig.axes[0]
    check_bars_match_legend_and_palette(fig, ax.get_legend(), "dataset")
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert bars and all(c.errorbar is not None for c in bars)  # every bar carries its 95% interval


def test_table1_gives_a_dataset_of_ones_own_its_column_bar_and_legend_entry(demo_runs, tmp_path):
    import json

    own = tmp_path / "own"
    own.mkdir()
    qs = [{"id": f"lake-{i}", "dataset": "custom", "question": f"q{i}?", "answers": ["a"]} for i in range(3)]
    (own / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
    (own / "answers.jsonl").write_text("".join(json.dumps({"question_id": q["id"], "model": "m", "answer": "a"}) + "\n"
                                              for q in qs))
    (own / "grades.jsonl").write_text("".join(json.dumps({"question_id": q["id"], "dataset": "custom", "grader": "generic",
                                                          "outcome": "correct" if i < 2 else "incorrect"}) + "\n"
                                              for i, q in enumerate(qs)))
    table = wild.wild_accuracy({"mini": demo_runs["demo-lm"], "own": own})
    assert list(dict.fromkeys(table.columns.get_level_values(0))) == [
        "freshqa", "infodeepseek", "sealqa", "custom", "micro", "macro", "questions"]
    assert table.at["own", ("custom", "acc")] == pytest.approx(66.7) and table.at["mini", ("custom", "acc")] != table.at["mini", ("custom", "acc")]  # NaN
    fig = wild.plot_wild_accuracy(table, "T")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["freshqa", "infodeepseek", "sealqa", "custom", "micro", "macro"]


def test_table10_figure_uses_the_dataset_palette(mini):
    years = wild.reference_years(mini.questions)
    fig = wild.plot_reference_years(years, "T")
    check_bars_match_legend_and_palette(fig, fig.axes[0].get_legend(), "dataset")


def check_named_bars(fig, legend, kind, names):
    """As :func:`check_bars_match_legend_and_palette` for a figure that shows each code of ``kind``
    by its plain name (``names``: code -> name)."""
    shown = legend_colours(legend)
    bars = drawn_bars(fig.axes)
    assert bars and set(shown) == {name for _, name in bars}
    for code, name in names.items():
        if name in shown:
            assert shown[name] == to_rgba(palette.colour(kind, code)), code
            assert all(faces == {shown[name]} for (_, n), faces in bars.items() if n == name)


def test_figure5_bars_take_their_condition_colour_and_plain_names():
    import pandas as pd

    from trek.report import ctrl
    from trek.report.titles import condition_name

    table = pd.DataFrame({"unswapped": ["OO", "SAA"], "n": [4, 4], "acc_unswapped": [75.0, 50.0],
                          "acc_swapped": [50.0, 25.0], "p": [0.5, 1.0]},
                         index=pd.MultiIndex.from_tuples([("m", "OO:timeswap"), ("m", "SAA:domainswap")],
                                                         names=["model", "swap"]))
    fig = ctrl.plot_metadata_swap(table, "T")
    codes = ["OO", "SAA", "OO:timeswap", "SAA:domainswap"]
    check_named_bars(fig, fig.axes[0].get_legend(), "condition", {c: condition_name(c) for c in codes})
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == [
        "Outdated Only (OO)", "Source-Aware Adversarial (SAA)", "OO, dates swapped", "SAA, domains swapped"]
    # every bar carries the Wilson interval of its k of n; n is under each pair; the p names its test
    from trek.stats import wilson_ci

    bars = [c for c in fig.axes[0].containers if isinstance(c, BarContainer)]
    assert len(bars) == 4 and all(c.errorbar is not None for c in bars)
    (seg,) = bars[0].errorbar.lines[2][0].get_segments()  # OO: 3 of 4
    assert [seg[0][1], seg[1][1]] == pytest.approx([100 * x for x in wilson_ci(3, 4)])
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["OO,\ndates swapped\nn=4",
                                                                     "SAA,\ndomains swapped\nn=4"]
    assert [t.get_text() for t in fig.axes[0].texts if "p=" in t.get_text()] == [
        "exact McNemar p=0.5", "exact McNemar p=1"]


def test_figure4_shows_plain_names_n_and_intervals():
    import pandas as pd

    from trek.report import ctrl_build
    from trek.stats import wilson_ci

    table = pd.DataFrame({"latest": [100.0, 25.0], "majority": [0.0, 50.0], "latest_real_domain": [100.0, 25.0]},
                         index=pd.Index(["OO", "SBA"], name="condition"))
    for h in HEURISTICS:
        bounds = [ctrl_build.wilson_share(v / 100, 4) for v in table[h]]
        table[f"{h} low"], table[f"{h} high"] = [100 * lo for lo, _ in bounds], [100 * hi for _, hi in bounds]
    table["n"] = 4
    assert ctrl_build.wilson_share(0.25, 4) == pytest.approx(wilson_ci(1, 4))  # 0/1 scores: the Wilson interval
    fig = ctrl_build.plot_shortcuts(table, "T")
    ax = fig.axes[0]
    check_named_bars(fig, ax.get_legend(), "heuristic", ctrl_build.HEURISTIC_NAMES)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["Outdated Only (OO)", "Source-Blind Adversarial (SBA)"]
    assert "n=4 questions each" in ax.get_xlabel() and "Wilson" in ax.get_xlabel()
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert len(bars) == 3 and all(c.errorbar is not None for c in bars)


def test_a_zero_bar_is_marked_and_a_missing_one_is_not():
    import matplotlib.pyplot as plt
    import numpy as np

    from trek.report.figures import ZERO_MARK, grouped_bars

    fig, ax = plt.subplots()
    grouped_bars(ax, ["a", "b", "c"], {"s": [0.0, np.nan, 12.5], "t": [3.0, 0.0, 0.0]}, {"s": "#111111", "t": "#222222"})
    marks = [t for t in ax.texts if t.get_gid() == "zero-mark"]
    assert [t.get_text() for t in marks] == [ZERO_MARK] * 3  # s at a; t at b and c; nothing for the NaN
    assert sorted(round(t.xy[0], 2) for t in marks) == [-0.2, 1.2, 2.2]
    assert {to_rgba(t.get_color()) for t in marks} == {to_rgba("#111111"), to_rgba("#222222")}
    plt.close(fig)
