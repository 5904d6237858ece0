"""The shell blocks of README.md and docs/*.md, and how tests/test_docs_blocks.py runs them.

A shell block is a fenced block whose info string is ``sh``, ``bash``, ``shell`` or ``console``.
Its first line may mark it:

* ``# needs: WHAT`` (a real provider, a key, the network, a browser...) or
* ``# long: WHAT`` (``make test``, ``make paper``, ``make runs``, ``make local-model``...).

A marked block is never run: each of its ``trek`` / ``.venv/bin/trek`` command lines must parse
against the CLI (click's ``make_context``, resilient parsing off, nothing executed). The unmarked
blocks of a page run as one bash script, in order, in a fresh copy of the repository's tracked
files (``.venv`` a link to the repository's), with only the environment the page sets (plus a
minimal ``PATH`` and a fresh ``HOME``). A page that needs a server starts it itself.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHELL = ("sh", "bash", "shell", "console")
MARKS = ("needs", "long")
FENCE = re.compile(r"^```\s*([\w+-]*)[^\n]*$")
MARK = re.compile(r"^#\s*(needs|long):\s*(\S.*)$")
#: What every page's script starts with: stop at the first failing command, end background jobs.
PREAMBLE = "set -euo pipefail\ntrap 'jobs -p | xargs -r kill 2>/dev/null || true' EXIT\n"
#: The only environment a page's script gets besides what the page sets (HOME is a fresh folder).
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"
#: Words that end a simple command on a line.
SEPARATORS = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1", "&>"}


@dataclass(frozen=True)
class Block:
    page: str  # path relative to the repository root
    line: int  # 1-based line of the opening fence
    lang: str
    text: str  # the block's lines, without the fences
    mark: str | None = None  # "needs" or "long"
    why: str = ""  # what the mark says

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md, then every page of docs/ (sorted)."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """Every shell block of ``path``, in order."""
    rel = str(path.relative_to(REPO))
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1).lower()
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = lines[i + 1:j]
        i = j + 1
        if lang not in SHELL:
            continue
        mark = MARK.match(body[0].strip()) if body else None
        out.append(Block(rel, start + 1, lang, "\n".join(body) + "\n", mark.group(1) if mark else None,
                         mark.group(2) if mark else ""))
    return out


def script(page_blocks: list[Block]) -> str:
    """The bash script of a page's unmarked blocks, in order."""
    parts = [f"# --- {b.where}\n{b.text}" for b in page_blocks if b.mark is None]
    return PREAMBLE + "".join(parts)


# --------------------------------------------------------------------------- command lines


def logical_lines(text: str) -> list[str]:
    """The block's lines with ``\\`` continuations joined and comment-only lines dropped."""
    out, joined = [], ""
    for raw in text.splitlines():
        if raw.rstrip().endswith("\\"):
            joined += raw.rstrip()[:-1] + " "
            continue
        line, joined = (joined + raw).strip(), ""
        if line and not line.startswith("#"):
            out.append(line)
    return out


def _expand(line: str, env: dict[str, str]) -> str:
    """``$NAME`` and ``${NAME}`` replaced by the page's value (``VALUE`` when the page sets none)."""
    return re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), "VALUE"), line)


def words(line: str) -> list[str]:
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
    lex.whitespace_split = True
    lex.commenters = "#"
    return list(lex)


def trek_commands(page_blocks: list[Block], only_marked: bool = True) -> list[tuple[Block, list[str]]]:
    """``[(block, trek arguments)]`` of every ``trek`` command line of the (marked) blocks, with the
    variables the page assigns (in any block before) filled in."""
    env: dict[str, str] = {}
    out = []
    for b in page_blocks:
        for line in logical_lines(b.text):
            try:
                ws = words(_expand(line, env))
            except ValueError:  # an unbalanced quote: not a command line to check
                continue
            if ws and ws[0] == "export":
                ws = ws[1:]
            while ws and re.fullmatch(r"\w+=.*", ws[0]):
                name, _, value = ws.pop(0).partition("=")
                env[name] = value
            if not ws or (only_marked and b.mark is None):
                continue
            if ws[0] in ("trek", ".venv/bin/trek"):
                cut = next((i for i, w in enumerate(ws) if w in SEPARATORS), len(ws))
                out.append((b, ws[1:cut]))
    return out


def parse_error(args: list[str]) -> str | None:
    """None when ``trek ARGS`` parses against the CLI (nothing runs), else click's message."""
    import typer

    from trek.cli.reference import cli

    cmd, name, parent, rest = cli, "trek", None, list(args)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            while True:
                ctx = cmd.make_context(name, rest, parent=parent, resilient_parsing=False)
                if not hasattr(cmd, "resolve_command"):
                    return None
                rest = [*ctx._protected_args, *ctx.args]
                if not rest:
                    return None
                name, cmd, rest = cmd.resolve_command(ctx, rest)
                parent = ctx
    except typer.Exit as e:  # --help, --version
        return None if e.exit_code == 0 else f"exit {e.exit_code}"
    except Exception as e:  # click's usage errors (typer's own copy of click)
        fmt = getattr(e, "format_message", None)
        return fmt() if fmt else repr(e)


# --------------------------------------------------------------------------- running a page


def fresh_copy(dest: Path) -> Path:
    """The repository's tracked files (as they are in the work tree) copied to ``dest``, with
    ``.venv`` a link to the repository's."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for rel in listed.decode().split("\0"):
        src = REPO / rel
        if not rel or not src.is_file():
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    (dest / ".venv").symlink_to(REPO / ".venv")
    return dest


def run_page(page_blocks: list[Block], workdir: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run the page's unmarked blocks as one bash script in a fresh copy of the repository."""
    copy = fresh_copy(workdir / "repo")
    home = workdir / "home"
    home.mkdir()
    env = {"PATH": BASE_PATH, "HOME": str(home)}
    return subprocess.run(["bash", "-c", script(page_blocks)], cwd=copy, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def exists_in_venv(name: str) -> bool:
    return os.access(REPO / ".venv" / "bin" / name, os.X_OK)
