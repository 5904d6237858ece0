"""Every CSV the paper writes (``tables/*.csv``, written by the notebooks through
``trek.report.latex.save_table``) reads back with ``pandas.read_csv`` with every numeric column as
numbers: the spreadsheet formula guard never turns a number (a negative kappa or delta) into text."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from trek.outputs import csv_cell, csv_safe

TABLES = Path(__file__).resolve().parents[1] / "tables"
NUMBERISH = re.compile(r"^'?[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")
CSVS = sorted(TABLES.glob("*.csv"))


def test_the_paper_writes_csv_tables():
    assert len(CSVS) >= 10


@pytest.mark.parametrize("path", CSVS, ids=[p.name for p in CSVS])
def test_every_numeric_column_of_a_paper_csv_reads_as_numbers(path):
    df = pd.read_csv(path)
    for col in df.columns:
        values = df[col].dropna()
        if len(values) and values.astype(str).str.fullmatch(NUMBERISH).all():
            assert pd.api.types.is_numeric_dtype(df[col]), f"{path.name}: column {col!r} reads as text: " \
                                                           f"{list(values[:4])}"


@pytest.mark.parametrize("value, cell", [
    ("-0.117", "-0.117"), ("+3", "+3"), ("-1.5e-3", "-1.5e-3"), ("=1+1", "'=1+1"), ("-x", "'-x"), ("+A1", "'+A1"),
    ("@SUM(A1)", "'@SUM(A1)"), ("-", "'-"), ("- 1", "'- 1"), (-0.5, -0.5), ("plain", "plain"),
])
def test_the_formula_guard_leaves_numbers_alone(value, cell):
    assert csv_cell(value) == cell


def test_a_frame_of_numbers_as_text_round_trips_as_numbers(tmp_path):
    frame = pd.DataFrame({"kappa": ["-0.117", "0.02", "-1"], "delta": [-8.3, 0.0, 16.7], "name": ["=x", "a", "b"]})
    path = tmp_path / "t.csv"
    csv_safe(frame).to_csv(path, index=False)
    back = pd.read_csv(path)
    assert back["kappa"].tolist() == [-0.117, 0.02, -1.0] and back["delta"].dtype.kind == "f"
    assert back["name"].tolist() == ["'=x", "a", "b"]
