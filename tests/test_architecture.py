"""The architecture, checked on the sources: who owns the run files, who locks files.

Every rule reads ``trek/`` with ``ast`` (no import of the package needed), so a rule fails on
the line that breaks it.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from _package import cached_ast, parse_file, walk_file

from trek import runs

TREK = Path(__file__).resolve().parents[1] / "trek"

#: Every file name a run directory (or a Ctrl build folder) holds, as :mod:`trek.runs` names them.
RUN_FILES = {runs.META, runs.QUESTIONS, runs.ANSWERS, runs.GRADES, runs.TRACE, runs.AUDIT, runs.LOCK,
             runs.LLM_CACHE, runs.SEARCH_CACHE, runs.PAGES, runs.POOLS, runs.CONTEXTS, runs.BUILD_MANIFEST,
             runs.BATCH_STATE, runs.FABRICATIONS, runs.BUILD_LEDGER, runs.DISCOVERY_REPORT, runs.DISCOVERY_RECORDS}


def sources() -> list[Path]:
    return sorted(TREK.rglob("*.py"))


def string_literals(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, value) of every string constant that is not a docstring (the figures script's scan)."""
    return figures_script().string_literals(tree)


def spelled_run_files(path: Path) -> list[str]:
    tree = parse_file(path)
    return [f"{path.relative_to(TREK.parent)}:{line} spells {value!r}"
            for line, value in string_literals(tree) if value in RUN_FILES]


def test_the_scan_sees_a_spelled_file_name(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('"""answers.jsonl is fine in a docstring."""\nX = "grades.jsonl"\ndef f():\n    return "x" / "pages.sqlite"\n')
    assert [s.split(" spells ")[1] for s in spelled_run_files_at(f)] == ["'grades.jsonl'", "'pages.sqlite'"]


def spelled_run_files_at(path: Path) -> list[str]:
    tree = parse_file(path)
    return [f"{path.name}:{line} spells {value!r}" for line, value in string_literals(tree) if value in RUN_FILES]


def test_run_file_names_are_spelled_in_trek_runs_only():
    bad = [s for p in sources() if p != TREK / "runs.py" for s in spelled_run_files(p)]
    assert bad == [], "name run files through trek.runs (RunDir or its constants):\n" + "\n".join(bad)
    spelled = {v for _, v in string_literals(parse_file(TREK / "runs.py"))}
    assert spelled >= RUN_FILES, RUN_FILES - spelled


def test_file_name_literals_outside_trek_runs_are_package_data_or_not_run_files():
    # every other file-name literal is a file shipped in the package (prices.json) or one listed,
    # with what it names, as not a run file (the fake server's internals, an input format's member)
    fig = figures_script()
    assert fig.run_file_spellers(TREK) == {}, "name run files through trek.runs (RunDir or its constants)"
    literals = fig.file_name_literals(TREK)
    kinds = {(m, v): kind for m, found in literals.items() for _, v, kind in found}
    assert kinds[("trek/llm/usage.py", "prices.json")] == "package data"
    assert kinds[("trek/testing/fake_openai.py", "upload.jsonl")] == "not a run file"
    for module, (what, names) in fig.NOT_RUN_FILES.items():  # the list holds no stale entry
        assert what and names <= {v for _, v, _ in literals.get(module, [])}, module


def test_the_file_name_scan_tells_run_files_from_package_data(tmp_path):
    fig = figures_script()
    pkg = tmp_path / "trek"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "table.json").write_text("{}")
    (pkg / "sub" / "m.py").write_text('"""out.jsonl in a docstring"""\nA = "table.json"\nB = "grades.jsonl"\n')
    (pkg / "runs.py").write_text('C = "grades.jsonl"\n')
    assert fig.file_name_literals(pkg)["trek/sub/m.py"] == [(2, "table.json", "package data"), (3, "grades.jsonl", "run file")]
    assert fig.run_file_spellers(pkg) == {"trek/sub/m.py": ["3: grades.jsonl"]}


def test_file_locking_lives_in_trek_runs_only():
    lockers = sorted(str(p.relative_to(TREK.parent)) for p in sources()
                     if any(isinstance(n, ast.Import | ast.ImportFrom)
                            and ("fcntl" in [a.name for a in n.names] or getattr(n, "module", None) in ("fcntl", "filelock"))
                            for n in walk_file(p)))
    assert lockers == ["trek/runs.py"]


def test_a_run_dir_hands_out_every_path_and_reads_its_records(tmp_path, monkeypatch):
    from trek.types import Grade, Question, write_jsonl

    monkeypatch.delenv("TREK_CACHE", raising=False)
    monkeypatch.setenv("TREK_PAGES", str(tmp_path / "elsewhere.sqlite"))
    rd = runs.RunDir(tmp_path / "r")
    assert rd.llm_cache == tmp_path / "r" / runs.LLM_CACHE
    assert rd.pages == tmp_path / "elsewhere.sqlite" and rd.pages_file == tmp_path / "r" / runs.PAGES
    assert rd.ledger(runs.GRADES).name == ".grades.jsonl.spend"
    assert rd.records(runs.GRADES, Grade) == [] and not rd.path.exists()  # reading creates nothing
    with rd.lock():
        assert rd.lock_path.read_text().strip().isdigit()
    write_jsonl(rd.questions_path, [Question(id="q1", dataset="d", question="?", answers=["a"])])
    assert list(rd.questions()) == ["q1"] and [r["id"] for r in rd.raw(runs.QUESTIONS)] == ["q1"]


@functools.cache
def figures_script():
    import importlib.util

    path = TREK.parent / "scripts" / "architecture_figures.py"
    spec = importlib.util.spec_from_file_location("architecture_figures", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.ast = cached_ast()  # the package is parsed once for every rule (tests/_package.py)
    return mod


def test_the_import_graph_has_no_cycle_counting_imports_inside_functions():
    fig = figures_script()
    graph, n_all, n_inside = fig.import_graph(TREK)
    assert n_all > 500 and n_inside > 0  # the scan sees imports at every depth
    assert fig.cycles(graph) == [], "import cycles (each group imports itself through the others)"


def test_the_cycle_scan_finds_a_cycle_through_a_function_level_import(tmp_path):
    fig = figures_script()
    pkg = tmp_path / "trek"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from trek.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import a\n    return a\n")
    (pkg / "c.py").write_text("import trek.a\n")
    graph, _, inside = fig.import_graph(pkg)
    assert inside == 1 and fig.cycles(graph) == [["trek.a", "trek.sub.b"]]


def test_no_command_builds_a_client():
    bad = [f"{p.relative_to(TREK.parent)}:{n.lineno}" for p in sorted((TREK / "cli").rglob("*.py"))
           for n in walk_file(p)
           if (isinstance(n, ast.Name) and n.id == "LLMClient") or (isinstance(n, ast.Attribute) and n.attr == "LLMClient")
           or (isinstance(n, ast.alias) and n.name == "LLMClient")]
    assert bad == [], "commands get clients from RunDir.client(role): " + ", ".join(bad)


#: Command functions (trek/cli/, ``file:name``) still allowed over 40 lines. Only ever shrinks:
#: empty now that every command parses its options and makes one library call.
LONG_COMMANDS_ALLOWED: set[str] = set()


def long_functions(root: Path, limit: int = 40) -> list[str]:
    """``file:name (lines)`` of every function under ``root`` longer than ``limit`` lines, counted
    from the ``def`` line to the last line, as scripts/architecture_figures.py counts them."""
    return [f"{p.relative_to(root.parent)}:{n.name} ({n.end_lineno - n.lineno + 1} lines)"
            for p in sorted(root.rglob("*.py")) for n in walk_file(p)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.end_lineno - n.lineno + 1 > limit]


def test_the_length_scan_sees_a_long_function(tmp_path):
    pkg = tmp_path / "cli"
    pkg.mkdir()
    (pkg / "x.py").write_text("def short():\n    return 1\n\n\ndef long():\n" + "    x = 1\n" * 40)
    assert long_functions(pkg) == ["cli/x.py:long (41 lines)"]


def test_no_command_function_is_longer_than_40_lines():
    found = long_functions(TREK / "cli")
    bad = [f for f in found if f.rsplit(" (", 1)[0].removeprefix("cli/") not in LONG_COMMANDS_ALLOWED]
    assert bad == [], "a command parses options and makes one library call (move the work into trek/):\n" + \
        "\n".join(bad)
    still = {f.rsplit(" (", 1)[0].removeprefix("cli/") for f in found}
    assert still >= LONG_COMMANDS_ALLOWED, f"shorter now: remove {LONG_COMMANDS_ALLOWED - still} from the allowlist"



def test_no_function_of_trektrace_is_longer_than_80_lines():
    # TrekTrace is a loop over declared tests (trek/trace/schedule.py): no test hides in a long branch
    assert long_functions(TREK / "trace", 80) == []
