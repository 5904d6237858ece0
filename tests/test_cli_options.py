"""The shared pieces of the commands: option groups, the error exit and the look before spending."""

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
