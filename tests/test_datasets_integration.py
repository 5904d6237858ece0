"""Integration tests over the real source files.

They need the read-only reference copies in ``<repo>/../shared/datasets`` (or the folder named by
``$TREK_SHARED_DATASETS``) and skip cleanly when it is absent. They check counts and invariants
only; no row content of the real datasets is written here.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trek.cli.data import app
from trek.datasets import download as dl
from trek.datasets import load_freshqa, load_infodeepseek, load_sealqa, wild
from trek.types import Question

REPO = Path(__file__).resolve().parents[1]
#: ``../shared/datasets`` beside a checkout, or two levels up for a worktree in ``<root>/wt/<name>``.
_BESIDE = [base / "shared" / "datasets" for base in (REPO.parent, REPO.parent.parent)]
SHARED = Path(os.environ.get("TREK_SHARED_DATASETS") or next((p for p in _BESIDE if p.is_dir()), _BESIDE[0]))

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not SHARED.is_dir(), reason=f"reference datasets not found at {SHARED}"),
]


def _one(pattern: str) -> Path:
    hits = sorted(SHARED.glob(pattern))
    if not hits:
        pytest.skip(f"no file matching {pattern} under {SHARED}")
    return hits[0]


def _check_common(questions: list[Question], dataset: str) -> None:
    assert questions
    ids = [q.id for q in questions]
    assert len(ids) == len(set(ids)), "ids must be unique"
    for q in questions:
        assert q.dataset == dataset and q.id.startswith(f"{dataset}:")
        assert q.question.strip() == q.question and q.question
        assert q.answers and all(a.strip() for a in q.answers)
        for url in q.gold_urls:
            assert url == url.strip() and "\r" not in url
            assert url.startswith(("http://", "https://"))
        if q.effective_year is not None:
            assert q.effective_year_raw == str(q.effective_year)


def test_freshqa_real_file() -> None:
    questions, report = load_freshqa(_one("freshqa/*.csv"))
    _check_common(questions, "freshqa")
    assert report.skipped == [] and report.rows_read == report.rows_kept == len(questions)
    assert {q.split for q in questions} <= {"TEST", "DEV"}
    assert any(len(q.gold_urls) > 1 for q in questions)
    assert any("#:~:text=" in u for q in questions for u in q.gold_urls)
    assert any(len(q.answers) > 1 for q in questions)
    assert any(q.false_premise for q in questions) and not all(q.false_premise for q in questions)
    raws = {q.effective_year_raw for q in questions}
    assert any(r and r.startswith("before ") for r in raws)
    assert all(q.metadata["fact_type"] and q.metadata["num_hops"] for q in questions)


def test_infodeepseek_real_file() -> None:
    questions, report = load_infodeepseek(_one("infodeepseek/*.json"))
    _check_common(questions, "infodeepseek")
    assert report.skipped == [] and report.rows_kept == report.rows_read
    assert all(q.effective_year is None for q in questions)
    for flag in ("time_sensitive", "freshness", "false_premise", "multi_hop"):
        assert all(isinstance(q.metadata[flag], bool) for q in questions)
    assert all(q.false_premise == q.metadata["false_premise"] for q in questions)


@pytest.mark.parametrize(
    ("pattern", "subset"), [("sealqa/*seal_hard*.parquet", "seal_hard"), ("sealqa/*seal0*.parquet", "seal_0")]
)
def test_sealqa_real_files(pattern: str, subset: str) -> None:
    import pyarrow.parquet as pq

    path = _one(pattern)
    questions, report = load_sealqa(path)
    _check_common(questions, "sealqa")
    assert report.skipped == [] and report.rows_kept == report.rows_read
    assert all(q.metadata["subset"] == subset for q in questions)
    assert all(q.false_premise == ("false-premise" in q.metadata["question_types"]) for q in questions)
    assert any(q.effective_year_raw and q.effective_year is None for q in questions)  # "before …" bounds
    canaries = {c for c in pq.read_table(path, columns=["canary"]).column("canary").to_pylist() if c}
    dumped = json.dumps([q.model_dump() for q in questions], ensure_ascii=False)
    assert not any(c in dumped for c in canaries)
    assert all("canary" not in q.metadata for q in questions)


def test_wild_reproduces_paper_counts() -> None:
    bench = wild.load(SHARED)
    assert bench.counts() == {"freshqa": 49, "infodeepseek": 31, "sealqa": 64}
    assert bench.matches_paper() and len(bench.questions) == 144
    ids = [q.id for q in bench.questions]
    assert len(ids) == len(set(ids))
    for q in bench.questions:
        assert q.answers
        if q.dataset == "freshqa":
            assert q.metadata["fact_type"] == "fast-changing" and q.metadata["num_hops"] == "multi-hop"
            assert q.split in ("TEST", "DEV")
        elif q.dataset == "infodeepseek":
            assert q.metadata["time_sensitive"] is True and q.metadata["freshness"] is True
        else:
            assert q.metadata["freshness"] == "fast-changing" and q.metadata["subset"] == "seal_hard"
    for rep in bench.reports.values():
        assert rep.is_consistent() and rep.skipped == []


def test_wild_summary_matches_counts() -> None:
    bench = wild.load(SHARED)
    summary = wild.summarize(bench)
    years = summary.years
    assert list(years.columns) == ["freshqa", "infodeepseek", "sealqa"]
    assert years.sum(axis=0).to_dict() == bench.counts()
    assert years.loc["unspecified", "infodeepseek"] == 31
    assert summary.overview["rows_kept"].to_dict() == bench.counts()
    assert Counter(wild.year_label(q) for q in bench.questions) == Counter(
        {label: int(n) for label, n in years.sum(axis=1).items() if n}
    )


def test_pins_match_reference_copies(tmp_path: Path) -> None:
    checked = []
    for pin in dl.PINS:
        path = SHARED / pin.relpath
        if not path.exists():
            continue
        assert dl.file_sha256(path) == pin.sha256, pin.name
        assert dl.content_fingerprint(path) == pin.content_sha256, pin.name
        # a copy put in place by hand is taken as the pinned version, without a request
        (tmp_path / pin.relpath).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, tmp_path / pin.relpath)
        assert dl.fetch(pin, tmp_path).status == "present", pin.name
        checked.append(pin.name)
    if not checked:
        pytest.skip(f"no pinned file under {SHARED}")


def test_sealqa_pin_is_the_reference_copy_the_paper_counts_come_from() -> None:
    pins = {p.name: p for p in dl.PINS}
    path = SHARED / pins["sealqa_seal_hard"].relpath
    if not path.exists():
        pytest.skip(f"no SealQA reference copy at {path}")
    assert dl.content_fingerprint(path) == pins["sealqa_seal_hard"].content_sha256
    assert pins["sealqa_seal_hard"].revision == dl.SEALQA_REVISION
    questions, _ = load_sealqa(path)
    assert len(questions) == 254
    assert sum(q.metadata["freshness"] == "fast-changing" for q in questions) == 64


def test_cli_info_real_files() -> None:
    result = CliRunner().invoke(app, ["info", "--data-dir", str(SHARED)])
    assert result.exit_code == 0, result.output
    assert "144" in result.output and "(paper:" not in result.output


def test_a_freshqa_file_cut_between_two_rows_is_named(tmp_path: Path) -> None:
    """A CSV cut at a row boundary reads cleanly; without the count check the run would go on with
    95 of the 144 questions and say nothing."""
    import csv
    import shutil

    data = tmp_path / "data"
    for name in ("freshqa", "infodeepseek", "sealqa"):
        shutil.copytree(SHARED / name, data / name)
    src = next((data / "freshqa").glob("*.csv"))
    with src.open(encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.reader(fh))
    with src.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows[:300])
    bench = wild.load(data)
    assert bench.counts()["freshqa"] < 49
    with pytest.raises(wild.IncompleteDataError, match=r"freshqa has \d+ of its 49 questions") as exc:
        wild.check_complete(bench)
    assert src.name in str(exc.value) and "infodeepseek" not in str(exc.value)
