"""The worked example of ``docs/python-api.md`` runs as written and prints what the page shows.

Its ``python`` blocks run in order in one fresh interpreter (one namespace, as cells of one
notebook), in a scratch folder holding a copy of the recorded Wild runs (the page's relative
paths), so the example can write nothing into the repository. A ``text`` block right after a
``python`` block is the output that block prints; it must match line for line (trailing spaces
aside).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "python-api.md"
MARK = "----- trek docs block -----"


def fenced(text: str) -> list[tuple[str, str, int, int]]:
    """``(language, body, first line, last line)`` of every fenced block, in order (1-based lines)."""
    out, lang, start, body = [], None, 0, []
    for n, line in enumerate(text.splitlines(), 1):
        if lang is None and line.startswith("```"):
            lang, start, body = (line[3:].split() or [""])[0], n, []
        elif lang is not None and line.strip() == "```":
            out.append((lang, "\n".join(body), start, n))
            lang = None
        elif lang is not None:
            body.append(line)
    return out


def examples(text: str) -> list[tuple[str, str | None, int]]:
    """``(code, expected output or None, line)`` of every python block of the page."""
    blocks = fenced(text)
    lines = text.splitlines()
    out = []
    for i, (lang, body, start, end) in enumerate(blocks):
        if lang != "python":
            continue
        expected = None
        if i + 1 < len(blocks) and blocks[i + 1][0] == "text":
            between = lines[end:blocks[i + 1][2] - 1]
            if all(not x.strip() for x in between):
                expected = blocks[i + 1][1]
        out.append((body, expected, start))
    return out


def _lines(text: str) -> list[str]:
    return [x.rstrip() for x in text.strip("\n").splitlines()]


def test_the_page_has_examples_with_their_output():
    found = examples(PAGE.read_text(encoding="utf-8"))
    assert len(found) >= 5 and all(expected for _, expected, _ in found)


def test_the_reader_finds_blocks_and_their_outputs():
    page = "x\n```python\nprint(1)\n```\n\n```text\n1\n```\n```python\na = 2\n```\ntext\n```text\nno\n```\n"
    assert examples(page) == [("print(1)", "1", 2), ("a = 2", None, 9)]


@pytest.mark.slow
def test_the_worked_example_runs_and_prints_what_the_page_shows(tmp_path):
    found = examples(PAGE.read_text(encoding="utf-8"))
    shutil.copytree(ROOT / "data" / "runs" / "wild", tmp_path / "data" / "runs" / "wild")
    script = "".join(f"print({MARK!r})\n{code}\n" for code, _, _ in found)
    (tmp_path / "example.py").write_text(script, encoding="utf-8")
    before = {p: p.read_bytes() for p in (tmp_path / "data").rglob("*") if p.is_file()}
    res = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    printed = res.stdout.split(MARK + "\n")[1:]
    assert len(printed) == len(found)
    for (_, expected, line), got in zip(found, printed, strict=True):
        if expected is not None:
            assert _lines(got) == _lines(expected), f"{PAGE.name}:{line} printed:\n{got}"
    assert {p: p.read_bytes() for p in (tmp_path / "data").rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "example.py"]
