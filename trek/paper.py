"""The ``make paper`` pipeline: execute notebooks with Papermill and list what they wrote.

    python -m trek.paper run notebooks/tab1_wild_accuracy.ipynb build/tab1_wild_accuracy.ipynb [--params FILE]
    python -m trek.paper report

A params file (YAML) holds values for real runs. Top-level keys apply to every notebook that
declares that parameter; a section named after a notebook (its file stem) applies to that
notebook only and wins. A top-level key that no notebook declares, or a key in a notebook's
section that this notebook does not declare, is an error: a misspelt ``runs`` must never leave
the demo runs in the tables. Every assignment of a parameters cell must be readable by
Papermill (checked: a second ``=`` on the line, even in a comment, hides it).

Notebooks save their outputs through :func:`save_table` and :func:`trek.plots.save_figure`,
which record every written path in ``build/<notebook>.outputs.txt``; ``report`` prints them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = [
    "ParamsError", "benchmark_of", "declared_parameters", "demo_label", "paths", "record_output", "recorded_dir",
    "repo_root", "run_notebook", "runs_title", "save_table",
]

_MANIFEST_ENV = "TREK_PAPER_MANIFEST"


def repo_root() -> Path:
    """The project folder (the parent of the ``trek`` package when installed editable), else cwd."""
    here = Path(__file__).resolve().parents[1]
    if (here / "pyproject.toml").exists() and (here / "notebooks").is_dir():
        return here
    return Path.cwd()


def paths(figures_dir: str | None = None, tables_dir: str | None = None) -> tuple[Path, Path]:
    """Output folders for a notebook: the given ones, else ``figures/`` and ``tables/`` at the repo root."""
    root = repo_root()
    f = Path(figures_dir) if figures_dir else root / "figures"
    t = Path(tables_dir) if tables_dir else root / "tables"
    f.mkdir(parents=True, exist_ok=True)
    t.mkdir(parents=True, exist_ok=True)
    return f, t


def demo_label(is_demo: bool, title: str) -> str:
    """Prefix a title with DEMO DATA when the numbers come from a scripted demo model."""
    return f"DEMO DATA (not a result): {title}" if is_demo else title


def recorded_dir(*parts: str) -> Path:
    """The recorded runs of ``make runs`` (``data/runs`` at the repository root), or a folder in
    it: the default input of every notebook."""
    return repo_root().joinpath("data", "runs", *parts)


def benchmark_of(question_ids: Iterable[str], default: str) -> str:
    """``TrekBench-Mini`` when every id is one of the bundled benchmark's (``mini:...``), else ``default``."""
    ids = list(question_ids)
    return "TrekBench-Mini" if ids and all(str(q).startswith("mini:") for q in ids) else default


def runs_title(what: str, run_dirs: Mapping[str, str | os.PathLike[str]] | Iterable[str | os.PathLike[str]],
               benchmark: str = "TrekBench-Wild") -> str:
    """``what`` with the models and the question set of the runs it was made from, e.g.
    ``Accuracy (%) (SmolLM2-135M-Instruct-Q4_1; TrekBench-Mini, 36 questions)``.

    The question set is the runs' recorded ``benchmark`` (``run.json`` config), else
    :func:`benchmark_of` their questions with ``benchmark`` as the fallback. A run made with a
    scripted demo model (``config.demo``) makes the title start with DEMO DATA.
    """
    from trek import runs

    dirs = list(run_dirs.values()) if isinstance(run_dirs, Mapping) else list(run_dirs)
    models: dict[str, None] = {}
    names: dict[str, None] = {}
    ids: set[str] = set()
    demo = False
    for d in dirs:
        meta = runs.read_meta(d)
        if meta is not None:
            models[str(meta.model)] = None
            demo = demo or bool(meta.config.get("demo"))
            if meta.config.get("benchmark"):
                names[str(meta.config["benchmark"])] = None
        ids |= set(runs.load_questions(d))
    data = ", ".join(names) or benchmark_of(ids, benchmark)
    who = ", ".join(models) or "unknown model"
    return demo_label(demo, f"{what} ({'scripted ' if demo else ''}{who}; {data}, {len(ids)} questions)")


def record_output(path: str | os.PathLike[str]) -> None:
    manifest = os.environ.get(_MANIFEST_ENV)
    if manifest:
        with open(manifest, "a", encoding="utf-8") as fh:
            fh.write(str(Path(path)) + "\n")


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def save_table(
    df: pd.DataFrame,
    name: str,
    tables_dir: str | os.PathLike[str],
    *,
    caption: str | None = None,
    float_format: str = "%.1f",
    index: bool = True,
) -> list[Path]:
    """Write ``<tables_dir>/<name>.csv`` and ``.tex`` (booktabs-style, no jinja2 needed)."""
    d = Path(tables_dir)
    d.mkdir(parents=True, exist_ok=True)
    csv_path, tex_path = d / f"{name}.csv", d / f"{name}.tex"
    _atomic_write_text(csv_path, df.to_csv(index=index, float_format=float_format))
    _atomic_write_text(tex_path, to_latex(df, caption=caption, float_format=float_format, index=index))
    for p in (csv_path, tex_path):
        record_output(p)
    return [csv_path, tex_path]


def _tex_escape(s: Any) -> str:
    text = str(s)
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("$", r"\$"), ("#", r"\#"),
                 ("_", r"\_"), ("{", r"\{"), ("}", r"\}"), ("~", r"\textasciitilde{}"), ("^", r"\^{}")):
        text = text.replace(a, b)
    return text


def to_latex(df: pd.DataFrame, *, caption: str | None = None, float_format: str = "%.1f", index: bool = True) -> str:
    """A small booktabs table renderer (pandas' own needs jinja2)."""

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return "--" if v != v else float_format % v
        return _tex_escape(v)

    cols = ([df.index.name or ""] if index else []) + [str(c) for c in df.columns]
    lines = [r"\begin{table}[t]", r"\centering"]
    if caption:
        lines.append(r"\caption{" + _tex_escape(caption) + "}")
    lines += [r"\begin{tabular}{" + "l" * (1 if index else 0) + "r" * len(df.columns) + "}", r"\toprule"]
    lines.append(" & ".join(_tex_escape(c) for c in cols) + r" \\")
    lines.append(r"\midrule")
    for idx, row in df.astype(object).iterrows():
        cells = ([_tex_escape(idx)] if index else []) + [fmt(v) for v in row.tolist()]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)


class ParamsError(SystemExit):
    """A params file that does not fit the notebooks (raised as a clean ``SystemExit`` message)."""


def declared_parameters(notebook: str | os.PathLike[str]) -> list[str]:
    """The names a notebook's ``parameters`` cell assigns, as Papermill reads them.

    Raises :class:`ParamsError` when the cell assigns a name Papermill cannot see (Papermill
    skips any line with a second ``=``, e.g. one inside the comment), so a value from a params
    file can never be dropped silently.
    """
    import ast

    import nbformat
    import papermill as pm

    nb_path = Path(notebook)
    seen = list(pm.inspect_notebook(str(nb_path)))
    nb = nbformat.read(nb_path, as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assigned: list[str] = []
    for cell in cells[:1]:
        for node in ast.parse(cell.source).body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            assigned += [t.id for t in targets if isinstance(t, ast.Name)]
    hidden = [n for n in assigned if n not in seen]
    if hidden:
        raise ParamsError(
            f"{nb_path.name}: Papermill cannot read the parameters-cell line(s) for {', '.join(hidden)} "
            "(a second '=' on the line, e.g. in its comment?); fix the cell"
        )
    return seen


def _load_params(
    params_file: str | None, stem: str, declared: dict[str, list[str]] | None = None
) -> dict[str, Any]:
    """The parameters one notebook (``stem``) gets from a params file.

    ``declared`` maps every notebook stem of the pipeline to the names it declares. Top-level
    keys go to each notebook that declares them; a top-level key that no notebook declares is
    an error (a typo would otherwise leave the demo values in place). A section named after a
    notebook applies to that notebook alone, wins over the top level, and may only use names
    that notebook declares. Without ``declared`` the names are not checked.
    """
    if not params_file:
        return {}
    import yaml

    p = Path(params_file)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ParamsError(f"params file {p} does not exist") from None
    except IsADirectoryError:
        raise ParamsError(f"params file {p} is a folder") from None
    except yaml.YAMLError as e:
        raise ParamsError(f"params file {p} is not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ParamsError(f"params file {p}: expected a mapping at the top level")
    stems = set(declared) if declared is not None else _notebook_stems()
    for name in stems & set(data):
        if not isinstance(data[name], dict):
            raise ParamsError(f"params file {p}: section '{name}' must be a mapping of parameter: value")
    common = {k: v for k, v in data.items() if k not in stems}
    specific = data.get(stem) or {}
    if declared is not None:
        everywhere = set().union(*declared.values()) if declared else set()
        unknown = sorted(set(common) - everywhere)
        if unknown:
            raise ParamsError(
                f"params file {p}: no notebook declares {', '.join(unknown)} "
                f"(notebooks: {', '.join(sorted(stems))}; declared: {', '.join(sorted(everywhere))})"
            )
        mine = set(declared.get(stem, []))
        bad = sorted(set(specific) - mine)
        if bad:
            raise ParamsError(
                f"params file {p}: section '{stem}' sets {', '.join(bad)}, which {stem} does not declare "
                f"(it declares: {', '.join(sorted(mine))})"
            )
        common = {k: v for k, v in common.items() if k in mine}
    return {**common, **specific}


def _notebook_stems(folder: Path | None = None) -> set[str]:
    return {p.stem for p in (folder or repo_root() / "notebooks").glob("*.ipynb")}


def run_notebook(src: str | os.PathLike[str], dst: str | os.PathLike[str], params_file: str | None = None) -> list[str]:
    """Execute ``src`` into ``dst`` with Papermill; returns the paths the notebook wrote.

    The params file is checked against every notebook in ``src``'s folder (see
    :func:`_load_params`): a parameter no notebook declares is an error, never dropped.
    """
    import papermill as pm

    src, dst = Path(src), Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    declared = {src.stem: declared_parameters(src)}
    if params_file:
        for nb in sorted(src.parent.glob("*.ipynb")):
            if nb.stem not in declared:
                declared[nb.stem] = declared_parameters(nb)
    params = _load_params(params_file, src.stem, declared)
    manifest = dst.with_suffix(".outputs.txt")
    manifest.unlink(missing_ok=True)
    os.environ[_MANIFEST_ENV] = str(manifest.resolve())
    tmp = dst.with_name(f".{dst.name}.tmp.ipynb")
    try:
        pm.execute_notebook(str(src), str(tmp), parameters=params, cwd=str(repo_root()), progress_bar=False,
                            kernel_name="python3")
        os.replace(tmp, dst)
    finally:
        os.environ.pop(_MANIFEST_ENV, None)
        tmp.unlink(missing_ok=True)
    written = manifest.read_text().split() if manifest.exists() else []
    return written


def report(build: Path) -> int:
    total = 0
    for m in sorted(build.glob("*.outputs.txt")):
        files = [line for line in m.read_text().splitlines() if line]
        name = m.name.removesuffix(".outputs.txt")
        print(f"{name}:")
        for f in files:
            try:
                shown = Path(f).resolve().relative_to(repo_root())
            except ValueError:
                shown = Path(f)
            print(f"  wrote {shown}")
        total += len(files)
    print(f"make paper: {total} files written by {len(list(build.glob('*.outputs.txt')))} notebooks")
    return total


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m trek.paper", description="Execute Trek's notebooks.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="execute one notebook with Papermill")
    r.add_argument("src")
    r.add_argument("dst")
    r.add_argument("--params", default=None, help="YAML file of parameters (see module doc)")
    rep = sub.add_parser("report", help="list what the executed notebooks wrote")
    rep.add_argument("--build", default="build")
    a = ap.parse_args(argv)
    if a.cmd == "run":
        print(f"executing {a.src} -> {a.dst}", file=sys.stderr)
        run_notebook(a.src, a.dst, a.params)
    else:
        report(Path(a.build))


if __name__ == "__main__":
    main()
