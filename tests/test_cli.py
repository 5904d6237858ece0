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


def _imported_after(*args: str) -> set[str]:
    """The modules a fresh ``trek ARGS`` process has imported when it exits (its output checked)."""
    import subprocess
    import sys

    code = ("import sys\nfrom trek.cli import app\ntry:\n    app(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print('MODULES', ' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120).stdout
    assert "MODULES " in out, out
    return set(out.split("MODULES ", 1)[1].split())


def test_version_and_help_import_no_command_module():
    from trek.cli import COMMANDS

    command_modules = {m for m, _, _ in COMMANDS.values()} | {"trek.cli.ctrl_run", "trek.cli.options"}
    for args in (["--version"], ["--help"], []):
        mods = _imported_after(*args)
        assert not mods & command_modules, (args, sorted(mods & command_modules))
        assert "numpy" not in mods and "trek.llm" not in mods, args
    # and a command loads its module alone
    mods = _imported_after("llm", "--help")
    assert "trek.cli.llm" in mods and not mods & (command_modules - {"trek.cli.llm", "trek.cli.options"})


def test_the_lines_of_trek_help_are_the_commands_own():
    """trek --help shows each command's line from COMMANDS without loading it; they must agree."""
    from trek.cli import COMMANDS, load_command, short_help

    for name in COMMANDS:
        cmd = load_command(name)
        for limit in (45, 10_000):
            assert short_help(name, limit) == cmd.get_short_help_str(limit), name
    r = CliRunner().invoke(app, ["--help"])
    assert r.exit_code == 0 and all(f"  {name} " in r.output for name in COMMANDS)


def test_an_unknown_command_is_refused():
    r = CliRunner().invoke(app, ["no-such-command"])
    assert r.exit_code == 2 and "No such command" in r.output
