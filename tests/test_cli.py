"""Every `trek` command and sub-command answers --help."""

import typer
from typer.testing import CliRunner

from trek.cli import app


def _paths(cmd, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    if hasattr(cmd, "list_commands"):  # a group (typer may vendor its own click)
        ctx = cmd.context_class(cmd)
        for name in cmd.list_commands(ctx):
            out += _paths(cmd.get_command(ctx, name), prefix + (name,))
    return out


def test_every_command_has_help():
    root = typer.main.get_command(app)
    paths = _paths(root)
    names = {" ".join(p) for p in paths}
    for expected in ("llm run", "cost", "data info", "data download", "grade", "wild run"):
        assert expected in names, f"missing command: trek {expected}"
    runner = CliRunner()
    for p in paths:
        r = runner.invoke(app, [*p, "--help"])
        assert r.exit_code == 0, f"trek {' '.join(p)} --help failed: {r.output}"
        assert "Usage" in r.output


def _commands(cmd):
    yield cmd
    if hasattr(cmd, "list_commands"):
        ctx = cmd.context_class(cmd)
        for name in cmd.list_commands(ctx):
            yield from _commands(cmd.get_command(ctx, name))


def test_option_help_has_no_square_brackets_that_rich_would_swallow():
    # Rich reads "[default: x]" in a help text as a markup tag and prints nothing of it
    import re

    bad = [f"{cmd.name} {param.name}: {param.help}"
           for cmd in _commands(typer.main.get_command(app)) for param in getattr(cmd, "params", [])
           if re.search(r"\[[a-z][^\]]*\]", getattr(param, "help", None) or "")]
    assert not bad, bad


def test_version():
    r = CliRunner().invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.startswith("trek ")
