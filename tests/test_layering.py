"""Import direction, for every part of ``trek/``: data flows one way (DESIGN.md's picture).

Each top-level module or package of ``trek/`` (a *part*: ``trek/grading.py`` is ``grading``,
``trek/trace/`` is ``trace``) sits on one layer below. A part may import parts of lower layers;
the parts of one layer never reach each other (the foundation too is ordered: types below the
client, the client below roles, roles below run directories, those below the stage executor);
nothing reaches up. Every ``import`` and ``from ... import`` is read with ``ast`` (imports inside
functions and under ``TYPE_CHECKING`` included, relative imports resolved), so a lazy import
cannot hide an arrow. A new part must be given a layer here before it can land.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from _package import walk_file

TREK = Path(__file__).resolve().parents[1] / "trek"

#: (parts, whether the parts of the layer may import each other), lowest layer first.
LAYERS: list[tuple[set[str], bool]] = [
    # the foundation, in the order the code wants: leaves and helpers, files, records, the client,
    # roles, run directories, the stage executor, the batch runner on top of it
    ({"trek", "errors", "paths", "tokens", "embeddings", "stats", "urls", "limits", "aio", "retry", "templates",
      "textable", "interrupts"}, False),
    ({"jsonio", "sqlite", "local", "outputs"}, False),
    ({"types", "journal"}, False),
    ({"llm"}, False),
    # the judge protocol and the registry of judge kinds, above the client (a model judge is one)
    ({"judges"}, False),
    ({"roles"}, False),
    ({"runs"}, False),
    ({"stage"}, False),
    ({"batch"}, False),
    # what a run reads: datasets, pages, context records, prompt texts, prices, the fake server
    ({"datasets", "pages", "contexts", "answer_prompts", "costs", "testing", "query_targets"}, False),
    # searching and the grading rules
    ({"search", "annotations", "graders"}, False),
    # the stages that answer and grade
    ({"answering", "grading"}, False),
    # TrekTrace, TrekBench-Ctrl and the RAG baselines: side by side, none imports another
    ({"trace", "ctrl", "rag"}, False),
    # the exact judge: a judge kind above the grading rules and TrekTrace's questions it answers
    # (the stages find it in the registry of judge kinds, never by name)
    ({"exact"}, False),
    # what reads their records: the judge audit, importers of other agents' logs, analysis
    # (and the epochs of a run and the listing of runs, read from their files)
    ({"audit", "imports", "analysis", "epochs", "listing", "grade_review"}, False),
    # tables and figures
    ({"report"}, False),
    # the public face for notebooks (trek.load, Run): a run read through the layers below
    ({"api"}, False),
    # the list of Trek's parts, which fills the registries of the layers below (trek/parts.py)
    ({"parts"}, False),
    # what drives everything: the experiments of `make runs`, the notebooks, inspect_ai, the CLI
    ({"experiments", "paper", "inspect"}, False),
    ({"cli"}, False),
]

#: The one arrow that may point up: the package's ``__init__`` hands out the public face of
#: ``trek.api`` (``trek.load``...) through its module ``__getattr__``, imported on first use.
FACE = ("trek", "api")

#: Parts that import nothing of trek (leaves every other part may rely on).
LEAVES = {"tokens", "embeddings", "paths", "stats", "errors", "urls", "interrupts"}


def layer_of(part: str) -> int:
    for i, (parts, _) in enumerate(LAYERS):
        if part in parts:
            return i
    raise KeyError(part)


def part_of(module: str) -> str:
    bits = module.split(".")
    return bits[1] if len(bits) > 1 else "trek"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str, root: Path) -> bool:
    where = root.parent.joinpath(*name.split("."))
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every import statement in ``path``."""
    out = []
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in walk_file(path):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            mod = ".".join(x for x in (base, node.module or "") if x)
            # `from trek import report` imports the part report; `from trek import __version__` trek
            out += [(node.lineno, f"{mod}.{a.name}" if is_module(f"{mod}.{a.name}", root) else mod)
                    for a in node.names]
    return sorted(out)


def parts_of_tree(root: Path) -> set[str]:
    return {p.stem if p.is_file() else p.name for p in root.iterdir()
            if (p.suffix == ".py" and p.name != "__init__.py") or (p.is_dir() and (p / "__init__.py").exists())}


def against_the_flow(root: Path) -> list[str]:
    """Every import arrow that breaks the layers, as ``file:line imports module (why)``."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        me = part_of(module_name(path, root))
        for line, mod in imports(path, root):
            if not (mod == "trek" or mod.startswith("trek.")):
                continue
            other = part_of(mod)
            if other == me or mod == "trek" or (me, other) == FACE and path == root / "__init__.py":
                continue
            where = f"{path.relative_to(root.parent)}:{line} imports {mod}"
            if me in LEAVES:
                bad.append(f"{where} ({me} is a leaf)")
            elif layer_of(other) > layer_of(me):
                bad.append(f"{where} (up: layer {layer_of(me)} -> {layer_of(other)})")
            elif layer_of(other) == layer_of(me) and not LAYERS[layer_of(me)][1]:
                bad.append(f"{where} (across: {me} and {other} are side by side)")
    return bad


def test_every_part_of_trek_has_a_layer():
    placed = set().union(*(parts for parts, _ in LAYERS))
    assert parts_of_tree(TREK) - placed == set(), "give each new part a layer in LAYERS"
    assert sum(len(parts) for parts, _ in LAYERS) == len(placed), "a part sits on two layers"


def test_no_import_goes_against_the_flow():
    assert against_the_flow(TREK) == []


def test_the_stage_packages_never_import_the_report_layer_or_the_notebook_runner():
    # the most important arrows, named: a regression here fails with a plain message too
    for stage in ("trace", "ctrl", "rag", "grading", "answering", "search", "graders"):
        for forbidden in ("report", "paper", "analysis", "cli", "experiments"):
            assert layer_of(forbidden) > layer_of(stage), (stage, forbidden)


@pytest.mark.parametrize(("source", "expected"), [
    # a lazy import inside a function is an arrow like any other
    ("def f():\n    from trek.ctrl import pools\n", ["across"]),
    ("import trek.ctrl.build\n", ["across"]),
    ("from .. import ctrl\n", ["across"]),
    ("from ..ctrl.tokens import count_tokens\n", ["across"]),
    ("from trek.report import plots\n", ["up"]),
    ("from ..cli import main\n", ["up"]),
    ("from trek.tokens import count_tokens\nfrom . import fine\nimport trek.contexts\nimport os\n", []),
])
def test_the_walker_sees_every_kind_of_import(tmp_path, monkeypatch, source, expected):
    pkg = tmp_path / "trek" / "trace"
    pkg.mkdir(parents=True)
    (tmp_path / "trek" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "fine.py").write_text("")
    for other in ("ctrl", "report", "cli"):  # parts the probe may import (packages or modules)
        (tmp_path / "trek" / other).mkdir()
        (tmp_path / "trek" / other / "__init__.py").write_text("")
    for module in ("tokens.py", "contexts.py", "ctrl/build.py"):
        (tmp_path / "trek" / module).write_text("")
    (pkg / "probe.py").write_text(source)
    found = against_the_flow(tmp_path / "trek")
    assert [x.split("(")[1].split(":")[0] for x in found] == expected
    assert all(x.startswith("trek/trace/probe.py:") for x in found)


def test_a_leaf_that_imports_trek_is_caught(tmp_path):
    root = tmp_path / "trek"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "types.py").write_text("")
    (root / "tokens.py").write_text("def f():\n    from trek import types\n")
    assert [x.split("(")[1] for x in against_the_flow(root)] == ["tokens is a leaf)"]


def test_a_part_without_a_layer_is_reported(tmp_path):
    root = tmp_path / "trek"
    (root / "newpkg").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "newpkg" / "__init__.py").write_text("")
    (root / "types.py").write_text("")
    placed = set().union(*(parts for parts, _ in LAYERS))
    assert parts_of_tree(root) - placed == {"newpkg"}


if __name__ == "__main__":  # print the arrows that break the layers
    print("\n".join(against_the_flow(TREK)) or "no arrow against the flow", file=sys.stderr)


def _import_graph(root: Path):
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "architecture_figures.py"
    spec = importlib.util.spec_from_file_location("architecture_figures", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, mod.import_graph(root, packages=True)[0]


def test_no_module_cycle_when_the_package_inits_an_import_runs_are_counted():
    # importing trek.graders.exact runs trek/graders/__init__.py too: an import inside one of its
    # functions is an arrow of every module that imports any module of the package
    fig, graph = _import_graph(TREK)
    assert fig.cycles(graph) == []


def test_a_cycle_through_a_package_init_is_caught(tmp_path):
    root = tmp_path / "trek"
    (root / "graders").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "graders" / "__init__.py").write_text("def agrade():\n    from trek import exact\n    return exact\n")
    (root / "graders" / "exact.py").write_text("")
    (root / "exact.py").write_text("from trek.graders.exact import decide\n")
    fig, graph = _import_graph(root)
    assert fig.cycles(graph) == [["trek.exact", "trek.graders"]]
    assert fig.cycles(fig.import_graph(root)[0]) == []  # without the package's __init__ the cycle hides
