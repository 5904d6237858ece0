"""Print the architecture figures of issue 29 for a checkout: import cycles (imports inside
functions included), the longest command functions, LLM client construction sites, root modules,
modules spelling run file names (apart from package data and the names listed as not run
files), modules locking files.

    python scripts/architecture_figures.py [CHECKOUT]   (default: this checkout)
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

RUN_FILE = re.compile(r"[\w.-]+\.(sqlite|jsonl|json)|\.trek\.lock")
#: The module that owns the names of the files a run directory (or a command's output folder) holds.
RUN_FILES_OWNER = "trek/runs.py"
#: File-name literals that are not run files, by module: what each names instead.
NOT_RUN_FILES = {
    "trek/testing/fake_openai.py": ("the fake server's own uploaded and generated batch files (in memory)",
                                    {"upload.jsonl", "_output.jsonl", "_error.jsonl"}),
    "trek/imports/inspect_ai.py": ("a member of an inspect_ai .eval zip (an input format)", {"header.json"}),
    "trek/datasets/mini.py": ("a file of a benchmark folder (a data set, not a run)", {"documents.jsonl"}),
}


def string_literals(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, value) of every string constant that is not a docstring."""
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def file_name_literals(root: Path) -> dict[str, list[tuple[int, str, str]]]:
    """Every file-name string literal of the package at ``root`` (docstrings aside), by module
    (``trek/x.py``): ``(line, name, kind)``, ``kind`` being ``package data`` (a file shipped in
    the package, e.g. ``prices.json``), ``not a run file`` (:data:`NOT_RUN_FILES`) or ``run file``."""
    shipped = {p.name for p in root.rglob("*") if p.is_file() and p.suffix != ".py"}
    out: dict[str, list[tuple[int, str, str]]] = {}
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root.parent).as_posix()
        others = NOT_RUN_FILES.get(rel, ("", set()))[1]
        found = [(line, v, "package data" if v in shipped else "not a run file" if v in others else "run file")
                 for line, v in string_literals(ast.parse(p.read_text(encoding="utf-8"))) if RUN_FILE.fullmatch(v)]
        if found:
            out[rel] = found
    return out


def run_file_spellers(root: Path) -> dict[str, list[str]]:
    """Modules other than :data:`RUN_FILES_OWNER` that spell a run file's name: ``{module: ["line: name"]}``."""
    return {m: [f"{line}: {v}" for line, v, kind in found if kind == "run file"]
            for m, found in file_name_literals(root).items()
            if m != RUN_FILES_OWNER and any(kind == "run file" for _, _, kind in found)}


def module_name(root: Path, p: Path) -> str:
    parts = list(p.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path, packages: bool = False) -> tuple[dict[str, set[str]], int, int]:
    """(module -> trek modules it imports, import statements, of them inside functions).
    ``packages``: importing ``a.b.c`` also runs the ``__init__`` of ``a`` and ``a.b``, an arrow to
    each (except the packages the importer itself lives in, which are running already)."""
    mods = {module_name(root, p): p for p in sorted(root.rglob("*.py"))}

    def resolve(m: str) -> str:
        while m and m not in mods:
            m = m.rpartition(".")[0]
        return m

    graph: dict[str, set[str]] = {m: set() for m in mods}
    n_all = n_func = 0
    for m, p in mods.items():
        tree = ast.parse(p.read_text(encoding="utf-8"))
        pkg = m.split(".") if p.name == "__init__.py" else m.split(".")[:-1]
        in_func = {id(k) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                   for k in ast.walk(n) if k is not n}
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                targets = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom):
                base = ".".join(pkg[: len(pkg) - n.level + 1]) if n.level else ""
                mod = ".".join(x for x in (base, n.module or "") if x)
                targets = [f"{mod}.{a.name}" for a in n.names]
            else:
                continue
            targets = [t for t in targets if t == "trek" or t.startswith("trek.")]
            if targets:
                n_all += 1
                n_func += id(n) in in_func
            for t in targets:
                r = resolve(t)
                hits = [r]
                if packages and r:
                    bits = r.split(".")
                    hits += [p for i in range(1, len(bits)) if (p := ".".join(bits[:i])) in mods]
                for h in hits:
                    if h and h != m and not m.startswith(h + "."):
                        graph[m].add(h)
    return graph, n_all, n_func


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main(checkout: Path) -> None:
    root = checkout / "trek"
    files = sorted(root.rglob("*.py"))
    rel = {p: str(p.relative_to(checkout)) for p in files}
    graph, n_all, n_func = import_graph(root)
    found = cycles(graph)
    print(f"internal import statements: {n_all}, inside functions: {n_func}")
    print(f"import cycles (strongly connected groups): {len(found)}")
    for c in found:
        print(f"   {len(c)} modules: {', '.join(c[:8])}{' ...' if len(c) > 8 else ''}")
    lengths = sorted(((n.end_lineno - n.lineno + 1, f"{rel[p]}:{n.lineno} {n.name}") for p in files
                      for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
                      if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)), reverse=True)
    cli = [x for x in lengths if "/cli/" in x[1]]
    print("longest command functions:")
    for n, where in cli[:7]:
        print(f"   {n} {where}")
    print(f"sum of the 7 longest: {sum(n for n, _ in cli[:7])}; cli functions over 40 lines: "
          f"{sum(1 for n, _ in cli if n > 40)}; cli functions among the 10 longest of trek/: "
          f"{sum(1 for _, w in lengths[:10] if '/cli/' in w)}")
    sites = [f"{rel[p]}:{i}" for p in files for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\bLLMClient\(", line) and not line.lstrip().startswith(("class ", "#"))]
    print(f"LLMClient( sites: {len(sites)} ({sum('/cli/' in s for s in sites)} in trek/cli)")
    for s in sites:
        print(f"   {s}")
    print("PriceTable.load( :", sum(p.read_text(encoding="utf-8").count("PriceTable.load(") for p in files))
    root_mods = [p.name for p in sorted(root.glob("*.py")) if p.name != "__init__.py"]
    print(f"root modules: {len(root_mods)}: {' '.join(root_mods)}")
    literals = file_name_literals(root)
    spellers = run_file_spellers(root)
    print(f"modules with file-name string literals: {len(literals)}; spelling run file names outside "
          f"{RUN_FILES_OWNER}: {len(spellers)}")
    for k, found in sorted(literals.items()):
        kinds = sorted({kind for _, _, kind in found})
        print(f"   {k}: {', '.join(sorted({v for _, v, _ in found})[:6])} ({', '.join(kinds)})")
    lockers = [rel[p] for p in files if re.search(r"^\s*(import fcntl|from fcntl|import filelock)", p.read_text(encoding="utf-8"), re.M)]
    print(f"modules locking files: {lockers}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
