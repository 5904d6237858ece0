"""Prompt templates with user overrides.

Every prompt in Trek is a module-level constant written in our own words and has a name
(``answer.freshqa``, ``grader.sealqa``, ...). A user can replace any of them without touching
code: put ``<name>.txt`` in a folder and point ``TREK_PROMPTS`` (or ``--prompts`` on the
commands that take it, or :func:`set_prompts_dir`) at that folder. Templates use
``str.format`` fields such as ``{question}``; an override must use the same fields.
"""

from __future__ import annotations

import hashlib
import os
import string
from pathlib import Path

__all__ = ["template", "set_prompts_dir", "prompts_dir", "template_version", "render"]

_override_dir: Path | None = None


def set_prompts_dir(path: str | os.PathLike[str] | None) -> None:
    """Use templates from ``path`` (``None`` restores ``$TREK_PROMPTS`` / the built-ins)."""
    global _override_dir
    if path is not None and not Path(path).is_dir():
        raise FileNotFoundError(f"prompt folder {path} does not exist")
    _override_dir = Path(path) if path is not None else None


def prompts_dir() -> Path | None:
    if _override_dir is not None:
        return _override_dir
    env = os.environ.get("TREK_PROMPTS")
    return Path(env) if env else None


def _fields(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f}


def template(name: str, default: str) -> str:
    """The text of template ``name``: the user's override file if present, else ``default``.

    An override that uses a field the built-in does not provide is rejected with a message
    naming the file and the field.
    """
    d = prompts_dir()
    if d is not None:
        f = d / f"{name}.txt"
        if f.exists():
            text = f.read_text(encoding="utf-8")
            unknown = _fields(text) - _fields(default)
            if unknown:
                raise ValueError(
                    f"prompt override {f}: unknown field(s) {sorted(unknown)}; "
                    f"available: {sorted(_fields(default))}"
                )
            return text
    return default


def template_version(name: str, default: str, version: str) -> str:
    """``version`` for the built-in text, ``version+override.<hash>`` for a user's file."""
    text = template(name, default)
    if text == default:
        return version
    return f"{version}+override.{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def render(name: str, default: str, **fields: object) -> str:
    """Fill template ``name`` with ``fields``."""
    return template(name, default).format(**fields)
