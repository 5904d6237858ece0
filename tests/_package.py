"""The package's sources parsed once per test session, for the rule tests that read ``trek/``
with ``ast`` (each of them used to parse the whole package again).

:func:`parse` caches by the text itself (a file changed on disk, or a test's own temporary
source, is parsed afresh); :func:`walk` keeps the node list of a tree it parsed. The trees are
shared: a test must not change them."""

from __future__ import annotations

import ast
import functools
import types
from pathlib import Path

__all__ = ["parse", "parse_file", "walk", "walk_file", "cached_ast"]


@functools.cache
def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    tree = ast.parse(source, filename=filename)
    _walks[id(tree)] = (tree, None)
    return tree


#: id of a tree :func:`parse` made -> (the tree, kept alive so the id stays its own; its nodes).
_walks: dict[int, tuple[ast.AST, tuple[ast.AST, ...] | None]] = {}


def walk(tree: ast.AST):
    """``ast.walk(tree)``, the node list kept for a tree :func:`parse` made."""
    held = _walks.get(id(tree))
    if held is None or held[0] is not tree:
        return ast.walk(tree)
    if held[1] is None:
        _walks[id(tree)] = (tree, tuple(ast.walk(tree)))
    return iter(_walks[id(tree)][1])


def parse_file(path: Path | str) -> ast.Module:
    return parse(Path(path).read_text(encoding="utf-8"), str(path))


def walk_file(path: Path | str):
    return walk(parse_file(path))


def cached_ast() -> types.ModuleType:
    """A stand-in for the ``ast`` module whose ``parse`` and ``walk`` are the cached ones (for a
    script the tests load, such as scripts/architecture_figures.py)."""
    shim = types.ModuleType("ast")
    shim.__dict__.update(vars(ast))
    shim.parse = lambda source, filename="<unknown>", *a, **k: parse(source, filename) if not (a or k) \
        else ast.parse(source, filename, *a, **k)
    shim.walk = walk
    return shim
