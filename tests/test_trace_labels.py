"""assign_labels over every combination of its five inputs (paper appendix C.4)."""

import itertools

import pytest

from trek.trace.labels import DEFINITIONS, LABELS, assign_labels

VALUES = (True, False, None)
ALL = list(itertools.product(VALUES, repeat=5))

# The expectation, written as two lookup tables rather than as the rules' if/else chain.
# Retrieval side, keyed by (E, Q): E True gives nothing; E False or unknown gives Retrieval
# only for Q True, Pre-retrieval for Q False or unknown.
RETRIEVAL_SIDE = {
    (True, True): (), (True, False): (), (True, None): (),
    (False, True): ("Retrieval",), (False, False): ("Pre-retrieval",), (False, None): ("Pre-retrieval",),
    (None, True): ("Retrieval",), (None, False): ("Pre-retrieval",), (None, None): ("Pre-retrieval",),
}


def post_side(g, ran, n):
    """Post-retrieval side, keyed by (G, noise_was_run, N), spelled out case by case."""
    if g is False:
        return ("Interpretation",)  # whatever the noise probe says
    if g is None:
        return ()  # unknown gold-only result: no post-retrieval label
    # g is True
    if ran is True and n is False:
        return ("Distraction",)
    return ()  # noise probe not run / unknown-run, or its answer right or unknown


def expected(e, q, g, ran, n):
    labels = RETRIEVAL_SIDE[(e, q)] + post_side(g, ran, n)
    return labels or ("Randomness",)


def test_every_combination_is_covered():
    assert len(ALL) == 3**5 == 243


@pytest.mark.parametrize("combo", ALL, ids=lambda c: "-".join("TFU"[VALUES.index(v)] for v in c))
def test_labels_for_every_combination(combo):
    got = assign_labels(*combo)
    assert got == expected(*combo)
    assert isinstance(got, tuple)


def test_structure_over_all_combinations():
    seen = set()
    for combo in ALL:
        got = assign_labels(*combo)
        seen.update(got)
        assert 1 <= len(got) <= 2
        assert list(got) == sorted(got, key=LABELS.index)  # canonical order
        assert not {"Interpretation", "Distraction"} <= set(got)  # exclusive by the probe schedule
        assert not {"Pre-retrieval", "Retrieval"} <= set(got)
        assert ("Randomness" in got) == (got == ("Randomness",))
    assert seen == set(LABELS)


def test_paper_examples():
    # complete judgments
    assert assign_labels(False, True, True, True, False) == ("Retrieval", "Distraction")
    assert assign_labels(False, False, False, False, None) == ("Pre-retrieval", "Interpretation")
    assert assign_labels(True, None, True, True, True) == ("Randomness",)
    assert assign_labels(True, False, True, True, False) == ("Distraction",)
    # unknown evidence falls into the retrieval side; unknown queries count as inadequate
    assert assign_labels(None, None, True, True, True) == ("Pre-retrieval",)
    # Distraction needs the noise probe to have been run
    assert assign_labels(True, True, True, False, False) == ("Randomness",)
    assert assign_labels(True, True, True, None, False) == ("Randomness",)
    # unknown gold-only result: residual Randomness
    assert assign_labels(True, True, None, True, False) == ("Randomness",)


@pytest.mark.parametrize("bad", ["unknown", 0, 1, "True"])
def test_non_boolean_flags_are_rejected(bad):
    with pytest.raises(TypeError, match="True, False or None"):
        assign_labels(True, True, bad, True, True)
    with pytest.raises(TypeError):
        assign_labels(bad, True, True, True, True)


def test_every_label_has_a_definition():
    assert list(DEFINITIONS) == list(LABELS)
    assert all(len(d) > 40 for d in DEFINITIONS.values())


def test_every_recorded_trace_carries_the_label_rule_and_test_versions():
    import json

    from trek.report.paths import repo_root
    from trek.trace.labels import C4

    files = sorted((repo_root() / "data" / "runs" / "wild").glob("*/trace.jsonl"))
    assert files, "the recorded runs are part of the repository"
    for f in files:
        for line in f.read_text(encoding="utf-8").splitlines():
            v = json.loads(line)["versions"]
            assert v["labels"] == f"{C4.name} {C4.version}", f
            assert {"test.retrieval", "test.gold_only"} <= set(v), f
