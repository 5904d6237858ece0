"""Prompt templates with user overrides.

Every prompt in Trek is a module-level constant written in our own words and has a name
(``answer.freshqa``, ``grader.sealqa``, ...). A user can replace any of them without touching
code: put ``<name>.txt`` in a folder and point ``TREK_PROMPTS`` (or ``--prompts`` on the
commands that take it) at that folder. In Python the folder is passed explicitly and scoped:
``with templates.prompts_folder(path): ...`` (a context variable, so concurrent tasks and
notebook cells see the folder of the block they run in, and nothing needs resetting after). Templates use
``str.format`` fields such as ``{question}``; an override must use the same fields.

Names are checked, through one registry. A module declares each of its templates once, when it
is imported, with :func:`register` (``PROMPT = register("grader.sealqa", "...")``); the list of
Trek's parts lives at the top (:mod:`trek.parts`, imported by the command line), which makes
:func:`known_templates` complete (this foundation module imports no stage). A ``.txt`` file in the prompts folder whose name matches no template
(``grader.sealqaa.txt``) and a lookup of an unknown name (``render("no-such-name")``) raise
:class:`UnknownTemplateError`, whose message lists the known names, instead of being ignored.
"""

from __future__ import annotations

import hashlib
import os
import re
import string
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

__all__ = [
    "UnknownTemplateError",
    "known_templates",
    "completed_by",
    "prompts_dir",
    "register",
    "render",
    "prompts_folder",
    "template",
    "template_version",
]

_override_dir: ContextVar[Path | None] = ContextVar("trek_prompts_folder", default=None)
_registry: dict[str, str] = {}
_extra_fields: dict[str, frozenset[str]] = {}
_checked: set[tuple[str, frozenset[str]]] = set()
_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")


class UnknownTemplateError(ValueError):
    """A template name (asked for, or an override file's name) that matches no template."""


def register(name: str, default: str, extra_fields: tuple[str, ...] = ()) -> str:
    """Declare template ``name`` with built-in text ``default``; returns ``default``.

    Called at import time by the module that owns the prompt (imported by :mod:`trek.parts`). ``extra_fields`` are fields the caller always fills that an
    override may use although the built-in text does not. Registering a name twice with
    different text is an error.
    """
    if not _NAME.match(name):
        raise ValueError(f"template name {name!r} must look like 'group.name'")
    known = _registry.get(name)
    if known is not None and known != default:
        raise ValueError(f"template {name!r} is registered twice with different built-in texts")
    _registry[name] = default
    if extra_fields:
        _extra_fields[name] = frozenset(extra_fields)
    return default


#: Functions that import the parts whose modules declare templates, registered by the top of the
#: stack (:func:`trek.parts.import_all`, which the command line installs): this foundation module
#: never imports a stage, by name or otherwise; :func:`known_templates` runs them once.
_completers: list[Callable[[], object]] = []


def completed_by(fn: Callable[[], object]) -> Callable[[], object]:
    """Decorator: ``fn`` imports the remaining declaring modules when the whole list is needed."""
    _completers.append(fn)
    return fn


def known_templates() -> dict[str, str]:
    """Every declared template: ``{name: built-in text}``, of the modules imported so far and, once
    :mod:`trek.parts` is imported (the command line does), of every part of Trek."""
    while _completers:
        _completers.pop(0)()
    return dict(_registry)


def _unknown(name: str, what: str) -> UnknownTemplateError:
    names = ", ".join(sorted(known_templates()))
    return UnknownTemplateError(f"{what} {name!r} matches no template; known templates: {names}")


@contextmanager
def prompts_folder(path: str | os.PathLike[str] | None) -> Iterator[Path | None]:
    """Use the templates in ``path`` inside the ``with`` block (``None``: ``$TREK_PROMPTS`` or
    the built-ins). The folder is checked on entry.

    Raises ``FileNotFoundError`` for a missing folder and :class:`UnknownTemplateError` for a
    ``.txt`` file in it that matches no template.
    """
    folder = Path(path) if path is not None else None
    if folder is not None:
        _check_folder(folder)
    token = _override_dir.set(folder)
    try:
        yield folder
    finally:
        _override_dir.reset(token)


def prompts_dir() -> Path | None:
    """The override folder in force: the innermost :func:`prompts_folder`, else ``$TREK_PROMPTS``."""
    folder = _override_dir.get()
    if folder is not None:
        return folder
    env = os.environ.get("TREK_PROMPTS")
    return Path(env) if env else None


def _check_folder(d: Path) -> None:
    """Every ``*.txt`` in ``d`` must be named after a known template (checked once per listing)."""
    if not d.is_dir():
        raise FileNotFoundError(f"prompt folder {d} does not exist")
    files = frozenset(f.name for f in d.glob("*.txt"))
    key = (str(d.resolve()), files)
    if key in _checked:
        return
    known = known_templates()
    for fname in sorted(files):
        if fname[: -len(".txt")] not in known:
            raise _unknown(fname[: -len(".txt")], f"prompt override {d / fname}:")
    _checked.add(key)


def _fields(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f}


def _builtin(name: str, default: str | None) -> str:
    """The registered text of ``name``; ``default``, when a caller passes it, must be that text."""
    text = _registry.get(name)
    if text is None:
        text = known_templates().get(name)
    if text is None:
        raise _unknown(name, "template")
    if default is not None and default != text:
        raise ValueError(f"template {name!r}: the built-in text passed differs from the registered one")
    return text


def template(name: str, default: str | None = None) -> str:
    """The text of template ``name``: the user's override file if present, else the registered
    built-in (``default``, when given, must be that same text).

    An override that uses a field the built-in does not provide is rejected with a message
    naming the file and the field; an unknown name or override file raises
    :class:`UnknownTemplateError`.
    """
    default = _builtin(name, default)
    d = prompts_dir()
    if d is not None:
        _check_folder(d)
        f = d / f"{name}.txt"
        if f.exists():
            text = f.read_text(encoding="utf-8")
            allowed = _fields(default) | _extra_fields.get(name, frozenset())
            unknown = _fields(text) - allowed
            if unknown:
                raise ValueError(
                    f"prompt override {f}: unknown field(s) {sorted(unknown)}; "
                    f"available: {sorted(allowed)}"
                )
            return text
    return default


def template_version(name: str, default: str | None, version: str) -> str:
    """``version`` for the built-in text, ``version+override.<hash>`` for a user's file."""
    text = template(name, default)
    if text == _builtin(name, default):
        return version
    return f"{version}+override.{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def render(name: str, default: str | None = None, **fields: object) -> str:
    """Fill template ``name`` with ``fields`` (fields an override does not use are ignored)."""
    return template(name, default).format(**fields)
