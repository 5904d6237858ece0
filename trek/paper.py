"""The ``make paper`` pipeline: execute notebooks with Papermill and say what they wrote.

    python -m trek.paper run notebooks/tab1_wild_accuracy.ipynb build/tab1_wild_accuracy.ipynb [--params FILE] [--out DIR]
    python -m trek.paper report [--build DIR] [--files]

A params file (YAML) holds values for real runs. Top-level keys apply to every notebook that
declares that parameter; a section named after a notebook (its file stem) applies to that
notebook only and wins. A top-level key that no notebook declares, or a key in a notebook's
section that this notebook does not declare, is an error: a misspelt ``runs`` must never leave
the demo runs in the tables. Every assignment of a parameters cell must be readable by
Papermill (checked: a second ``=`` on the line, even in a comment, hides it).

Where the outputs go: with a params file, to ``build/paper/<params file name>/{figures,tables}``
(or ``--out DIR``), never over the committed ``figures/`` and ``tables/``, which only the
recorded runs (no params file) write. A notebook's ``figures_dir``/``tables_dir`` parameters, when
given, win over both. The notebook's kernel runs at the repository root, and relative paths in
parameters are read from there (:func:`trek.report.paths.resolve`).

Not every notebook is an artifact: those of :data:`NOT_ARTIFACTS` (``explore``, the notebook to
open first on a run) write nothing, ``make paper`` does not run them (the Makefile's
``NOT_ARTIFACTS`` lists the same files; a test checks) and a params file is checked against the
artifacts' parameters alone (:func:`paper_notebooks`). nbval still executes them in ``make test``.

Notebooks save through :func:`trek.report.latex.save_table` and
:func:`trek.report.figures.save_figure`, which record every written path in
``<build>/<notebook>.outputs.txt``. ``run`` prints one line (notebook, seconds, ok and the
number of files written); the kernel's own log goes to ``<build>/<notebook>.log`` and is shown
only when the notebook fails.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trek.outputs import install_file
from trek.report.paths import MANIFEST_ENV, repo_root

__all__ = ["NOT_ARTIFACTS", "ParamsError", "check_values", "declared_parameters", "default_out", "paper_notebooks",
           "repo_root", "run_notebook", "stderr_to"]

OUT_ENV = "TREK_PAPER_OUT"

#: Notebooks of ``notebooks/`` that are no paper artifact (file stems): ``make paper`` skips them.
NOT_ARTIFACTS = ("explore",)


def paper_notebooks(folder: str | os.PathLike[str] | None = None) -> list[Path]:
    """The notebooks ``make paper`` executes: every ``*.ipynb`` of ``folder`` (default the
    repository's ``notebooks/``) but those of :data:`NOT_ARTIFACTS`, sorted."""
    base = Path(folder) if folder is not None else repo_root() / "notebooks"
    return sorted(p for p in base.glob("*.ipynb") if p.stem not in NOT_ARTIFACTS)


def default_out(params_file: str | os.PathLike[str] | None) -> Path | None:
    """Where a run with ``params_file`` writes (``build/paper/<file name without suffix>`` at the
    repository root); ``None`` without a params file (the committed ``figures/`` and ``tables/``)."""
    return repo_root() / "build" / "paper" / Path(params_file).stem if params_file else None


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
        data = yaml.load(p.read_text(encoding="utf-8"), Loader=_unique_keys_loader()) or {}  # noqa: S506 - a safe loader
    except FileNotFoundError:
        raise ParamsError(f"params file {p} does not exist") from None
    except IsADirectoryError:
        raise ParamsError(f"params file {p} is a folder") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        why = f"{e.problem} (line {mark.line + 1})" if getattr(e, "problem", None) and mark else " ".join(str(e).split())
        raise ParamsError(f"params file {p} is not valid YAML: {why}") from None
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


def _unique_keys_loader() -> type:
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        """YAML's safe loader, refusing a key given twice in one mapping (YAML would keep the last)."""

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if isinstance(key, (str, int, float, bool)) and key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"the key {key!r} is given twice (line {seen[key].line + 1} and line "
                        f"{key_node.start_mark.line + 1}); give it once", key_node.start_mark)
                if isinstance(key, (str, int, float, bool)):
                    seen[key] = key_node.start_mark
            return super().construct_mapping(node, deep=deep)

    return UniqueKeys




#: Parameters naming something the notebook reads: a folder, or a file.
_INPUT_FOLDERS = ("runs_dir", "ctrl_runs_dir", "ctrl_dir", "data_dir")
_INPUT_FILES = ("ctrl_contexts", "prices")
_OUTPUT_FOLDERS = ("figures_dir", "tables_dir")
_TEXTS = ("method", "question_id", "questions", "reference")


def check_values(params: dict[str, Any], source: str | os.PathLike[str]) -> None:
    """Refuse parameter values a notebook would fail on halfway (raised there as a traceback in
    the kernel's log): ``runs`` that is not a mapping of label to an existing run folder
    (``runs: 5``, ``runs: .nan``, a folder that is not there), a path parameter that is not text
    or names nothing, a text parameter that is a number. ``source`` (the params file) is named in
    the message. ``None`` always means the notebook's default."""
    from trek import runs as R
    from trek.report.paths import resolve

    def bad(name: str, why: str) -> ParamsError:
        return ParamsError(f"params file {source}: {name}: {why}")

    def path_text(name: str, value: Any) -> Path:
        if not isinstance(value, str) or not value.strip():
            raise bad(name, f"must be a path (text), not {value!r}")
        return resolve(value)

    runs = params.get("runs")
    if runs is not None:
        if not isinstance(runs, dict) or not runs:
            raise bad("runs", f"must be a mapping of label: run directory (e.g. runs:\n  GPT-5.4: runs/gpt54), "
                      f"not {runs!r}")
        seen: dict[str, Any] = {}
        for label, folder in runs.items():
            where = path_text(f"runs: {label}", folder)
            if not where.is_dir():
                raise bad(f"runs: {label}", f"run directory {where} does not exist (relative paths are read from "
                          "the repository root)")
            records = [f for f in (R.QUESTIONS, R.ANSWERS, R.GRADES, R.TRACE) if (where / f).is_file()]
            if not records:
                raise bad(f"runs: {label}", f"{where} is not a Trek run (no {R.QUESTIONS}, {R.ANSWERS}, {R.GRADES} "
                          f"or {R.TRACE})")
            if (where / R.ANSWERS).is_file() and not any((where / f).is_file() for f in (R.GRADES, R.TRACE)):
                raise bad(f"runs: {label}", f"{where} is not graded (no {R.GRADES}): run `trek grade {folder}` "
                          "first")
            key = os.path.realpath(where)
            if key in seen:
                raise bad(f"runs: {label}", f"{where} is the run of {seen[key]!r} too; give each run once")
            seen[key] = label
    for name in _INPUT_FOLDERS:
        if params.get(name) is not None:
            where = path_text(name, params[name])
            if not where.is_dir():
                raise bad(name, f"folder {where} does not exist (relative paths are read from the repository root)")
    for name in _INPUT_FILES:
        if params.get(name) is not None:
            where = path_text(name, params[name])
            if not where.is_file():
                raise bad(name, f"file {where} does not exist (relative paths are read from the repository root)")
    for name in _OUTPUT_FOLDERS:
        if params.get(name) is not None:
            where = path_text(name, params[name])
            if where.exists() and not where.is_dir():
                raise bad(name, f"{where} is a file, not a folder")
    for name in _TEXTS:
        value = params.get(name)
        if value is not None and not isinstance(value, str):
            raise bad(name, f"must be text, not {value!r}")
    ref = params.get("reference")
    if ref is not None and isinstance(runs, dict) and ref not in runs:
        raise bad("reference", f"{ref!r} is not one of the runs' labels ({', '.join(map(str, runs))})")


def _notebook_stems(folder: Path | None = None) -> set[str]:
    return {p.stem for p in paper_notebooks(folder)}


@contextlib.contextmanager
def stderr_to(log: Path) -> Iterator[None]:
    """Send this process's file descriptor 2 (and so the kernel's, which inherits it) to ``log``."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(log, "wb") as fh:
        os.dup2(fh.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


@contextlib.contextmanager
def _environ(**values: str | None) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_notebook(src: str | os.PathLike[str], dst: str | os.PathLike[str], params_file: str | None = None,
                 out: str | os.PathLike[str] | None = None, *, quiet: bool = False) -> list[str]:
    """Execute ``src`` into ``dst`` with Papermill; returns the paths the notebook wrote.

    The params file is checked against every notebook in ``src``'s folder (see
    :func:`_load_params`): a parameter no notebook declares is an error, never dropped. Figures
    and tables go to ``out`` (default :func:`default_out`: ``build/paper/<params name>`` with a
    params file, the committed folders without one). With ``quiet`` the kernel's log goes to
    ``dst`` with the suffix ``.log`` instead of this process's standard error.
    """
    import papermill as pm

    src, dst = Path(src), Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    declared = {src.stem: declared_parameters(src)}
    if params_file:
        for nb in paper_notebooks(src.parent):
            if nb.stem not in declared:
                declared[nb.stem] = declared_parameters(nb)
    params = _load_params(params_file, src.stem, declared)
    check_values(params, params_file or src)
    target = Path(out).resolve() if out else default_out(params_file)
    manifest = dst.with_suffix(".outputs.txt")
    manifest.unlink(missing_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp.ipynb")
    log = dst.with_suffix(".log")
    logging = stderr_to(log) if quiet else contextlib.nullcontext()
    try:
        with _environ(**{MANIFEST_ENV: str(manifest.resolve()), OUT_ENV: str(target) if target else None}), logging:
            pm.execute_notebook(str(src), str(tmp), parameters=params, cwd=str(repo_root()), progress_bar=False,
                                kernel_name="python3", kernel_manager_class=ipc_kernel_manager())
        install_file(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)
    return manifest.read_text().split() if manifest.exists() else []


def ipc_kernel_manager() -> type:
    """A kernel manager whose kernel talks over Unix sockets in a fresh private folder instead of
    TCP ports on localhost. A TCP kernel's ports are chosen free and then bound by the kernel a
    moment later, so two kernels started at once on a busy machine (``make paper`` beside
    ``make test``) can pick the same port and one dies; socket files in a folder of their own
    cannot collide."""
    import tempfile

    from jupyter_client.manager import AsyncKernelManager

    class IpcKernelManager(AsyncKernelManager):
        def __init__(self, **kw: Any) -> None:
            super().__init__(**kw)
            self.transport = "ipc"
            # short: a Unix socket path holds at most ~107 bytes
            self.ip = os.path.join(tempfile.mkdtemp(prefix="trek-k-"), "k")

        async def _async_cleanup_resources(self, restart: bool = False) -> None:
            await super()._async_cleanup_resources(restart=restart)
            if not restart:
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.dirname(self.ip))

    return IpcKernelManager


def _shown(path: str | Path) -> Path:
    try:
        return Path(path).resolve().relative_to(repo_root())
    except ValueError:
        return Path(path)


def report(build: Path, files: bool = False) -> int:
    """One summary line of what the notebooks executed into ``build`` wrote (every file with ``files``)."""
    total = 0
    folders: dict[str, None] = {}
    manifests = sorted(build.glob("*.outputs.txt"))
    for m in manifests:
        written = [line for line in m.read_text().splitlines() if line]
        if files:
            print(f"{m.name.removesuffix('.outputs.txt')}:")
        for f in written:
            folders[str(_shown(f).parent)] = None
            if files:
                print(f"  wrote {_shown(f)}")
        total += len(written)
    where = ", ".join(sorted(folders)) or "nowhere"
    print(f"make paper: {len(manifests)} notebooks wrote {total} files to {where}")
    return total


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m trek.paper", description="Execute Trek's notebooks.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="execute one notebook with Papermill (one line of output)")
    r.add_argument("src")
    r.add_argument("dst")
    r.add_argument("--params", default=None, help="YAML file of parameters (see module doc)")
    r.add_argument("--out", default=None,
                   help="folder for figures/ and tables/ (default: build/paper/<params name> with --params, "
                        "else the committed figures/ and tables/)")
    rep = sub.add_parser("report", help="say what the executed notebooks wrote")
    rep.add_argument("--build", default="build")
    rep.add_argument("--files", action="store_true", help="list every file written")
    a = ap.parse_args(argv)
    from trek.interrupts import terminate_as_interrupt

    terminate_as_interrupt()  # a notebook run stopped by SIGTERM ends as on Ctrl-C
    if a.cmd == "report":
        report(Path(a.build), a.files)
        return
    name, t0 = Path(a.src).stem, time.monotonic()
    try:
        written = run_notebook(a.src, a.dst, a.params, a.out, quiet=True)
    except Exception as e:  # the notebook failed: say so, with the kernel's log and the error
        log = Path(a.dst).with_suffix(".log")
        print(f"{name:<28} {time.monotonic() - t0:6.1f} s  FAILED", flush=True)
        if log.exists() and log.read_text(errors="replace").strip():
            print(f"--- kernel log ({_shown(log)}) ---\n{log.read_text(errors='replace').rstrip()}", file=sys.stderr)
        print(f"{name}: {type(e).__name__}: {e}", file=sys.stderr)
        raise SystemExit(1) from None
    print(f"{name:<28} {time.monotonic() - t0:6.1f} s  ok  ({len(written)} files)", flush=True)


if __name__ == "__main__":
    main()
