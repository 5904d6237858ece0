"""Import direction: stage packages reach shared concepts below them, never across or up.

Every ``import`` and ``from ... import`` of the package's sources is read with ``ast`` (imports
inside functions included, relative imports resolved), so a lazy import cannot hide an arrow.
"""

import ast
import sys
from pathlib import Path

import pytest

TREK = Path(__file__).resolve().parents[1] / "trek"

#: (sources, forbidden import prefix, why)
RULES = [
    ("trace", "trek.ctrl", "TrekTrace does not depend on TrekBench-Ctrl"),
    ("rag", "trek.ctrl", "the baselines read contexts, embeddings and tokens from their shared homes"),
    ("tokens.py", "trek.", "token counting is a leaf"),
    ("embeddings.py", "trek.", "the embedders are a leaf"),
    ("paths.py", "trek.", "the default-path helper is a leaf"),
    ("contexts.py", "trek.ctrl", "the contexts record sits below the builder"),
    ("contexts.py", "trek.rag", "the contexts record sits below the baselines"),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(TREK.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every import statement in ``path``."""
    out = []
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            mod = ".".join(x for x in (base, node.module or "") if x)
            out += [(node.lineno, f"{mod}.{a.name}" if node.module is None else mod) for a in node.names]
    return sorted(out)


def sources(where: str) -> list[Path]:
    p = TREK / where
    return sorted(p.rglob("*.py")) if p.is_dir() else [p]


def offending(where: str, prefix: str) -> list[str]:
    own = module_name(sources(where)[0]) if where.endswith(".py") else f"trek.{where}"
    return [f"{path.relative_to(TREK.parent)}:{line} imports {mod}"
            for path in sources(where) for line, mod in imports(path)
            if (mod == prefix.rstrip(".") or mod.startswith(prefix if prefix.endswith(".") else prefix + "."))
            and not mod.startswith(own)]


@pytest.mark.parametrize(("where", "prefix", "why"), RULES, ids=[f"{w} -/-> {p}" for w, p, _ in RULES])
def test_no_arrow_against_the_flow(where, prefix, why):
    assert sources(where), f"trek/{where} has no sources"
    assert offending(where, prefix) == [], why


def test_the_walker_sees_every_kind_of_import(tmp_path, monkeypatch):
    pkg = tmp_path / "trek" / "trace"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "bad.py").write_text("import os\n\ndef f():\n    from trek.ctrl import pools\n    import trek.ctrl.build\n"
                                "from .. import ctrl\nfrom ..ctrl.tokens import count_tokens\n")
    (pkg / "fine.py").write_text("from trek.tokens import count_tokens\nfrom . import bad\nimport trek.contexts\n")
    monkeypatch.setattr(sys.modules[__name__], "TREK", tmp_path / "trek")
    found = offending("trace", "trek.ctrl")
    assert [x.split(" imports ")[1] for x in found] == ["trek.ctrl", "trek.ctrl.build", "trek.ctrl", "trek.ctrl.tokens"]
    assert all(x.startswith("trek/trace/bad.py:") for x in found)
