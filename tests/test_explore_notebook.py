"""``notebooks/explore.ipynb``: no paper artifact (``make paper`` and params files leave it out),
and run on another run folder it writes nothing."""

from __future__ import annotations

import shutil
import subprocess

import nbformat
import pytest

from trek.paper import NOT_ARTIFACTS, _notebook_stems, paper_notebooks
from trek.report.paths import repo_root

ROOT = repo_root()
EXPLORE = ROOT / "notebooks" / "explore.ipynb"


def _make_variable(name: str, tmp_path) -> list[str]:
    """The words of a variable of the Makefile, as make expands it."""
    show = tmp_path / "show.mk"
    show.write_text(f"show-it:\n\t@echo $({name})\n")
    res = subprocess.run(["make", "--no-print-directory", "-f", "Makefile", "-f", str(show), "show-it"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout.split()


def test_make_paper_runs_the_artifacts_and_not_explore(tmp_path):
    assert EXPLORE.exists() and "explore" in NOT_ARTIFACTS
    listed = _make_variable("NOTEBOOKS", tmp_path)
    assert listed == [str(p.relative_to(ROOT)) for p in paper_notebooks()]
    assert "notebooks/explore.ipynb" not in listed and len(listed) == len(list((ROOT / "notebooks").glob("*.ipynb"))) - len(NOT_ARTIFACTS)
    assert _make_variable("NOT_ARTIFACTS", tmp_path) == [f"notebooks/{s}.ipynb" for s in NOT_ARTIFACTS]
    assert "explore" not in _notebook_stems()  # a params file is checked against the artifacts alone


def test_explore_declares_run_and_saves_nothing():
    from trek.paper import declared_parameters

    assert declared_parameters(EXPLORE) == ["run"]
    source = "\n".join(c.source for c in nbformat.read(EXPLORE, as_version=4).cells if c.cell_type == "code")
    assert "save_table" not in source and "save_figure" not in source and "savefig" not in source
    assert "def " not in source  # thin: logic lives in trek/


def _snapshot(*folders):
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for f in folders for p in sorted(f.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_explore_runs_under_papermill_on_another_run_and_writes_nothing(tmp_path):
    import papermill as pm

    from trek.paper import ipc_kernel_manager

    run = shutil.copytree(ROOT / "data" / "runs" / "wild" / "search-then-read", tmp_path / "my-run")
    before = _snapshot(ROOT / "figures", ROOT / "tables", run)
    assert before
    out = tmp_path / "explored.ipynb"
    pm.execute_notebook(str(EXPLORE), str(out), parameters={"run": str(run)}, cwd=str(tmp_path), progress_bar=False,
                        kernel_name="python3", kernel_manager_class=ipc_kernel_manager())
    assert _snapshot(ROOT / "figures", ROOT / "tables", run) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["explored.ipynb", "my-run"]
    nb = nbformat.read(out, as_version=4)
    text = "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                     for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "my-run" in text and "search-then-read" not in text  # the run given, not the default
    html = "\n".join(str(o.get("data", {}).get("text/html", "")) for c in nb.cells if c.cell_type == "code"
                     for o in c.outputs)
    assert html.count('class="trek-case"') >= 4  # one case per label the run has
    assert any("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
