"""The ``trek`` command: the root app and its sub-command groups, one module each in this package.

The commands parse options into a run directory, roles and settings, make one library call and
report; the work is done by library functions (:func:`trek.answering.wild.run_wild`,
:func:`trek.grading.grade_with_roles`, ...), which never import from here.

The root group is lazy: a sub-command's module is imported only when that command runs (or its
own ``--help`` is asked for), so ``trek --version`` and ``trek --help`` import none of them.
:data:`COMMANDS` names, for each command, the module and attribute that define it and the one
line ``trek --help`` shows (a test keeps that line equal to the command's own help)."""

from __future__ import annotations

import importlib
from typing import Any

import typer
from typer.core import TyperGroup

from trek import __version__
from trek import parts as _parts  # noqa: F401  (the list of Trek's parts completes the registries)
from trek.cli import _help

__all__ = ["app", "COMMANDS", "load_command", "short_help", "main"]

#: ``name: (module, attribute, the line of trek --help)``, in the order ``trek --help`` lists them.
#: The attribute is a ``typer.Typer`` (a group) or a command function.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "cost": ("trek.cli.llm", "cost_command",
           "Summarize the tokens and dollars recorded in a run directory (the rule of Table 12)."),
    "grade": ("trek.cli.grade", "grade_command",
            "Grade a run's answers with each dataset's judge and print the accuracy table."),
    "compare": ("trek.cli.compare", "compare_command",
                "Compare runs of the same questions pair by pair, correcting the judge's errors by a review."),
    "experiments": ("trek.cli.local", "experiments_command",
                  "Run every experiment on TrekBench-Mini with the embedded model, or replay them (`make runs`)."),
    "import": ("trek.cli.imports", "import_command",
             "Import an agent's logs as a Trek run directory that `trek grade` and `trek trace` read."),
    "validate": ("trek.cli.imports", "validate_command",
               "Check every file of a run directory against the trajectory schema."),
    "schema": ("trek.cli.imports", "schema_command",
             "Print a JSON Schema of one of Trek's file formats (default: the trajectory of answers.jsonl)."),
    "fake-server": ("trek.cli.fake", "fake_server_command",
                    "Serve a fake OpenAI-compatible endpoint on this machine until Ctrl-C."),
    "retry": ("trek.cli.retry", "retry_command",
              "Run a Wild run's pending and failed questions again, with the settings run.json recorded."),
    "runs": ("trek.cli.runs_list", "app", "List run folders and what each holds."),
    "llm": ("trek.cli.llm", "app",
          "Run model calls through Trek's cached, concurrent, retrying client."),
    "data": ("trek.cli.data", "app",
           "Source datasets of TrekBench-Wild (FreshQA, InfoDeepSeek, SealQA): fetch them at their pinned versions and report what is loaded."),
    "wild": ("trek.cli.run", "app",
           "Run search-augmented systems on TrekBench-Wild (or the bundled demo)."),
    "local": ("trek.cli.local", "app",
            "The embedded local model (llama.cpp server with SmolLM2-135M)."),
    "trace": ("trek.cli.trace", "app",
            "TrekTrace: where did a search-augmented system fail? (`trek trace RUN_DIR` traces a run.)"),
    "judge": ("trek.cli.judge", "app",
            "The judges: measure an LLM judge against the exact judge on annotated runs."),
    "pages": ("trek.cli.imports", "pages_app",
            "The run's page store: add page text without a live fetch."),
    "ctrl": ("trek.cli.ctrl", "app",
           "TrekBench-Ctrl: distractor pools, synthetic distractors and frozen contexts."),
}

_help.install()  # --help shows PATH, N, RUN_DIR (not Python types) and whole sentences in command lists

_loaded: dict[str, Any] = {}


def load_command(name: str) -> Any:
    """The click command (or group) of ``trek NAME``, importing its module on first use."""
    cmd = _loaded.get(name)
    if cmd is None:
        module, attr, _ = COMMANDS[name]
        obj = getattr(importlib.import_module(module), attr)
        if name == "ctrl":  # `trek ctrl run` lives in a module of its own
            from trek.cli.ctrl_run import ctrl_run_command

            if not any(c.name == "run" for c in obj.registered_commands):
                obj.command("run")(ctrl_run_command)
        if name == "grade":  # `trek grade review RUN --sample N` lives in a module of its own
            from trek.cli.grade_review import with_review

            one = typer.Typer(rich_markup_mode=None)
            one.command(name)(obj)
            cmd = with_review(typer.main.get_command(one))
        elif isinstance(obj, typer.Typer):  # a group, even of one command (`trek llm run`)
            cmd = typer.main.get_group(obj)
        else:  # a command function: a one-command app is that command
            one = typer.Typer(rich_markup_mode=None)
            one.command(name)(obj)
            cmd = typer.main.get_command(one)
        cmd.name = name
        _loaded[name] = cmd
    return cmd


def short_help(name: str, limit: int = 45) -> str:
    """The line of ``trek --help`` for ``name``: the first whole sentence of its line in
    :data:`COMMANDS` (the formatter wraps it to the width; ``limit`` is not a cut)."""
    return _help.summary(COMMANDS[name][2])


class _LazyGroup(TyperGroup):
    """The root group: lists :data:`COMMANDS` without importing them, loads one when it runs."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*self.commands, *(n for n in COMMANDS if n not in self.commands)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        return load_command(cmd_name) if cmd_name in COMMANDS else None

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        # click would load every command for its one-line help; the lines are in COMMANDS
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = [(n, short_help(n, limit)) for n in names]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


app = typer.Typer(rich_markup_mode=None,
    cls=_LazyGroup,
    name="trek",
    help="Trek: failure attribution and benchmarks for search-augmented LLMs on fast-changing facts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"trek {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Trek command line."""
    from trek.interrupts import terminate_as_interrupt

    terminate_as_interrupt()  # SIGTERM (kill, a container stop, a CI timeout) ends a command as Ctrl-C does


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
