"""Where notebooks read from and write to.

* :func:`repo_root` — the project folder; every relative path a notebook is given (a params file's
  ``runs_dir: runs/full``) is read against it by :func:`resolve`, never against the kernel's
  working folder, so a notebook opened in JupyterLab (whose kernel runs in ``notebooks/``) reads
  the same files as ``make paper``;
* :func:`recorded_dir` — the recorded runs of ``make runs``, the default input of every notebook;
* :func:`output_dirs` — the folders a notebook writes its figures and tables to: the committed
  ``figures/`` and ``tables/`` only for the recorded runs with the notebook's defaults;
* :func:`record_output` — every written file is listed in the manifest ``trek.paper`` reads
  (``$TREK_PAPER_MANIFEST``), so ``make paper`` can say what each notebook wrote.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "MANIFEST_ENV", "CUSTOM_OUT", "repo_root", "resolve", "recorded_dir", "find_runs", "output_dirs", "record_output",
    "notebook_defaults", "changed_parameters",
]

MANIFEST_ENV = "TREK_PAPER_MANIFEST"


def repo_root() -> Path:
    """The project folder (the parent of the ``trek`` package when installed editable), else cwd."""
    here = Path(__file__).resolve().parents[2]
    if (here / "pyproject.toml").exists() and (here / "notebooks").is_dir():
        return here
    return Path.cwd()


def resolve(path: str | os.PathLike[str]) -> Path:
    """``path`` itself when absolute (``~`` expanded), else ``path`` under :func:`repo_root`."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else repo_root() / p


def recorded_dir(*parts: str) -> Path:
    """The recorded runs of ``make runs`` (``data/runs`` at the repository root), or a folder in
    it: the default input of every notebook."""
    return repo_root().joinpath("data", "runs", *parts)


def find_runs(require: str, runs: Mapping[str, str | os.PathLike[str]] | None,
              runs_dir: str | os.PathLike[str] | None, default: Path, hint: str) -> dict[str, Path]:
    """``{label: run directory}`` (see :func:`trek.runs.discover`): ``runs`` as given, else every run
    holding ``require`` under ``runs_dir``, else under ``default``; relative paths are read from
    the repository root. Not found: the error names the full path tried and ``hint``."""
    from trek import runs as _runs

    root = resolve(runs_dir) if runs_dir else default
    given = {k: resolve(v) for k, v in runs.items()} if runs else None
    try:
        return _runs.discover(root, require=require, runs=given)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{e} (relative paths are read from the repository root; {hint})") from None


#: Where a notebook run on inputs other than the recorded runs writes when no folder is given
#: (outside ``make paper``, which names its own): never the committed ``figures/`` and ``tables/``.
CUSTOM_OUT = ("build", "paper", "custom")


def notebook_defaults(notebook: str) -> dict[str, Any]:
    """``{name: default}`` of the parameters cell of ``notebooks/<notebook>.ipynb`` (its literal
    values, as the cell assigns them). A ``FileNotFoundError`` when there is no such notebook."""
    import ast
    import json

    path = repo_root() / "notebooks" / f"{notebook}.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    out: dict[str, Any] = {}
    for cell in cells:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            for node in ast.parse("".join(cell["source"])).body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    out[node.targets[0].id] = ast.literal_eval(node.value)
            break
    return out


def changed_parameters(notebook: str, params: Mapping[str, Any]) -> list[str]:
    """The names among ``params`` (a notebook's parameter values, every one but ``figures_dir`` and
    ``tables_dir``) whose value is not the default of ``notebook``'s parameters cell; every name
    when the notebook cannot be read. A ``TypeError`` when ``params`` leaves out a parameter the
    cell declares or names one it does not (a notebook must pass them all)."""
    try:
        defaults = notebook_defaults(notebook)
    except (OSError, ValueError, KeyError):
        return sorted(params)
    declared = set(defaults) - {"figures_dir", "tables_dir"}
    if set(params) != declared:
        missing, extra = sorted(declared - set(params)), sorted(set(params) - declared)
        raise TypeError(f"output_dirs({notebook!r}): pass every parameter of the notebook"
                        + (f"; missing: {', '.join(missing)}" if missing else "")
                        + (f"; not its parameters: {', '.join(extra)}" if extra else ""))
    return [k for k in defaults if k in params and params[k] != defaults[k]]


def output_dirs(figures_dir: str | os.PathLike[str] | None = None,
                tables_dir: str | os.PathLike[str] | None = None,
                notebook: str | None = None, **params: Any) -> tuple[Path, Path]:
    """``(figures, tables)`` folders for a notebook, created:

    * the given ones (see :func:`resolve`);
    * else ``$TREK_PAPER_OUT/figures`` and ``/tables`` when ``make paper`` sets that variable;
    * else, for a ``notebook`` (its file stem) whose other parameters ``params`` are not all its
      defaults (:func:`changed_parameters`: other runs, another method...),
      ``build/paper/custom/figures`` and ``/tables``, said in one printed line: only the recorded
      runs with the defaults write the committed folders;
    * else ``figures/`` and ``tables/`` at the repository root.
    """
    out = os.environ.get("TREK_PAPER_OUT")
    base = resolve(out) if out else repo_root()
    if not out and notebook is not None and (figures_dir is None or tables_dir is None):
        changed = changed_parameters(notebook, params)
        if changed:
            base = repo_root().joinpath(*CUSTOM_OUT)
            print(f"{notebook}: {', '.join(changed)} not the defaults (the recorded runs), so outputs go to "
                  f"{'/'.join(CUSTOM_OUT)}/ and never over the committed figures/ and tables/; set figures_dir "
                  "and tables_dir to choose the folders")
    f = resolve(figures_dir) if figures_dir else base / "figures"
    t = resolve(tables_dir) if tables_dir else base / "tables"
    f.mkdir(parents=True, exist_ok=True)
    t.mkdir(parents=True, exist_ok=True)
    return f, t


def record_output(path: str | os.PathLike[str]) -> None:
    """Append ``path`` to the ``make paper`` manifest (when one is being kept)."""
    manifest = os.environ.get(MANIFEST_ENV)
    if manifest:
        with open(manifest, "a", encoding="utf-8") as fh:
            fh.write(str(Path(path)) + "\n")
