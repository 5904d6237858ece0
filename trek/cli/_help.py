"""How ``--help`` names values: conventional metavars (``PATH``, ``N``, ``NUMBER``, ``TEXT``,
``RUN_DIR``), not the Python types typer 0.29 prints (``<list[Path]>``, ``<int range>``,
``{run_dir}``).

Typer builds its parameter objects itself, so the one place to change how they are shown is their
classes: :func:`install` (run when :mod:`trek.cli` is imported) replaces three display methods of
``typer.core``'s option and argument classes. An option or argument with a ``metavar`` keeps it.
It also makes a list of commands show each one's first whole sentence (:func:`summary`), wrapped
by the formatter, where click would cut it to the column with "..."."""

from __future__ import annotations

import inspect
import re
from typing import Any

__all__ = ["SYNONYMS", "HINTS", "install", "metavar_of", "summary"]

#: typer's type labels -> the metavar shown.
LABELS = {"int": "N", "int range": "N", "float": "NUMBER", "float range": "NUMBER", "str": "TEXT", "path": "PATH",
          "Path": "PATH", "file": "FILE", "directory": "DIR", "bool": "BOOLEAN", "datetime": "DATETIME"}


def metavar_of(label: str) -> str:
    """The metavar for one of typer's type labels (``<list[Path]>`` -> ``PATH...``,
    ``<int range>`` -> ``N``; choices ``a|b`` stay as they are)."""
    label = label.strip().removeprefix("<").removesuffix(">")
    many = label.startswith("list[") and label.endswith("]")
    if many:
        label = label[5:-1]
    shown = label if "|" in label else LABELS.get(label, label.upper())
    return shown + ("..." if many else "")


_END = re.compile(r"(?<!e\.g)(?<!i\.e)(?<!etc)[.?!](?=\s|$)")


def summary(text: str | None) -> str:
    """The first whole sentence of a help text's first paragraph (what a list of commands shows,
    wrapped to the width by the formatter, never cut with "...")."""
    para = " ".join(inspect.cleandoc(text or "").split("\n\n")[0].replace("\b", " ").split())
    for m in _END.finditer(para):
        head = para[: m.end()]
        if head.count("(") <= head.count(")") and head.count("`") % 2 == 0:
            return head
    return para


#: Flags people reach for under another name -> what Trek's commands call them. A command given
#: an unknown flag of this table suggests the ones it has (``trek wild run --out`` -> ``--run``),
#: where click would offer names that only look alike (``--budget``, ``--timeout``).
SYNONYMS: dict[str, tuple[str, ...]] = {
    "--out": ("--run",), "--output": ("--out", "--run"), "--run": ("--out",), "--run-dir": ("--run", "--out"),
    "--dir": ("--run", "--out"), "--judge-model": ("--judge",), "--dataset": ("--questions",),
    "--question-set": ("--questions",), "--n": ("--limit",), "--max-questions": ("--limit",),
    "--judges": ("--judge", "--diagnostic-judge", "--analysis-judge", "--audit-judge"),
    "--grader-model": ("--judge",), "--cascade": ("--judge",),
}
#: What an unknown flag of :data:`SYNONYMS` is told besides the command's names for it.
HINTS: dict[str, str] = {
    "--judges": "judges are named by --judge SPEC (a model, a judge kind such as exact, or a cascade such as "
                "exact,MODEL), or role by role with the flags listed; see docs/judges.md",
    "--cascade": "a cascade is a value of --judge: --judge exact,MODEL; see docs/judges.md",
}


def install() -> None:
    """Make typer's options and arguments show :func:`metavar_of` names, and unknown flags of
    :data:`SYNONYMS` suggest the command's own name for them (idempotent)."""
    from typer import core

    arg, opt = core.TyperArgument, core.TyperOption
    if getattr(arg, "_trek_metavars", False):
        return
    shown_type = core._TyperParameter.display_type

    def display_type(self: Any, ctx: Any) -> str:
        return metavar_of(shown_type(self, ctx))

    def argument_name(self: Any) -> str:
        return self.metavar if self.metavar is not None else (self.name or "").upper()

    def usage_name(self: Any) -> str:
        name = argument_name(self)
        name = name if self.required else f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")

    def short_help(self: Any, limit: int = 45) -> str:
        text = summary(self.short_help or self.help)
        return f"(DEPRECATED) {text}" if self.deprecated else text

    core._click.core.Command.get_short_help_str = short_help  # whole sentences in a list of commands
    opt.display_type = display_type
    arg.display_type_rich = lambda self, ctx: None  # an argument shows its name (RUN_DIR), not a type
    arg.display_name_raw = property(argument_name)
    arg._usage_display_name = usage_name
    arg._trek_metavars = True
    _suggest_synonyms(core._click.core.Command)


def _suggest_synonyms(command: Any) -> None:
    """Make ``command`` (click's class) answer an unknown flag of :data:`SYNONYMS` with the
    command's own name for it."""
    parse_args = command.parse_args

    def parse_args_naming_synonyms(self: Any, ctx: Any, args: list[str]) -> list[str]:
        try:
            return parse_args(self, ctx, args)
        except Exception as e:
            named = getattr(e, "option_name", None)
            if named in SYNONYMS and hasattr(e, "possibilities"):
                have = {o for p in self.params for o in getattr(p, "opts", [])}
                meant = [o for o in SYNONYMS[named] if o in have]
                if meant:
                    e.possibilities = meant
                    if named in HINTS:
                        e.message = f"No such option: {named}. {HINTS[named][0].upper()}{HINTS[named][1:]}"
            raise

    command.parse_args = parse_args_naming_synonyms
