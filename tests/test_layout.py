"""Data flows one way: the stage packages never import the report layer or the notebook runner."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import trek

ROOT = Path(trek.__file__).resolve().parent
STAGES = ("trace", "ctrl", "rag")
FORBIDDEN = ("trek.paper", "trek.report", "trek.analysis")


def imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, module)`` for every import in ``tree`` (``from trek import x`` gives ``trek.x``),
    wherever it sits (module level, inside a function, under TYPE_CHECKING)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return out


def forbidden_imports(source: str) -> list[tuple[int, str]]:
    return [(line, m) for line, m in imported_modules(ast.parse(source))
            if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]


def test_the_check_sees_every_form_of_import():
    src = ("import trek.paper\nfrom trek import report\nfrom trek.analysis import x\n"
           "def f():\n    from trek.report.wild import y\nimport trek.runs\nfrom trek import stats\n")
    assert sorted({line for line, _ in forbidden_imports(src)}) == [1, 2, 3, 5]


@pytest.mark.parametrize("stage", STAGES)
def test_stage_packages_import_neither_the_report_layer_nor_the_notebook_runner(stage):
    files = sorted((ROOT / stage).rglob("*.py"))
    assert files
    bad = [f"{f.relative_to(ROOT.parent)}:{line} imports {m}"
           for f in files for line, m in forbidden_imports(f.read_text(encoding="utf-8"))]
    assert not bad, "\n".join(bad)


def test_the_old_report_modules_are_gone():
    for old in ("reports.py", "plots.py", "trace/reports.py", "ctrl/reports.py", "rag/reports.py"):
        assert not (ROOT / old).exists(), old
