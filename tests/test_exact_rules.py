"""The exact grader's reading rules (trek.graders.exact_rules), one block of hand-written cases per
rule: false premises, abstentions, hedges and lists, URLs and slugs (no model anywhere)."""

from __future__ import annotations

import pytest

from trek.graders.exact import decide
from trek.graders.exact_rules import abstains, is_slug, is_url, words
from trek.types import Question

FP = Question(id="fp", dataset="infodeepseek", question="Which company acquired the Brenmoor Ferry Company in 2024?",
              answers=["No company acquired the Brenmoor Ferry Company in 2024: the Calloway takeover was blocked."],
              false_premise=True)
FP_COMPETING = ["Calloway Marine Group", "Tessaly Holdings", "Northway Capital"]
BRIDGE = Question(id="fp2", dataset="freshqa", question="In which year did the Dunmore Crossing bridge open to traffic?",
                  answers=["It never opened: the project was cancelled in 2024."], false_premise=True)
BRIDGE_COMPETING = ["2019", "2021", "2024"]
SEATS = Question(id="fp3", dataset="infodeepseek", question="How many seats did the Green Harbour Party win in the 2024 "
                 "Pellanor election?", answers=["No election was held in 2024."], false_premise=True)
SEATS_COMPETING = ["9", "12"]

TOWNS = Question(id="c", dataset="sealqa", question="As of 2025, which of the towns Caddisford, Harrowmere and Oxhollow "
                 "has the largest population?", answers=["Caddisford"])
TOWNS_COMPETING = ["Harrowmere", "Oxhollow"]
COACH = Question(id="k", dataset="freshqa", question="Who coaches the Lantern Rovers?", answers=["Ada Vale", "Vale"])
COACH_COMPETING = ["Bo Reed", "Cy Moss"]
TRAM = Question(id="t", dataset="freshqa", question="How many stations does the tram line have?",
                answers=["17", "seventeen"])
TRAM_COMPETING = ["15", "12"]
ALBUM = Question(id="a", dataset="sealqa", question="Which album has spent the most weeks at number one?",
                 answers=["Salt Lanterns", "Salt Lanterns by Mira Quell"])
ALBUM_COMPETING = ["Lowland Radio", "Glass Orchard"]


# -- false premises: only a statement that denies the premise rejects it --------------------------
@pytest.mark.parametrize("q, competing, response", [
    (FP, FP_COMPETING, "No company did; the Calloway Marine Group deal was blocked."),
    (FP, FP_COMPETING, "Brenmoor wasn't acquired in 2024."),
    (FP, FP_COMPETING, "None."),
    (FP, FP_COMPETING, "Nobody acquired it: the takeover was blocked by the tribunal."),
    (FP, FP_COMPETING, "There was no acquisition of Brenmoor in 2024."),
    (FP, FP_COMPETING, "The premise is false: Brenmoor stayed independent."),
    (FP, FP_COMPETING, "Calloway Marine Group did not acquire it; the deal was abandoned."),
    (FP, FP_COMPETING, "Brenmoor was not acquired by Calloway Marine Group or anyone else."),
    (FP, FP_COMPETING, "The takeover by Calloway Marine Group was blocked."),
    (BRIDGE, BRIDGE_COMPETING, "It never opened."),
    (BRIDGE, BRIDGE_COMPETING, "The Dunmore Crossing was cancelled before completion, so it did not open."),
    (SEATS, SEATS_COMPETING, "Nope, there wasn't one."),
])
def test_a_statement_that_denies_the_premise_rejects_it(q, competing, response):
    d = decide(q, response, competing)
    assert d.rejects_premise is True and d.outcome == "correct", d.explain()


@pytest.mark.parametrize("q, competing, response, why", [
    # exact-5: a hedged denial is no verdict the rules can support
    (FP, FP_COMPETING, "I'm not sure, but I don't think any company acquired Brenmoor in 2024.", "rule hedge"),
    # the reference does not give 9 seats: the response denies the premise and answers it too
    (SEATS, SEATS_COMPETING, "No election was held in 2024; the party kept its 9 seats.", "rule premise"),
])
def test_a_denial_beside_a_hedge_or_an_answer_is_undecided(q, competing, response, why):
    d = decide(q, response, competing)
    assert d.rejects_premise is True and d.outcome == "undecided" and d.undecided.startswith(why), d.explain()


@pytest.mark.parametrize("q, competing, response", [
    (FP, FP_COMPETING, "Calloway Marine Group acquired it, not Tessaly Holdings."),  # the case
    (FP, FP_COMPETING, "The document that is asked to provide the answer to this question contains a list of "
                       "documents, but it does not contain any information about which company acquired the "
                       "Brenmoor Ferry Company in 2024."),  # the case: declines, denies nothing
    (FP, FP_COMPETING, "No, Calloway Marine Group acquired it."),
    (FP, FP_COMPETING, "It was not Tessaly Holdings but Calloway Marine Group."),
    (FP, FP_COMPETING, "I'm not an expert, but Calloway Marine Group bought it."),
    (FP, FP_COMPETING, "Tessaly Holdings acquired the Brenmoor Ferry Company in 2024. No other bidder came close."),
    (FP, FP_COMPETING, "Northway Capital, not Calloway Marine Group."),
    (FP, FP_COMPETING, "Tessaly Holdings did not; Calloway Marine Group did."),
    (FP, FP_COMPETING, "Tessaly Holdings is wrong: Calloway Marine Group bought it."),
    (FP, FP_COMPETING, "I don't know."),
    (FP, FP_COMPETING, "There is no information about the buyer in the documents."),
    (BRIDGE, BRIDGE_COMPETING, "It opened in 2021, not 2019."),
    (SEATS, SEATS_COMPETING, "They won 9 seats, no more."),
    (SEATS, SEATS_COMPETING, "Twelve seats."),
])
def test_a_negation_that_does_not_deny_the_premise_does_not_reject_it(q, competing, response):
    d = decide(q, response, competing)
    assert d.rejects_premise is False and d.outcome == "incorrect", d.explain()


# -- abstentions ----------------------------------------------------------------------------------
@pytest.mark.parametrize("response", [
    "It does not contain any information about which company acquired it.",
    "The documents don't say who coaches them.",
    "I couldn't find the answer in the pages.",
    "There is no record of a coach in the provided text.",
    "I do not have enough information to answer.",
    "The coach is not mentioned.",
    "Unknown.",
    "I'm unable to determine that from the context.",
    "",
])
def test_replies_that_decline_or_report_missing_information_abstain(response):
    assert abstains(response)
    seal = COACH.model_copy(update={"dataset": "sealqa"})
    assert decide(seal, response, COACH_COMPETING).outcome == "not_attempted"


@pytest.mark.parametrize("response", [
    "Ada Vale", "Not Bo Reed: Ada Vale coaches them.", "Ada Vale has coached them since 2024, not Bo Reed.",
    "No one but Ada Vale.", "www.example.com", "Bo Reed never lost a game.",
])
def test_answers_and_denials_are_not_abstentions(response):
    assert not abstains(response)


# -- hedges and lists -----------------------------------------------------------------------------
@pytest.mark.parametrize("q, competing, response", [
    (TOWNS, TOWNS_COMPETING, "Caddisford, Harrowmere, Oxhollow"),  # the case: every option listed
    (TOWNS, TOWNS_COMPETING, "Caddisford or Oxhollow"),
    (TOWNS, TOWNS_COMPETING, "Either Caddisford or Harrowmere."),
    (TOWNS, TOWNS_COMPETING, "Caddisford. Or maybe Oxhollow."),
    (TOWNS, TOWNS_COMPETING, "Caddisford/Harrowmere"),
    (TOWNS, TOWNS_COMPETING, "Caddisford and Harrowmere"),
    (TOWNS, TOWNS_COMPETING, "Caddisford and Harrowmere are the largest."),
    (COACH, COACH_COMPETING, "I believe it is Ada Vale, but it might be Bo Reed."),
    (COACH, COACH_COMPETING, "Ada Vale, Bo Reed, or Cy Moss."),
    (TOWNS, TOWNS_COMPETING, "Caddisford or another town"),
    (COACH, COACH_COMPETING, "Ada Vale or possibly Bo Reed"),
    (COACH, COACH_COMPETING, "Ada Vale; it could also be Cy Moss."),
    (COACH, COACH_COMPETING, "Ada Vale or someone else"),
    (TRAM, TRAM_COMPETING, "17 or 15"),
    (TRAM, TRAM_COMPETING, "It has 17 stops, though it may have 15."),
])
def test_a_hedge_or_a_list_with_a_wrong_candidate_is_not_correct(q, competing, response):
    d = decide(q, response, competing)
    assert d.outcome == "incorrect", d.explain()


@pytest.mark.parametrize("q, competing, response", [
    (TOWNS, TOWNS_COMPETING, "Caddisford"),
    (TOWNS, TOWNS_COMPETING, "Caddisford. Harrowmere is second."),
    (TOWNS, TOWNS_COMPETING, "Caddisford has the largest population, ahead of Harrowmere and Oxhollow."),
    (TOWNS, TOWNS_COMPETING, "Caddisford (Harrowmere is smaller)"),
    (TOWNS, TOWNS_COMPETING, "Not Harrowmere but Caddisford."),
    (TOWNS, TOWNS_COMPETING, "Caddisford, not Oxhollow"),
    (COACH, COACH_COMPETING, "Ada Vale, who replaced Bo Reed"),
    (COACH, COACH_COMPETING, "Ada Vale or Vale, the same person"),
    (COACH, COACH_COMPETING, "The coach is Ada Vale, and Bo Reed is her assistant."),
    (TRAM, TRAM_COMPETING, "17 stations, up from 15"),
    (TRAM, TRAM_COMPETING, "17 or so"),
])
def test_an_answer_with_others_in_other_roles_is_correct(q, competing, response):
    d = decide(q, response, competing)
    assert d.outcome == "correct", d.explain()


def test_the_decision_records_what_the_response_commits_to():
    d = decide(TOWNS, "Caddisford, Harrowmere, Oxhollow", TOWNS_COMPETING)
    assert d.committed == ["Caddisford", "Harrowmere", "Oxhollow"] and not d.hedged
    d = decide(COACH, "Ada Vale or someone else", COACH_COMPETING)
    assert d.committed == ["Ada Vale"] and d.hedged
    assert "commits to" in decide(TOWNS, "Caddisford or Oxhollow", TOWNS_COMPETING).explain()


# -- URLs and slugs -------------------------------------------------------------------------------
@pytest.mark.parametrize("response", [
    '&lt;the short final answer&gt;&#34;: &#34;no&#34;, &#34;salt-lanterns-breaks-the',  # the case
    "See https://charts.example/salt-lanterns for details",
    "charts.example/albums/salt-lanterns",
    "www.salt-lanterns.example",
    "salt_lanterns",
    "the page salt-lanterns-by-mira-quell",
    "[source](https://charts.example/salt-lanterns)",
])
def test_answers_never_match_inside_urls_or_slugs(response):
    # SealQA: a response that gives no answer and contradicts none is not attempted (C), never A
    d = decide(ALBUM, response, ALBUM_COMPETING)
    assert d.outcome == "not_attempted" and d.named == [], d.explain()


@pytest.mark.parametrize("response", [
    "Salt Lanterns", "Salt-Lanterns", "Salt Lanterns (https://charts.example/x)", "It is Salt Lanterns, see www.x.example.",
])
def test_prose_around_a_url_still_names_the_answer(response):
    assert decide(ALBUM, response, ALBUM_COMPETING).outcome == "correct"


def test_two_part_hyphenated_words_stay_prose():
    q = Question(id="h", dataset="freshqa", question="Who is the CEO?", answers=["Sunniva Adeyemi-Hart", "Adeyemi-Hart"])
    assert decide(q, "Sunniva Adeyemi-Hart", ["Bram Heskett"]).correct
    assert decide(TRAM, "a 17-station line", TRAM_COMPETING).correct
    assert not is_slug("Adeyemi-Hart") and not is_slug("17-station") and is_slug("salt-lanterns-breaks-the")
    assert is_url("https://x.example/a") and is_url("x.example/a-b") and not is_url("Vale/Reed")


def test_a_url_breaks_the_words_around_it():
    assert [w.text for w in words("Salt https://x.example Lanterns")] == ["salt", "lanterns"]
    assert len({w.sentence for w in words("Salt https://x.example Lanterns")}) == 2
    assert decide(ALBUM, "Salt https://x.example Lanterns", ALBUM_COMPETING).named == []


def test_an_answer_stated_before_a_denial_is_undecided():
    d = decide(FP, "Calloway Marine Group tried, but the deal was blocked; no company acquired Brenmoor.", FP_COMPETING)
    assert d.outcome == "undecided" and d.undecided.startswith("rule premise"), d.explain()
