"""The shared pieces of the commands: option groups, the error exit and the look before spending."""

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import typer
from typer.testing import CliRunner

from trek.cli import options


def _app(command) -> typer.Typer:
    app = typer.Typer()
    app.command()(command)
    return app


def test_a_group_stands_for_its_options_in_place():
    seen = {}

    @options.grouped
    def command(
        name: str = typer.Option("x", "--name"),
        spending: options.Spending = options.GROUP,
        batch: options.Batch = options.GROUP,
        last: Path = typer.Option(None, "--last"),
    ) -> None:
        seen.update(name=name, spending=spending, batch=batch, last=last)

    r = CliRunner().invoke(_app(command), ["--help"], env={"COLUMNS": "200"})
    flags = ["--name", "--dry-run", "--confirm-above", "--yes", "--assume-output", "--batch ", "--batch-poll",
             "--batch-wait", "--last"]
    assert r.exit_code == 0 and all(f in r.output for f in flags)
    assert sorted(flags, key=r.output.index) == flags
    r = CliRunner().invoke(_app(command), ["--dry-run", "--assume-output", "7", "--batch", "--no-batch-wait", "--last", "p"])
    assert r.exit_code == 0, r.output
    assert seen["spending"] == options.Spending(dry_run=True, confirm_above=5.0, yes=False, assume_output=7)
    assert seen["batch"] == options.Batch(enabled=True, poll=30.0, wait=False)
    assert seen["batch"].settings() == {"wait": False, "poll_seconds": 30.0}
    assert (seen["name"], seen["last"]) == ("x", Path("p"))
    r = CliRunner().invoke(_app(command), ["--assume-output", "0"])
    assert r.exit_code == 2  # the group's option keeps its min=1


@dataclasses.dataclass(frozen=True)
class _Outer:
    first: str = typer.Option("a", "--first")
    spending: options.Spending = options.GROUP
    last: int = typer.Option(1, "--last-n")


def test_a_group_may_hold_groups():
    seen = {}

    @options.grouped
    def command(run: str = typer.Argument(...), o: _Outer = options.GROUP) -> None:
        seen.update(run=run, o=o)

    r = CliRunner().invoke(_app(command), ["--help"], env={"COLUMNS": "200"})
    flags = ["--first", "--dry-run", "--confirm-above", "--yes", "--assume-output", "--last-n"]
    assert r.exit_code == 0 and sorted(flags, key=r.output.index) == flags
    r = CliRunner().invoke(_app(command), ["R", "--first", "b", "--dry-run", "--last-n", "3"])
    assert r.exit_code == 0, r.output
    assert seen == {"run": "R", "o": _Outer(first="b", spending=options.Spending(True, 5.0, False, 4096), last=3)}


def test_exit_on_turns_the_listed_errors_into_exit_2():
    def command(kind: str) -> None:
        with options.exit_on(ValueError, hint=lambda m: "try less" if "big" in m else None):
            if kind == "big":
                raise ValueError("too big")
            if kind == "plain":
                raise ValueError("bad")
            raise KeyError("not listed")

    r = CliRunner().invoke(_app(command), ["big"])
    assert r.exit_code == 2 and r.output == "error: too big\nhint: try less\n"
    r = CliRunner().invoke(_app(command), ["plain"])
    assert r.exit_code == 2 and r.output == "error: bad\n"
    r = CliRunner().invoke(_app(command), ["other"])
    assert isinstance(r.exception, KeyError)


def test_proceed_prints_on_dry_run_and_asks_above_the_threshold():
    def spend(high: float, **kw) -> tuple[bool | None, str]:
        est = SimpleNamespace(usd_high=high, describe=lambda: f"estimate: up to ${high}")
        out: dict[str, bool] = {}

        def command() -> None:
            out["go"] = options.Spending(**{"dry_run": False, "confirm_above": 5.0, "yes": False,
                                            "assume_output": 1, **kw}).proceed(est)

        r = CliRunner().invoke(_app(command), [])
        return out.get("go"), f"{r.exit_code}:{r.output}"

    go, text = spend(100.0, dry_run=True)
    assert go is False and text.startswith("0:estimate: up to $100.0")
    assert spend(1.0) == (True, "0:")
    assert spend(100.0, yes=True) == (True, "0:")
    go, text = spend(100.0)
    assert go is None and text.startswith("2:") and "--yes" in text  # no terminal to ask on
    go, text = spend(float("nan"))
    assert go is True and "no dollar estimate" in text
    est = SimpleNamespace(usd_high=100.0, describe=lambda: "")
    assert options.Spending(False, 5.0, False, 1).proceed(est, budget=200.0)  # a budget is the answer


# -- every numeric option: finite and in range, through one validator --------------------------------
def test_check_number_names_the_setting_range_and_value():
    import math

    import pytest

    assert options.check_number("--x", 0.5, 0, 1) == 0.5 and options.check_number("--x", None, 0) is None
    assert options.check_number("--x", 0, 0, 1) == 0
    for value, shown in [(math.nan, "nan"), (math.inf, "inf"), (-1, "-1"), (2, "2")]:
        with pytest.raises(ValueError, match=f"^--x must be a finite number at least 0 and at most 1, not {shown}$"):
            options.check_number("--x", value, 0, 1)
    with pytest.raises(ValueError, match="above 0, not 0"):
        options.check_number("--timeout", 0, 0, low_open=True)


def _numeric_cases(tmp: str):
    llm = ["llm", "run", f"{tmp}/req.jsonl", "--out", f"{tmp}/o.jsonl", "--model", "m"]
    wild = ["wild", "run", "--model", "m", "--run", f"{tmp}/run", "--questions", "mini"]
    ctrl_run = ["ctrl", "run", f"{tmp}/contexts.jsonl", "--model", "m", "--runs", f"{tmp}/grid"]
    trace = ["trace", "run", f"{tmp}/run", "--judge", "j"]
    grade = ["grade", f"{tmp}/run", "--judge", "j"]
    build = ["ctrl", "build", "--out", f"{tmp}/build"]
    return [
        (llm, "--timeout", "0"), (llm, "--timeout", "-5"), (llm, "--timeout", "nan"),
        (llm, "--budget", "nan"), (llm, "--budget", "-1"), (llm, "--budget", "abc"), (llm, "--budget", "inf"),
        (llm, "--confirm-above", "nan"), (llm, "--batch-poll", "0"), (llm, "--batch-poll", "nan"),
        (wild, "--timeout", "0"), (wild, "--budget", "nan"), (wild, "--fetch-timeout", "nan"),
        (wild, "--confirm-above", "-1"),
        (ctrl_run, "--sigma-days", "nan"), (ctrl_run, "--sigma-days", "0"), (ctrl_run, "--alpha", "1.5"),
        (ctrl_run, "--alpha", "nan"), (ctrl_run, "--temperature", "nan"), (ctrl_run, "--temperature", "-1"),
        (ctrl_run, "--max-tokens", "-5"), (ctrl_run, "--timeout", "-5"), (ctrl_run, "--budget", "-1"),
        (trace, "--budget", "nan"), (trace, "--confirm-above", "nan"),
        (grade, "--confirm-above", "nan"), (grade, "--batch-poll", "-1"),
        (build, "--min-similarity", "nan"), (build, "--min-similarity", "2"),
    ]


def test_numeric_options_are_finite_and_in_range(tmp_path):
    from trek.cli import app

    for args, option, value in _numeric_cases(str(tmp_path)):
        r = CliRunner().invoke(app, [*args, option, value], env={"COLUMNS": "200"})
        flat = " ".join(r.output.split())
        assert r.exit_code == 2, (option, value, r.output)
        assert f"Invalid value for '{option}'" in flat, (option, value, flat)
        assert r.exception is None or isinstance(r.exception, SystemExit)
    assert list(tmp_path.iterdir()) == []  # refused before anything was made
    r = CliRunner().invoke(app, ["ctrl", "build", "--out", str(tmp_path / "b"), "--min-similarity", "0.5",
                                 "--source", "nope"])  # a good value passes (the command stops at --source)
    assert r.exit_code == 2 and "--min-similarity" not in r.output and "--source" in r.output
