"""The exact grader's round-2 reading rules (trek.graders.exact_rules), one block of hand-written
cases per rule, each with cases it must not change (no model anywhere)."""

from __future__ import annotations

import pytest

from trek.graders.exact import decide, normalize
from trek.graders.exact_rules import list_markers, premise_answers, words
from trek.types import Question

COACH = Question(id="k", dataset="freshqa", question="Who coaches the Lantern Rovers?", answers=["Ada Vale", "Vale"])
COACH_COMPETING = ["Bo Reed", "Cy Moss"]
CEO = Question(id="e", dataset="freshqa", question="Who is the chief executive of Quillon Foods?",
               answers=["Mara Penhale", "Penhale"])
CEO_COMPETING = ["Jory Talbot", "Wenna Roskilly"]
TRAM = Question(id="t", dataset="freshqa", question="How many stations does the tram line have?",
                answers=["17", "seventeen", "17 stations"])
TRAM_COMPETING = ["15", "12"]
RATES = Question(id="r", dataset="sealqa", question="How many times did the bank cut its rate this year?",
                 answers=["8", "eight"])
RATES_COMPETING = ["7", "9", "2"]
BRENMOOR = Question(id="fp", dataset="infodeepseek", question="Which company acquired the Brenmoor Ferry Company in 2024?",
                    answers=["No company acquired the Brenmoor Ferry Company in 2024: the Calloway Marine Group takeover "
                             "was blocked, so Brenmoor remained independent."], false_premise=True)
BRENMOOR_COMPETING = ["Calloway Marine Group", "Tessaly Holdings"]
SEATS = Question(id="fp3", dataset="infodeepseek", question="How many seats did the Green Harbour Party win in the 2024 "
                 "Pellanor election?", answers=["No election was held in 2024: it was postponed to 2025, so the party "
                                                "kept the 9 seats it had won in 2020."], false_premise=True)
SEATS_COMPETING = ["9", "12", "7"]


def outcome(q: Question, competing: list[str], response: str) -> str:
    return decide(q, response, competing).outcome


# -- the last assertion of a narrated change wins ----------------------------------------------------
@pytest.mark.parametrize("q, competing, response, want", [
    (COACH, COACH_COMPETING, "Bo Reed was coach until 2024; since then Ada Vale.", "correct"),
    (COACH, COACH_COMPETING, "Ada Vale was coach until 2024; since then Bo Reed.", "incorrect"),
    (TRAM, TRAM_COMPETING, "It went from 15 to 17.", "correct"),
    (TRAM, TRAM_COMPETING, "It went from 17 to 15.", "incorrect"),
    # exact-5: "2" is a number no annotation covers, in a story of change: undecided
    (TRAM, TRAM_COMPETING, "15 stations until the extension added 2, so now 17.", "undecided"),
    (COACH, COACH_COMPETING, "Bo Reed was replaced by Ada Vale in 2024.", "correct"),
    (COACH, COACH_COMPETING, "Previously Bo Reed; now it's Ada Vale.", "correct"),
    # no change narrated: unchanged verdicts
    (COACH, COACH_COMPETING, "Bo Reed, then Ada Vale", "undecided"),  # a list, or a succession: not sure
    (TRAM, TRAM_COMPETING, "17 stations, up from 15", "correct"),
    (COACH, COACH_COMPETING, "Ada Vale, who replaced Bo Reed", "correct"),
])
def test_the_last_assertion_of_a_narrated_change_wins(q, competing, response, want):
    d = decide(q, response, competing)
    assert d.outcome == want, d.explain()


# -- negation after a name ---------------------------------------------------------------------------
@pytest.mark.parametrize("response, want", [
    ("Mara Penhale is not the CEO; Jory Talbot is.", "incorrect"),
    ("Jory Talbot is not the CEO; Mara Penhale is.", "correct"),
    ("Jory Talbot is no longer the chief executive; Mara Penhale is.", "correct"),
    ("Mara Penhale is no longer in charge; Wenna Roskilly runs it.", "incorrect"),
    ("Penhale isn't the chief executive any more, Jory Talbot is.", "incorrect"),
    ("Jory Talbot did not get the job; Mara Penhale did.", "correct"),
    # not a negation of the name: unchanged
    ("Mara Penhale is not only the CEO but also the chair.", "correct"),
    ("Mara Penhale, not Jory Talbot.", "correct"),
])
def test_a_negation_after_a_name_takes_it_back(response, want):
    d = decide(CEO, response, CEO_COMPETING)
    assert d.outcome == want, d.explain()


# -- self-correction ---------------------------------------------------------------------------------
@pytest.mark.parametrize("response, want", [
    ("Ada Vale? No - Bo Reed.", "incorrect"),
    ("Bo Reed? No - Ada Vale.", "correct"),
    ("Bo Reed. Actually, it's Ada Vale.", "correct"),
    ("Ada Vale, sorry, I mean Cy Moss.", "incorrect"),
    ("Cy Moss, or rather Ada Vale.", "correct"),
    # no correction: unchanged
    # exact-5: a second value in a story of change ("previous") after the answer: undecided
    ("Ada Vale. Actually, Bo Reed was the previous coach.", "undecided"),
    ("No one but Ada Vale.", "correct"),
    ("Ada Vale, rather than Bo Reed.", "correct"),
])
def test_a_self_correction_replaces_the_answer_before_it(response, want):
    d = decide(COACH, response, COACH_COMPETING)
    assert d.outcome == want, d.explain()


# -- lists are "all and only" -----------------------------------------------------------------------
@pytest.mark.parametrize("response, want", [
    ("Mara Penhale and Tomas Grey shared it.", "incorrect"),
    ("Mara Penhale and Tomas Grey are co-CEOs.", "incorrect"),
    ("Tomas Grey and Mara Penhale", "incorrect"),
    ("Mara Penhale & Tomas Grey", "incorrect"),
    ("The chief executive is Mara Penhale and Tomas Grey.", "incorrect"),
    # the unannotated name is in another role: unchanged
    ("Mara Penhale, and Tomas Grey is her deputy.", "correct"),
    ("Mara Penhale and her deputy", "correct"),
    ("Mara Penhale and Quillon Foods agreed a new contract.", "correct"),  # the question's own entity
])
def test_a_list_with_an_unannotated_extra_candidate_is_not_credit(response, want):
    d = decide(CEO, response, CEO_COMPETING)
    assert d.outcome == want, d.explain()


# -- count versus list -------------------------------------------------------------------------------
@pytest.mark.parametrize("response, want", [
    ("8 cuts: January, March, April, May, July, September and November.", "incorrect"),
    ("Eight times: Jan, Feb, Mar, Apr, May, Jun, Jul, Aug, Sep.", "incorrect"),
    ("8 cuts:\n- January\n- March\n- May\n", "incorrect"),
    ("8 cuts: January; March; May.", "incorrect"),
    ("8 cuts: January, February, March, April, May, June, July and August.", "correct"),
    ("8 cuts:\n- January\n- February\n- March\n- April\n- May\n- June\n- July\n- August\n", "correct"),
    ("8 times this year.", "correct"),
])
def test_a_count_must_agree_with_the_list_it_introduces(response, want):
    d = decide(RATES, response, RATES_COMPETING)
    assert d.outcome == want, d.explain()


# -- list markers are not answers --------------------------------------------------------------------
@pytest.mark.parametrize("response", [
    "1. The bank cut 8 times this year; 2. The rate is 4.5%.",
    "Step 2: read the pages. The bank cut 8 times.",
    "1) It cut eight times.\n2) Each cut was a quarter point.",
    "(1) Eight cuts\n(2) Announced monthly",
    "The bank cut 8 times [2].",
    "Document 9 says the bank cut 8 times.",
])
def test_list_markers_are_not_answers(response):
    d = decide(RATES, response, RATES_COMPETING)
    assert d.outcome == "correct" and d.named and d.named == d.acceptable, d.explain()


def test_a_number_that_is_an_answer_is_not_a_marker():
    assert decide(RATES, "It cut rates 9 times. That is all.", RATES_COMPETING).outcome == "incorrect"
    assert decide(RATES, "How many? 7. That is it.", RATES_COMPETING).named == ["7"]
    assert list_markers("1. A\n2. B") == {(0, 0), (1, 0)}
    assert list_markers("The answer is 2. Then stop.") == set()
    assert [w.text for w in words("Step 2 is done")] == ["step", "is", "done"]


# -- false premises: each protocol's rules ------------------------------------------------------------
@pytest.mark.parametrize("response, want", [
    ("No company acquired Brenmoor in 2023.", "incorrect"),  # another time: a different premise
    ("Brenmoor was not acquired in 2022; Calloway Marine Group bought it in 2024.", "incorrect"),
    ("It was not bought in 2019.", "incorrect"),
    ("Brenmoor remained independent.", "correct"),  # a rejection without a negation word
    ("Brenmoor stayed independent after the Calloway Marine Group takeover was blocked.", "correct"),
    ("The Brenmoor Ferry Company remained independent throughout 2024.", "correct"),
    # unchanged
    ("Brenmoor wasn't acquired in 2024.", "correct"),
    ("Calloway Marine Group acquired it.", "incorrect"),
    ("Brenmoor remained a ferry operator owned by Tessaly Holdings.", "incorrect"),
])
def test_false_premise_rejections_must_reject_the_questions_premise(response, want):
    d = decide(BRENMOOR, response, BRENMOOR_COMPETING)
    assert d.outcome == want, d.explain()


@pytest.mark.parametrize("response, want", [
    ("No election was held in 2024.", "incorrect"),
    ("There was no 2024 election; it was postponed.", "incorrect"),
    ("None: the election was postponed to 2025.", "incorrect"),
    ("No election was held in 2024; the party kept its 9 seats.", "correct"),
    ("There was no 2024 election, so it still holds the nine seats it won in 2020.", "correct"),
    ("No election was held in 2024; the party has 12 seats.", "incorrect"),  # not the reference's answer
])
def test_infodeepseek_rule_three_a_rejection_must_give_the_references_answer(response, want):
    d = decide(SEATS, response, SEATS_COMPETING)
    assert d.outcome == want, d.explain()


def test_rule_three_is_infodeepseeks_and_reads_only_clauses_that_deny_nothing():
    fresh = SEATS.model_copy(update={"dataset": "freshqa"})
    assert decide(fresh, "No election was held in 2024.", SEATS_COMPETING).outcome == "correct"
    assert premise_answers(SEATS.answers, [normalize(a) for a in SEATS_COMPETING]) == [("9",)]
    assert premise_answers(BRENMOOR.answers, [normalize(a) for a in BRENMOOR_COMPETING]) == []
    assert decide(SEATS, SEATS.answers[0], SEATS_COMPETING).outcome == "correct"  # the reference passes itself


# -- SealQA's not-attempted words -----------------------------------------------------------------------
@pytest.mark.parametrize("response", [
    "I need more context about which bank you mean.",
    "Nobody knows.",
    "Who knows?",
    "Could you clarify which year?",
    "I'd need more information to say.",
])
def test_sealqa_not_attempted_words(response):
    assert decide(RATES, response, RATES_COMPETING).outcome == "not_attempted"
    assert decide(RATES.model_copy(update={"dataset": "freshqa"}), response, RATES_COMPETING).outcome == "incorrect"


def test_a_declining_phrase_beside_a_wrong_answer_is_still_an_attempt():
    assert decide(RATES, "I need more context, but probably 7.", RATES_COMPETING).outcome == "incorrect"
    assert decide(RATES, "8; I know nothing more.", RATES_COMPETING).outcome == "correct"


# -- numbers, money, dates ------------------------------------------------------------------------------
def q(answer: str, dataset: str = "freshqa") -> Question:
    return Question(id="n", dataset=dataset, question="What is the figure?", answers=[answer])


@pytest.mark.parametrize("answer, response", [
    ("1,240,000", "About 1.24 million people."),
    ("1.24 million", "1,240,000"),
    ("1240000", "1 240 000"[0:0] + "1,240,000 residents"),
    ("€4.27 billion", "4.27 billion euros"),
    ("4.27 billion euros", "EUR 4.27 billion"),
    ("$2.75", "2.75 dollars"),
    ("2024-03-05", "5 March 2024"),
    ("5 March 2024", "March 5, 2024"),
    ("March 5, 2024", "Mar. 5th, 2024"),
    ("2024-03", "in March 2024"),
    ("the 5th of March 2024", "2024-03-05"),
])
def test_numbers_money_and_dates_of_one_value_agree(answer, response):
    d = decide(q(answer), response, [])
    assert d.outcome == "correct", (normalize(answer), normalize(response))


@pytest.mark.parametrize("answer, response", [
    ("1,240,000", "1.24 billion"),
    ("€4.27 billion", "4.27 billion dollars"),
    ("2024-03-05", "6 March 2024"),
    ("1240000", "124"),
    ("5 March 2024", "March 2024"),
])
def test_different_values_stay_different(answer, response):
    assert decide(q(answer), response, []).outcome == "incorrect"


def test_a_year_inside_a_date_is_still_a_year():
    bridge = Question(id="y", dataset="freshqa", question="In which year did it open?", answers=["2021"])
    assert decide(bridge, "It opened on 2021-06-30.", ["2019"]).correct
    assert decide(bridge, "It opened on 30 June 2021.", ["2019"]).correct


# -- possessives ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("response, want", [
    ("Okafor's side is coached by Okafor herself.", "correct"),
    ("It is Dana Okafor's team now.", "correct"),
    ("Dana Okafor’s.", "correct"),
    ("Kofi Brennan-Adu's", "incorrect"),
    ("It's Dana Okafor.", "correct"),
])
def test_a_name_in_the_possessive_names_the_answer(response, want):
    coach = Question(id="p", dataset="freshqa", question="Who is the head coach?", answers=["Dana Okafor", "Okafor"])
    d = decide(coach, response, ["Kofi Brennan-Adu"])
    assert d.outcome == want, d.explain()


def test_a_possessive_reference_form_matches_the_plain_one():
    album = Question(id="a", dataset="sealqa", question="Which album?", answers=["Mira Quell's Salt Lanterns"])
    assert decide(album, "Salt Lanterns by Mira Quell? No: Mira Quell Salt Lanterns", []).correct
    assert normalize("Mira Quell's Salt Lanterns") == ["mira", "quell", "salt", "lanterns"]
    assert normalize("it's") == ["its"]


# -- reordered multi-entity answers ------------------------------------------------------------------------
DUO = Question(id="d", dataset="sealqa", question="Who founded the studio?", answers=["Ines Marr and Tobi Marr"])


@pytest.mark.parametrize("response, want", [
    ("Tobi Marr and Ines Marr", "correct"),
    ("Tobi and Ines Marr", "correct"),
    ("Ines and Tobi Marr founded it.", "correct"),
    ("Tobi Marr & Ines Marr", "correct"),
    ("Ines Marr and Tobi Marr", "correct"),
    ("Tobi Marr", "incorrect"),
    ("Tobi Marr. Ines Marr joined later.", "incorrect"),
])
def test_reordered_multi_entity_answers_name_the_answer(response, want):
    d = decide(DUO, response, ["Ines Marr"])
    assert d.outcome == want, d.explain()
