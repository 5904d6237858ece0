"""The ``trek`` command: the root app and its sub-command groups, one module each in this package.

The commands parse options into a run directory, roles and settings, make one library call and
report; the work is done by library functions (:func:`trek.answering.wild.run_wild`,
:func:`trek.grading.grade_with_roles`, ...), which never import from here."""

from __future__ import annotations

import typer

from trek import __version__

app = typer.Typer(rich_markup_mode=None,
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


def _register() -> None:
    # Sub-command groups live next to the code they drive.
    from trek.cli.llm import app as llm_app
    from trek.cli.llm import cost_command

    app.add_typer(llm_app, name="llm")
    app.command("cost")(cost_command)
    from trek.cli.data import app as data_app
    from trek.cli.grade import grade_command
    from trek.cli.run import app as wild_app

    app.add_typer(data_app, name="data")
    app.command("grade")(grade_command)
    app.add_typer(wild_app, name="wild")
    from trek.cli.local import app as local_app
    from trek.cli.local import experiments_command

    app.add_typer(local_app, name="local")
    app.command("experiments")(experiments_command)
    from trek.cli.trace import app as trace_app

    app.add_typer(trace_app, name="trace")
    from trek.cli.judge import app as judge_app

    app.add_typer(judge_app, name="judge")
    from trek.cli.imports import import_command, pages_app, schema_command, validate_command

    app.command("import")(import_command)
    app.command("validate")(validate_command)
    app.command("schema")(schema_command)
    app.add_typer(pages_app, name="pages")

    from trek.cli.ctrl import app as ctrl_app
    from trek.cli.ctrl_run import ctrl_run_command

    ctrl_app.command("run")(ctrl_run_command)
    app.add_typer(ctrl_app, name="ctrl")
    from trek.cli.fake import fake_server_command

    app.command("fake-server")(fake_server_command)


_register()


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
