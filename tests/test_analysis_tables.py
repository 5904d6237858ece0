"""Table builders of the analysis layer (Table 9's paired comparisons, attribution prevalence),
on small made-up tables whose numbers can be worked out by hand."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest

from trek import analysis
from trek.analysis import paired_comparisons

multilabel_prevalence_test = functools.partial(
    analysis.multilabel_prevalence_test,
    post=("Interpretation", "Distraction"),
    upstream=("Pre-retrieval", "Retrieval"),
)

# ---------------------------------------------------------------------------
# paired_comparisons
# ---------------------------------------------------------------------------


def _table9() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "OO": [1, 1, 1, 1, 1, 1, 1, 0],
            "A": [0, 0, 0, 0, 0, 1, 1, 0],
            "B": [1, 1, 1, 1, 1, 1, np.nan, 1],
        },
        index=pd.Index([f"q{i}" for i in range(1, 9)], name="question_id"),
    )


def test_paired_comparisons_against_reference():
    out = paired_comparisons(_table9(), "OO")
    assert list(out.index) == ["A", "B"]
    assert out.index.name == "condition"
    assert list(out.columns) == ["n", "acc_ref", "acc_cond", "delta_pp", "b", "c", "p", "p_holm"]
    # A vs OO on all 8 questions: OO 7/8 = 87.5%, A 2/8 = 25%, delta = 62.5 pp;
    # b = q1..q5 = 5, c = 0, p = 2 * 0.5^5 = 0.0625.
    a = out.loc["A"]
    assert (a["n"], a["b"], a["c"]) == (8, 5, 0)
    assert (a["acc_ref"], a["acc_cond"], a["delta_pp"]) == pytest.approx((87.5, 25.0, -62.5))  # lower: negative
    assert a["p"] == pytest.approx(0.0625)
    # B vs OO: q7 is dropped (NaN), n = 7. OO 6/7 = 85.714%, B 7/7 = 100%,
    # delta = -14.286 pp (B is better); b = 0, c = 1 (q8), p = 1.
    b = out.loc["B"]
    assert (b["n"], b["b"], b["c"]) == (7, 0, 1)
    assert (b["acc_ref"], b["acc_cond"], b["delta_pp"]) == pytest.approx((600 / 7, 100.0, 100 - 600 / 7))
    assert b["p"] == pytest.approx(1.0)
    # Holm over [0.0625, 1.0]: 0.0625 * 2 = 0.125, 1.0 * 1 = 1.0.
    np.testing.assert_allclose(out["p_holm"], [0.125, 1.0])


def test_paired_comparisons_subset_of_conditions():
    out = paired_comparisons(_table9(), "OO", conditions=["B"])
    assert list(out.index) == ["B"]
    # Only one test in the family, so Holm leaves it unchanged.
    assert out.loc["B", "p_holm"] == pytest.approx(out.loc["B", "p"])


def test_paired_comparisons_rejects_bad_input():
    table = _table9()
    with pytest.raises(ValueError, match=r"table must be a pandas DataFrame, got dict"):
        paired_comparisons(table.to_dict(), "OO")
    with pytest.raises(ValueError, match=r"reference 'XX' is not a column of table"):
        paired_comparisons(table, "XX")
    with pytest.raises(ValueError, match=r"conditions \['C'\] are not columns of table"):
        paired_comparisons(table, "OO", conditions=["A", "C"])
    with pytest.raises(ValueError, match=r"conditions must not include the reference 'OO'"):
        paired_comparisons(table, "OO", conditions=["OO", "A"])
    with pytest.raises(ValueError, match=r"conditions contains duplicates"):
        paired_comparisons(table, "OO", conditions=["A", "A"])
    with pytest.raises(ValueError, match=r"conditions must be a list of column names, not a single string"):
        paired_comparisons(table, "OO", conditions="A")
    with pytest.raises(ValueError, match=r"conditions is empty"):
        paired_comparisons(table[["OO"]], "OO")
    no_overlap = pd.DataFrame({"OO": [1, np.nan], "A": [np.nan, 0]})
    with pytest.raises(ValueError, match=r"no question has grades for both 'OO' and 'A'"):
        paired_comparisons(no_overlap, "OO")
    bad_values = table.assign(A=[0, 0, 0, 0, 0, 1, 2, 0])
    with pytest.raises(ValueError, match=r"table\['OO'\] \(x\) vs table\['A'\] \(y\): y must hold only 0/1"):
        paired_comparisons(bad_values, "OO")


# ---------------------------------------------------------------------------
# multilabel_prevalence_test
# ---------------------------------------------------------------------------


def _cases_m1() -> list[dict]:
    # 18 reviewed failures for model m1:
    #   13 post-retrieval only, 2 upstream only, 3 with both.
    # post = 16/18 = 88.9%, upstream = 5/18 = 27.8% (the numbers quoted in the paper);
    # b = 13, c = 2 -> p = 2 * (1 + 15 + 105) / 2^15 = 242 / 32768 = 0.0074.
    return (
        [{"model": "m1", "labels": {"Interpretation"}} for _ in range(13)]
        + [{"model": "m1", "labels": ["Retrieval"]} for _ in range(2)]
        + [{"model": "m1", "labels": ("Distraction", "Pre-retrieval")} for _ in range(3)]
    )


def _cases_m2() -> list[dict]:
    # 4 cases: 2 post only, 1 upstream only, 1 with an unrelated label.
    # b = 2, c = 1 -> p = min(1, 2 * (1 + 3) / 8) = 1.
    return [
        {"model": "m2", "labels": {"Distraction"}},
        {"model": "m2", "labels": {"Interpretation"}},
        {"model": "m2", "labels": {"Pre-retrieval"}},
        {"model": "m2", "labels": {"Other"}},
    ]


def test_prevalence_single_model_matches_paper_numbers():
    out = multilabel_prevalence_test(_cases_m1())
    assert list(out.columns) == [
        "n",
        "n_post",
        "n_upstream",
        "post_pct",
        "upstream_pct",
        "b",
        "c",
        "p",
        "p_holm",
    ]
    row = out.loc["m1"]
    assert (row["n"], row["n_post"], row["n_upstream"], row["b"], row["c"]) == (18, 16, 5, 13, 2)
    assert round(row["post_pct"], 1) == 88.9
    assert round(row["upstream_pct"], 1) == 27.8
    assert row["p"] == pytest.approx(242 / 32768)
    # One model: Holm leaves the p-value unchanged, 0.0074 after rounding.
    assert round(row["p_holm"], 4) == 0.0074


def test_prevalence_two_models_holm_and_dataframe_input():
    cases = _cases_m1() + _cases_m2()
    out = multilabel_prevalence_test(pd.DataFrame(cases))
    assert list(out.index) == ["m1", "m2"]
    assert out.index.name == "model"
    m2 = out.loc["m2"]
    assert (m2["n"], m2["b"], m2["c"]) == (4, 2, 1)
    assert (m2["post_pct"], m2["upstream_pct"]) == pytest.approx((50.0, 25.0))
    assert m2["p"] == pytest.approx(1.0)
    # Holm over [0.0073853, 1.0]: 0.0073853 * 2 = 0.0147706, then 1.0.
    np.testing.assert_allclose(out["p_holm"], [2 * 242 / 32768, 1.0])


def test_prevalence_custom_keys_and_families():
    cases = [{"who": "m", "tags": ["P"]}, {"who": "m", "tags": ["P"]}, {"who": "m", "tags": ["U", "P"]}]
    # post = {P}, upstream = {U}: 3/3 vs 1/3; b = 2, c = 0 -> p = 2 * 0.5^2 = 0.5
    out = multilabel_prevalence_test(cases, post="P", upstream=["U"], model_key="who", labels_key="tags")
    assert (out.loc["m", "b"], out.loc["m", "c"]) == (2, 0)
    assert out.loc["m", "p"] == pytest.approx(0.5)


def test_prevalence_rejects_bad_input():
    with pytest.raises(ValueError, match=r"attributions is empty"):
        multilabel_prevalence_test([])
    with pytest.raises(ValueError, match=r"attributions\[0\] has no key 'model'"):
        multilabel_prevalence_test([{"labels": {"Retrieval"}}])
    with pytest.raises(ValueError, match=r"attributions\[0\] has no key 'labels'"):
        multilabel_prevalence_test([{"model": "m"}])
    with pytest.raises(
        ValueError, match=r"attributions\[1\]\['labels'\] must be a set or list of labels, got the string"
    ):
        multilabel_prevalence_test(
            [{"model": "m", "labels": ["Retrieval"]}, {"model": "m", "labels": "Retrieval"}]
        )
    with pytest.raises(ValueError, match=r"attributions\[0\]\['labels'\] is missing"):
        multilabel_prevalence_test([{"model": "m", "labels": None}])
    with pytest.raises(ValueError, match=r"attributions\[0\] has a missing or unhashable model name"):
        multilabel_prevalence_test([{"model": None, "labels": {"Retrieval"}}])
    with pytest.raises(ValueError, match=r"attributions\[0\] must be a mapping, got str"):
        multilabel_prevalence_test(["m1"])
    with pytest.raises(ValueError, match=r"attributions has no column 'model'"):
        multilabel_prevalence_test(pd.DataFrame({"labels": [["Retrieval"]]}))
    with pytest.raises(ValueError, match=r"attributions must be an iterable of mappings"):
        multilabel_prevalence_test({"model": "m", "labels": {"Retrieval"}})
    with pytest.raises(ValueError, match=r"post and upstream must be disjoint, both contain \['Retrieval'\]"):
        multilabel_prevalence_test(_cases_m1(), post=["Retrieval", "Interpretation"])
    with pytest.raises(ValueError, match=r"upstream must name at least one label"):
        multilabel_prevalence_test(_cases_m1(), upstream=[])

