"""What the Makefile installs, and when: `make paper` only Trek and what the notebooks need, the
test tools with the first `make check`/`make test`, JupyterLab with the first `make lab` only."""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def tree(tmp_path):
    """A scratch folder with the Makefile and the files its install rules depend on."""
    for name in ("Makefile", "pyproject.toml", "constraints.txt"):
        shutil.copy(REPO / name, tmp_path / name)
    (tmp_path / "notebooks").mkdir()
    return tmp_path


def dry(tree, *targets):
    """The commands ``make -n`` would run for ``targets`` (nothing is run)."""
    res = subprocess.run(["make", "-n", *targets], cwd=tree, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return [line for line in res.stdout.splitlines() if "pip install" in line]


def stamp(tree, *names):
    (tree / ".venv").mkdir(exist_ok=True)
    later = time.time() + 5  # newer than the files they depend on
    for n in names:
        (tree / ".venv" / n).touch()
        os.utime(tree / ".venv" / n, (later, later))


def test_make_paper_installs_trek_without_the_test_tools(tree):
    pips = dry(tree, "paper")
    installs = [p for p in pips if "-e " in p]
    assert installs and all("[test" not in p and "[lab" not in p for p in installs), pips
    assert all("-c constraints.txt" in p for p in installs)


def test_make_check_adds_the_test_extra_once(tree):
    assert any(".[test]" in p for p in dry(tree, "check"))
    stamp(tree, ".trek-installed", ".trek-test-installed")
    assert dry(tree, "check") == []


def test_make_lab_installs_jupyterlab_once(tree):
    stamp(tree, ".trek-installed")
    assert any(".[lab]" in p for p in dry(tree, "lab"))
    stamp(tree, ".trek-installed", ".trek-lab-installed")
    assert dry(tree, "lab") == []
