"""$TREK_* default paths: one helper, one table, the README's table complete."""

import ast
import re
from pathlib import Path

import pytest
from _package import parse_file, walk

from trek.datasets.common import default_data_dir
from trek.datasets.mini import BUNDLED_DIR, default_mini_dir
from trek.paths import PATH_VARIABLES, env_path
from trek.runs import default_cache_path, default_pages_path, default_search_cache_path

REPO = Path(__file__).resolve().parents[1]
#: Modules that still read a path variable by hand (owned by changes under way elsewhere).
NOT_YET = {("trek/llm/usage.py", "TREK_PRICES"), ("trek/templates.py", "TREK_PROMPTS")}


def test_set_wins_empty_or_unset_falls_back(monkeypatch, tmp_path):
    monkeypatch.delenv("TREK_CACHE", raising=False)
    assert env_path("TREK_CACHE", tmp_path / "a") == tmp_path / "a"
    assert env_path("TREK_LOCAL_LOG") is None
    monkeypatch.setenv("TREK_CACHE", "")
    assert env_path("TREK_CACHE", "x.sqlite") == Path("x.sqlite")
    monkeypatch.setenv("TREK_CACHE", "~/c.sqlite")
    assert env_path("TREK_CACHE", "x.sqlite") == Path.home() / "c.sqlite"
    with pytest.raises(KeyError, match="TREK_CACHEE is not a Trek path variable"):
        env_path("TREK_CACHEE")


@pytest.mark.parametrize(("name", "default_of", "fallback"), [
    ("TREK_CACHE", default_cache_path, lambda d: d / "llm-cache.sqlite"),
    ("TREK_SEARCH_CACHE", default_search_cache_path, lambda d: d / "search-cache.sqlite"),
    ("TREK_PAGES", default_pages_path, lambda d: d / "pages.sqlite"),
    ("TREK_DATA_DIR", lambda d: default_data_dir(), lambda d: Path.cwd() / "datasets"),
    ("TREK_MINI_DIR", lambda d: default_mini_dir(), lambda d: BUNDLED_DIR),
])
def test_every_default_path_function_goes_through_the_helper(name, default_of, fallback, monkeypatch, tmp_path):
    monkeypatch.setenv(name, str(tmp_path / "from-env"))
    assert default_of(tmp_path / "run") == tmp_path / "from-env"
    monkeypatch.setenv(name, "")
    assert default_of(tmp_path / "run") == fallback(tmp_path / "run")


def environ_reads(tree: ast.Module) -> set[str]:
    """Names read with ``os.environ.get(X)``, ``os.environ[X]`` or ``os.getenv(X)`` (``X`` a
    literal or a module-level name bound to one)."""
    consts = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
              for t in n.targets if isinstance(t, ast.Name)}

    def value(arg):
        if isinstance(arg, ast.Constant):
            return arg.value
        return consts.get(arg.id) if isinstance(arg, ast.Name) else None

    out = set()
    for node in walk(tree):  # only what is called or subscripted is unparsed (not every node)
        if isinstance(node, ast.Call) and node.args and ast.unparse(node.func) in ("os.environ.get", "os.getenv"):
            out.add(value(node.args[0]))
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
            out.add(value(node.slice))
    return out - {None}


def test_no_module_reads_a_path_variable_by_hand():
    found = {(str(p.relative_to(REPO)), name) for p in sorted((REPO / "trek").rglob("*.py"))
             for name in environ_reads(parse_file(p)) if name in PATH_VARIABLES}
    assert found <= NOT_YET
    assert environ_reads(ast.parse('import os\nX = "TREK_PAGES"\nos.environ.get(X)\nos.environ["TREK_CACHE"]')) \
        == {"TREK_PAGES", "TREK_CACHE"}


def test_the_readme_table_lists_every_trek_variable():
    section = (REPO / "docs" / "environment.md").read_text(encoding="utf-8")
    in_table = set(re.findall(r"^\| `(TREK_[A-Z_]+)` \|", section, re.MULTILINE))
    in_code = {m for p in (REPO / "trek").rglob("*.py") for m in re.findall(r"\bTREK_[A-Z_]+\b", p.read_text())}
    assert in_code <= in_table and set(PATH_VARIABLES) <= in_table
