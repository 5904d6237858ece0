"""docs/deviations.md, "Deviations and choices": every place it names to change a choice exists.

Each row ends with where to change the choice: command-line options (``--flag``), dotted names in
``trek`` (``trek.report.trace.coverage_note``) and files (``trek/graders/verdict.py``). A renamed
option or function would leave the row pointing nowhere; this test fails then.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import typer

from trek.cli import app

REPO = Path(__file__).resolve().parents[1]


def rows() -> list[list[str]]:
    text = (REPO / "docs" / "deviations.md").read_text(encoding="utf-8")
    section = text.split("# Deviations and choices\n", 1)[1].split("\n## ", 1)[0]
    out = []
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith("| what ") and not line.startswith("|---"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            out.append(cells)
    return out


def all_options() -> set[str]:
    found: set[str] = set()

    def walk(cmd) -> None:  # a command, or a group
        for p in cmd.params:
            for opt in [*p.opts, *getattr(p, "secondary_opts", [])]:
                found.add(opt)
        if hasattr(cmd, "list_commands"):  # a group (the root loads its commands on request)
            ctx = cmd.context_class(cmd)
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name))

    walk(typer.main.get_command(app))
    return found


def resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def test_the_table_has_a_place_to_change_every_choice():
    table = rows()
    assert len(table) > 60
    assert all(len(r) == 3 and all(r) for r in table), [r for r in table if len(r) != 3 or not all(r)]


def test_every_option_name_and_file_the_table_points_to_exists():
    options = all_options()
    assert {"--judge-param", "--fetch", "--results", "--effort"} <= options
    missing, checked = [], 0
    for what, _choice, where in rows():
        code = re.findall(r"`([^`]+)`", where)
        for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", where):
            checked += 1
            if flag not in options:
                missing.append((what, flag))
        for c in code:
            name = re.sub(r"\(.*$", "", c).strip()
            if re.fullmatch(r"trek(\.\w+)+", name):
                checked += 1
                if not resolves(name):
                    missing.append((what, name))
            if re.fullmatch(r"[\w/]+\.(py|ipynb)", name):
                checked += 1
                if not (REPO / name).exists():
                    missing.append((what, name))
    assert missing == []
    assert checked > 60  # the table names that many places: none was skipped by a parsing slip
