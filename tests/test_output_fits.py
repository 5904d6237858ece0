"""Output that fits: at COLUMNS=80 no help line and no table is wider than 80, command lists show
whole sentences (never cut with "..."), metavars are names (PATH, N, RUN_DIR) not Python types,
summaries on standard error are never hard-wrapped, a progress bar in a log file writes a few
lines, and the first `make install` says what it installs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from trek import textable
from trek.cli import _help, app

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "data" / "runs"
WILD_RUNS = sorted((RUNS / "wild").glob("*")) if (RUNS / "wild").is_dir() else []
#: A Python type where a metavar belongs: <path>, <int range>, <list[Path]>, or {run_dir} in a usage line.
PYTHON_TYPE = re.compile(r"<(?:path|Path|int|float|str|bool|file|directory|datetime|list\[[^>]*\]|int range|float range)>"
                         r"|\{[a-z_]+\}")


def commands() -> dict[str, object]:
    def walk(cmd, prefix):
        yield prefix, cmd
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, f"{prefix} {name}".strip())

    return dict(walk(typer.main.get_command(app), ""))


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "80"}, terminal_width=80)


def command_list(text: str) -> list[str]:
    """The lines of a help's Commands section."""
    return text.split("\nCommands:\n", 1)[1].splitlines() if "\nCommands:\n" in text else []


def test_every_help_fits_80_columns_with_whole_summaries_and_no_python_types():
    for name in commands():
        r = invoke(*name.split(), "--help")
        assert r.exit_code == 0, (name, r.output)
        lines = r.output.splitlines()
        assert [x for x in lines if len(x) > 80] == [], name
        assert PYTHON_TYPE.findall(r.output) == [], (name, PYTHON_TYPE.findall(r.output))
        listed = command_list(r.output)
        assert not any(x.rstrip().endswith("...") for x in listed), (name, listed)


def test_the_root_help_lists_each_command_with_its_first_sentence():
    r = invoke("--help")
    listed = " ".join(" ".join(command_list(r.output)).split())
    for name, cmd in typer.main.get_command(app).commands.items():
        assert f"{name} {_help.summary(cmd.help)}" in listed, name
        assert _help.summary(cmd.help)[-1] in ".?!)", name


@pytest.mark.parametrize(("text", "first"), [
    ("Grade a run. Then more.", "Grade a run."),
    ("Where did it fail? (`trek trace RUN` traces a run.)", "Where did it fail?"),
    ("Use a judge (e.g. gpt-4.1. or not) here. Next.", "Use a judge (e.g. gpt-4.1. or not) here."),
    ("One line\nwrapped in the source.\n\nSecond paragraph.", "One line wrapped in the source."),
    ("No full stop at all", "No full stop at all"),
])
def test_summary_is_the_first_whole_sentence(text, first):
    assert _help.summary(text) == first


@pytest.mark.parametrize(("label", "shown"), [
    ("<path>", "PATH"), ("<list[Path]>", "PATH..."), ("<int range>", "N"), ("<float>", "NUMBER"),
    ("<str>", "TEXT"), ("<a|b>", "a|b"), ("<list[str]>", "TEXT..."),
])
def test_typer_type_labels_become_metavars(label, shown):
    assert _help.metavar_of(label) == shown


def table_lines(text: str) -> list[str]:
    """Lines of a table (cells apart by two spaces); prose sentences are left whole, not counted."""
    return [x for x in text.splitlines() if "  " in x.strip()]


@pytest.mark.slow
@pytest.mark.skipif(not WILD_RUNS, reason="the recorded runs (data/runs) are not here")
def test_cost_judge_audit_and_runs_list_tables_fit_80_columns(tmp_path):
    outputs = {"cost": invoke("cost", str(WILD_RUNS[0])), "judge audit": invoke("judge", "audit", *map(str, WILD_RUNS)),
               "runs list": invoke("runs", "list", str(RUNS)), "trace shares": invoke("trace", "shares", str(WILD_RUNS[0]))}
    for name, r in outputs.items():
        assert r.exit_code == 0, (name, r.output)
        rows = table_lines(r.output)
        assert len(rows) >= 3, (name, r.output)
        assert [x for x in rows if len(x) > 80] == [], name
    # what the tables hold is all there: every file and every role, every run folder
    cost = outputs["cost"].output
    for f in ("answers.jsonl", "TOTAL", "cost_usd", "completion_"):
        assert f in cost, f
    assert "usage in " in cost.splitlines()[0] and cost.splitlines()[0].endswith("no price known)")  # one line
    for role in ("grading", "evidence", "gold_only"):
        assert re.search(rf"^{role}\s+\d+", outputs["judge audit"].output, re.M), role
    listed = outputs["runs list"].output
    assert listed.count("graded") + listed.count("traced") >= len(WILD_RUNS)


def legend_names(text: str) -> list[str]:
    """The names a legend explains (``name: meaning; name: meaning``)."""
    return re.findall(r"(?:^|; )([^:;]+?): ", " ".join(text.split()))


@pytest.mark.skipif(not WILD_RUNS, reason="the recorded runs (data/runs) are not here")
def test_the_grade_table_fits_80_columns_in_one_block_with_a_legend_of_its_columns(tmp_path):
    from trek.cli.grade import ACCURACY_COLUMNS

    run = tmp_path / "run"
    shutil.copytree(WILD_RUNS[0], run, ignore=shutil.ignore_patterns("*.sqlite*", ".trek.lock"))
    r = invoke("grade", str(run), "--judge", "oracle", "--no-progress")
    lines = r.stdout.splitlines()
    assert [x for x in lines if len(x) > 80] == [], r.stdout
    header = lines[0].split()
    assert header[:4] == ["dataset", "acc", "95%", "CI"], r.stdout
    assert sum(set(x) == {"-", " "} for x in lines) == 1, r.stdout  # one rule: not split in blocks
    assert any(x.startswith("micro") for x in lines) and any(x.startswith("macro") for x in lines)
    body = "\n".join(lines[lines.index(next(x for x in lines if x.startswith("macro"))) + 1:])
    named = legend_names(body)
    shown = [short for _, short, _ in ACCURACY_COLUMNS]
    assert named == shown, body
    assert [h for h in " ".join(header[1:]).replace("95% CI", "95%_CI").split()] == [x.replace(" ", "_") for x in shown]


def test_the_accuracy_table_of_a_large_run_with_every_count_fits_80_columns_in_one_block():
    import numpy as np
    import pandas as pd

    from trek.analysis import accuracy_by_dataset
    from trek.cli.grade import ACCURACY_COLUMNS, format_accuracy

    # 900 questions in three datasets (one of them the user's own), every kind of outcome present
    rng = np.random.default_rng(0)
    outcomes = rng.choice(["correct", "incorrect", "not_attempted", "undecided", "unparsed", "pending"], size=900,
                          p=[0.5, 0.2, 0.05, 0.15, 0.05, 0.05])
    df = pd.DataFrame({"dataset": np.repeat(["freshqa", "infodeepseek", "custom"], 300), "outcome": outcomes,
                       "answer_status": np.where(rng.random(900) < 0.97, "ok", "no_answer")})
    df["correct"] = df["outcome"] == "correct"
    table = accuracy_by_dataset(df)
    assert (table[["undecided", "unparsed", "pending"]] > 0).all().all()
    text = format_accuracy(table, limit=80)
    lines = text.splitlines()
    assert max(len(x) for x in lines) <= 80, text
    assert sum(set(x) == {"-", " "} for x in lines) == 1, text
    assert legend_names("\n".join(lines[2 + len(table):])) == [short for _, short, _ in ACCURACY_COLUMNS]
    micro = next(x for x in lines if x.startswith("micro")).split()
    assert micro[4] == "900" and micro[7] == str(int(table.loc["micro", "correct"]))


def test_runs_list_keeps_one_line_a_run_while_it_fits_and_otherwise_puts_the_folder_above_its_row():
    from trek.cli.runs_list import HEADERS, table

    short = [["wild/agentic", "agentic/local", "demo", "12", "8.3%", "11/11", "$-", "traced"]]
    text = table(short, limit=80)
    assert text.splitlines()[0].split() == list(HEADERS) and len(text.splitlines()) == 3
    model = "meta-llama/Llama-3.3-70B-Instruct-Turbo-with-a-long-suffix"
    folder = "ctrl/runs/Llama-3.3-70B-Instruct-Turbo__structured__OO-gold-first"
    long = [[folder, "structured OO:gold=first", model, "144", "100.0%", "10/12", "$12.3456", "tracing"], *short]
    text = table(long, limit=80)
    lines = text.splitlines()
    assert max(len(x) for x in lines) <= 80, text
    assert folder in lines and "wild/agentic" in lines  # each folder whole, on a line of its own
    row = lines[lines.index(folder) + 1]
    cut = next(c for c in row.split() if c.endswith("\N{HORIZONTAL ELLIPSIS}"))
    assert model.startswith(cut[:-1]) and len(cut) >= 12, row
    block = lines[lines.index(folder) + 1:lines.index("wild/agentic")]  # the row (its system name may wrap)
    assert row.rstrip().endswith("tracing") and " ".join(" ".join(block).split()).count("OO:gold=first") == 1
    assert lines[lines.index("wild/agentic") + 1].split()[:2] == ["agentic/local", "demo"]  # short names stay whole


@pytest.mark.parametrize("limit", [40, 60, 80, 120])
def test_render_fits_the_width_and_keeps_every_character(limit):
    headers = ["file", "model", "prompt_tokens", "completion_tokens", "reasoning_tokens", "cost_usd"]
    rows = [["audit-grading.jsonl", "SmolLM2-135M-Instruct-Q4_1 with a long note", 123456, 7, 0, "$0.0123"],
            ["answers.jsonl", "search:local", 1, 22, 333, "$-"]]
    text = textable.render(headers, rows, limit=limit, right=(2, 3, 4))
    assert max(len(x) for x in text.splitlines()) <= limit
    flat = "".join(text.split())
    for cell in [*headers, *(str(c) for row in rows for c in row)]:
        assert "".join(cell.split()) in flat or all(p in flat for p in re.split(r"[ _/\-]", cell)), cell
    for number in ("123456", "333"):  # a number is never broken across lines
        assert number in text


def test_a_table_too_wide_for_one_block_comes_in_blocks_led_by_its_key_column():
    headers = ["run", *(f"column_{i}" for i in range(12))]
    text = textable.render(headers, [["a-run", *range(1000, 1012)]], limit=80, right=range(1, 13))
    blocks = text.split("\n\n")
    assert len(blocks) >= 2 and all(b.splitlines()[0].startswith("run") and "a-run" in b for b in blocks)
    assert max(len(x) for x in text.splitlines()) <= 80
    assert all(str(n) in text for n in range(1000, 1012))


def test_summaries_on_standard_error_are_not_hard_wrapped(capsys):
    from trek.cli import options

    line = "endpoint pool: " + "; ".join(f"http://127.0.0.1:{46000 + i}/v1: {20 + i} served" for i in range(6))
    options.err.print(line, highlight=False)
    assert capsys.readouterr().err == line + "\n"


@pytest.mark.parametrize(("interval", "most"), [(None, 4), (0.001, None)])
def test_a_progress_bar_in_a_log_file_writes_a_few_lines_not_one_per_update(capsys, monkeypatch, interval, most):
    import asyncio

    from trek import aio

    if interval is not None:  # the same bar refreshed as often as in a terminal: many writes (the test can fail)
        monkeypatch.setattr(aio, "LOG_INTERVAL", interval)

    async def one(x):
        await asyncio.sleep(0.01)
        return x

    aio.run_sync(aio.fan_out(list(range(40)), one, limit=1, desc="answer", unit="q", progress=True))
    err = capsys.readouterr().err
    writes = err.count("\r") + err.count("\n")
    assert "40/40" in err
    if most is not None:
        assert writes <= most, err[-300:]
    else:
        assert writes > 10, err[-300:]


def test_the_first_make_install_says_what_it_installs_before_pip():
    make = (REPO / "Makefile").read_text()
    for target in ("$(STAMP): pyproject.toml constraints.txt\n", "$(TEST_STAMP): $(STAMP)\n", "$(LAB_STAMP): $(STAMP)\n"):
        recipe = make.split(target, 1)[1].split("\n\n", 1)[0]
        lines = [x.strip() for x in recipe.splitlines()]
        pip = next(i for i, x in enumerate(lines) if "pip install" in x)
        echoes = [i for i, x in enumerate(lines) if x.startswith("@echo ")]
        assert echoes and echoes[0] < pip and "install" in lines[echoes[0]], target


def test_the_ctrl_accuracy_grid_of_many_conditions_fits_80_columns(monkeypatch):
    from trek.rag.session import CtrlGridReport

    monkeypatch.setenv("COLUMNS", "80")
    conds = ["OO", "MND", "SAA", "SBA", "GOLD", *(f"OO:gold={g}" for g in ("first", "last", "1/3", "2/3")), "OO:k=10"]
    grid = {(m, c): (i + j, 12) for i, m in enumerate(("direct", "rerank", "filter", "structured"))
            for j, c in enumerate(conds)}
    text = CtrlGridReport(summary=None, model="m", grid=grid).describe_grid()
    lines = text.splitlines()
    assert max(len(x) for x in lines[1:]) <= 80 and len(lines) > 6
    for c in conds:
        assert c in text
    assert f"{100 * 12 / 12:.1f}" in text and f"{100 * 3 / 12:.1f}" in text  # direct x SBA 3 of 12, structured x OO:k=10 12 of 12


@pytest.mark.skipif(not (RUNS / "ctrl" / "build").is_dir(), reason="the recorded Ctrl build (data/runs) is not here")
def test_the_shortcut_audit_fits_80_columns_in_one_block_and_names_each_heuristic():
    from trek.ctrl.shortcuts import HEURISTICS
    from trek.report.ctrl_build import load_build, shortcut_table

    r = invoke("ctrl", "audit", str(RUNS / "ctrl" / "build"))
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert max(len(x) for x in lines) <= 80 and sum(set(x) == {"-", " "} for x in lines) == 1, r.stdout
    assert lines[1].split() == ["condition", "n", *HEURISTICS]
    key = "\n".join(lines[lines.index(next(x for x in lines if x.startswith(f"{HEURISTICS[0]}:"))):])
    assert legend_names(key) == list(HEURISTICS)
    table = shortcut_table(load_build((RUNS / "ctrl" / "build").resolve()))
    for cond, row in table.iterrows():  # every figure of the table is shown, in its row
        h = HEURISTICS[-1]
        cell = f"{row[h]:.1f} ({row[f'{h} low']:.1f}-{row[f'{h} high']:.1f})"
        assert any(x.split()[:2] == [cond, str(int(row["n"]))] and x.rstrip().endswith(cell) for x in lines), cond


@pytest.mark.parametrize("limit", [30, 50, 80])
def test_a_legend_breaks_between_its_entries_and_keeps_every_name(limit):
    key = [("acc", "% correct of n"), ("95% CI", "interval of acc"), ("n", "questions"), ("grad", "graded (a verdict)"),
           ("acc/g", "% correct of grad")]
    text = textable.legend(key, limit=limit)
    assert max(len(x) for x in text.splitlines()) <= limit
    assert legend_names(text) == [name for name, _ in key]
    for name, meaning in key:  # no entry is split across lines when it fits on one
        assert any(f"{name}: {meaning}" in x for x in text.splitlines()), (name, text)
    assert len(text.splitlines()) > 1 or limit >= len("; ".join(f"{n}: {m}" for n, m in key))
