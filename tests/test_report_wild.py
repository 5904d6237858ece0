import pytest

from trek.report.wild import load_questions, reference_years
from trek.types import Question


def q(i, ds, year=None):
    return Question(id=f"{ds}:{i}", dataset=ds, question="q?", answers=["a"], effective_year=year,
                    effective_year_raw=None if year is None else str(year))


def test_reference_years_counts_and_totals():
    qs = [q(1, "freshqa", 2024), q(2, "freshqa", 2023), q(3, "sealqa", 2024), q(4, "infodeepseek")]
    t = reference_years(qs)
    assert t.loc["2024", "freshqa"] == 1 and t.loc["2024", "sealqa"] == 1 and t.loc["2024", "total"] == 2
    assert t.loc["unspecified", "infodeepseek"] == 1
    assert t.loc["total", "total"] == 4
    assert list(t.index) == ["2023", "2024", "unspecified", "total"]


def test_load_questions_sources():
    assert len(load_questions("mini")) >= 12
    with pytest.raises(ValueError, match="unknown question set 'nope'"):
        load_questions("nope")
    with pytest.raises(ValueError, match="no questions"):
        reference_years([])


def test_relative_paths_are_read_from_the_repository_root_whatever_the_working_folder(monkeypatch):
    # a JupyterLab kernel runs in notebooks/: a params file's repo-relative path must still resolve
    from trek.report.paths import repo_root
    from trek.report.wild import discover_runs

    monkeypatch.chdir(repo_root() / "notebooks")
    found = discover_runs(runs_dir="data/runs/wild")
    assert found and all(p.is_absolute() and p.is_dir() for p in found.values())
    assert discover_runs({"x": "data/runs/wild/agentic"})["x"] == repo_root() / "data" / "runs" / "wild" / "agentic"
    with pytest.raises(FileNotFoundError) as e:
        discover_runs(runs_dir="data/runs/nowhere")
    message = str(e.value)
    assert str(repo_root() / "data" / "runs" / "nowhere") in message  # the path it looked for
    assert "read from the repository root" in message


def test_output_folders(monkeypatch, tmp_path):
    from trek.report.paths import output_dirs, repo_root

    monkeypatch.delenv("TREK_PAPER_OUT", raising=False)
    assert output_dirs() == (repo_root() / "figures", repo_root() / "tables")
    monkeypatch.setenv("TREK_PAPER_OUT", str(tmp_path / "out"))
    assert output_dirs() == (tmp_path / "out" / "figures", tmp_path / "out" / "tables")
    assert output_dirs(tables_dir=str(tmp_path / "t"))[1] == tmp_path / "t"  # an explicit folder wins
    assert (tmp_path / "out" / "figures").is_dir()


def test_paired_comparisons_need_two_runs(demo_runs):
    from trek.report.wild import significance

    with pytest.raises(ValueError, match="at least two runs, got 1"):
        significance({"a": demo_runs["demo-lm"]})
    table = significance({"a": demo_runs["demo-lm"], "b": demo_runs["demo-lm-read"]})
    assert list(table.index) == ["b"] and table.loc["b", "n"] > 0
