"""CSV and LaTeX tables: pandas' Styler with real multi-row and multi-column headers, escaping."""

import numpy as np
import pandas as pd

from trek.report.latex import escape, save_table, to_latex


def test_save_table_writes_csv_and_tex(tmp_path, monkeypatch):
    manifest = tmp_path / "m.txt"
    monkeypatch.setenv("TREK_PAPER_MANIFEST", str(manifest))
    df = pd.DataFrame({"accuracy": [50.0, 2 / 3 * 100], "n": [4, 3]}, index=pd.Index(["a_b", "c"], name="dataset"))
    paths = save_table(df, "tab_x", tmp_path / "tables", caption="Acc & more")
    csv, tex = (p.read_text() for p in paths)
    assert csv.splitlines()[0] == "dataset,accuracy,n" and "66.7" in csv
    assert r"a\_b & 50.0 & 4 \\" in tex and r"\caption{Acc \& more}" in tex
    assert manifest.read_text().split() == [str(p) for p in paths]


def test_missing_values_print_as_dashes():
    tex = to_latex(pd.DataFrame({"x": [float("nan")], "y": [None]}))
    assert r"0 & -- & -- \\" in tex and tex.count(r"\toprule") == 1


def test_multiindex_rows_and_columns_get_real_headers():
    rows = pd.MultiIndex.from_tuples([("Smol_LM", "direct"), ("Smol_LM", "rerank"), ("B", "direct")],
                                     names=["model", "method"])
    cols = pd.MultiIndex.from_tuples([("OO", "acc"), ("OO", "Δ"), ("MND", "acc"), ("MND", "Δ"), ("questions", "n")])
    df = pd.DataFrame([[75.0, -8.3, 80.0, -3.3, 12], [70.0, -13.3, np.nan, np.nan, 12], [50.0, 0.0, 25.0, -25.0, 4]],
                      index=rows, columns=cols)
    df[("questions", "n")] = df[("questions", "n")].astype(int)
    tex = to_latex(df, caption="Accuracy (%); Δ = points from Gold-only")
    # no Python tuple anywhere: each row level is a column, a repeated model is written once
    assert "('" not in tex and "')" not in tex
    assert r"\multirow[t]{2}{*}{Smol\_LM} & direct & 75.0 & -8.3 & 80.0 & -3.3 & 12 \\" in tex
    assert r" & rerank & 70.0 & -13.3 & -- & -- & 12 \\" in tex
    # column levels are stacked header rows with spans
    assert r"\multicolumn{2}{c}{OO} & \multicolumn{2}{c}{MND} & questions \\" in tex
    assert r"acc & $\Delta$ & acc & $\Delta$ & n \\" in tex
    assert r"model & method" in tex
    assert "Δ" not in tex and r"\caption{Accuracy (\%); $\Delta$ = points from Gold-only}" in tex
    assert tex.count(r"\begin{tabular}{llrrrrr}") == 1


def test_escape_special_characters_in_one_pass():
    assert escape(r"a\b{c}") == r"a\textbackslash{}b\{c\}"
    assert escape("50% & $3 #1 x_y ~ ^") == r"50\% \& \$3 \#1 x\_y \textasciitilde{} \textasciicircum{}"
    assert escape("OO Δ\nnext") == r"OO $\Delta$ next"


def test_strings_in_cells_are_escaped_and_index_can_be_left_out():
    df = pd.DataFrame({"url": ["https://x.org/a_b?q=1&r=2"], "p": [0.012345]})
    tex = to_latex(df, float_format="%.4g", index=False)
    assert r"https://x.org/a\_b?q=1\&r=2 & 0.01235 \\" in tex
