"""One loader for the question sets: Mini and Wild by name, data_dir meaning the same everywhere."""

import ast
import shutil
from pathlib import Path

import pytest
from _package import walk_file

from trek.datasets import QUESTION_SETS, MissingDataError, load_benchmark, load_questions, mini

REPO = Path(__file__).resolve().parents[1]
#: Report modules still load questions their own way until they move into trek/report/.
REPORT_SIDE = {"trek/reports.py"}


def test_mini_by_name_default_folder_and_given_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("TREK_MINI_DIR", raising=False)
    bundled = mini.load()
    assert load_questions("mini") == bundled.questions and len(bundled.questions) > 0
    assert load_benchmark("mini").documents == bundled.documents
    assert load_benchmark("mini").path == mini.BUNDLED_DIR
    copy = tmp_path / "mini"
    shutil.copytree(mini.BUNDLED_DIR, copy)
    assert load_benchmark("mini", copy).path == copy and load_questions("mini", copy) == bundled.questions
    monkeypatch.setenv("TREK_MINI_DIR", str(copy))
    assert load_benchmark("mini").path == copy


def test_wild_reads_its_source_folder_and_names_what_is_missing(tmp_path):
    with pytest.raises(MissingDataError, match=str(tmp_path)):
        load_questions("wild", tmp_path)


def test_an_unknown_set_is_named_with_the_choices():
    with pytest.raises(ValueError, match="unknown question set 'wld': use wild or mini"):
        load_benchmark("wld")
    assert QUESTION_SETS == ("wild", "mini")


def test_no_module_loads_mini_or_wild_its_own_way():
    found = []
    for path in sorted((REPO / "trek").rglob("*.py")):
        rel = str(path.relative_to(REPO))
        if rel.startswith("trek/datasets/") or rel in REPORT_SIDE:
            continue
        for node in walk_file(path):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("mini.load", "wild.load", "load_mini", "load_wild"):
                found.append(f"{rel}:{node.lineno}")
    assert found == []
