"""Query adequacy by plausibility (C.2): the rule on hand-written targets, and the file's errors."""

from __future__ import annotations

import pytest

from trek.query_targets import QueryTargets, QueryTargetsError, assess, load, names, words

COACH = QueryTargets("x:1", entity=("Harrowmere Rovers", "Rovers"), hop1=("Brackwater Lane",),
                     attribute=("head coach", "coach", "manager"), years=frozenset({2024, 2025}),
                     competing=("Harrowmere Rovers Women", "Quellbridge Athletic"))
AIRLINE = QueryTargets("x:2", entity=("Vellacott International Airport", "Vellacott"),
                       attribute=("passenger", "airline"), years=frozenset({2023}), required=True)
QUESTION = "Who is the current head coach of the football club that plays its home games at Brackwater Lane?"


def adequate(targets, *queries):
    return assess(targets, list(queries))[0]["query_adequate"]


def missed(targets, *queries):
    return assess(targets, list(queries))[1]["missed"]


@pytest.mark.parametrize("query", ["2024-12-31", "The search query.", "https://www.example.com/news-2018/345697",
                                   "head coach", "Harrowmere", "Brackwater Lane 2024"])
def test_queries_that_aim_at_nothing_in_particular_are_inadequate(query):
    assert not adequate(COACH, query)


def test_entity_attribute_and_time_are_adequate():
    assert adequate(COACH, "Harrowmere Rovers head coach 2024")
    assert adequate(COACH, "who coaches Harrowmere Rovers now")  # a form of the attribute word
    assert adequate(AIRLINE, "Vellacott International Airport busiest airline 2023 passengers")


def test_a_multi_hop_question_asked_as_one_query_is_inadequate_and_its_decomposition_adequate():
    assert not adequate(COACH, QUESTION)
    assert missed(COACH, QUESTION) == ["bridge entity"]
    assert "first hop" in assess(COACH, [QUESTION])[0]["reason"]
    assert adequate(COACH, "football club home ground Brackwater Lane", "Harrowmere Rovers head coach")
    _, detail = assess(COACH, ["football club home ground Brackwater Lane", "Harrowmere Rovers head coach"])
    assert detail["hop1"]["names"] == "Brackwater Lane" and detail["entity"]["query"] == "Harrowmere Rovers head coach"


def test_the_queries_are_read_together():
    assert adequate(COACH, "Harrowmere Rovers", "who is the head coach")
    assert not adequate(COACH, "Harrowmere Rovers head coach", "Harrowmere Rovers Women")  # one wrong entity is enough


def test_a_competing_entity_is_not_the_entity_even_when_it_contains_its_name():
    assert missed(COACH, "Harrowmere Rovers Women head coach") == ["bridge entity", "no competing entity"]
    assert missed(COACH, "Quellbridge Athletic coach Harrowmere Rovers") == ["no competing entity"]


def test_a_year_outside_the_window_makes_the_queries_inadequate():
    assert missed(COACH, "Harrowmere Rovers head coach 2019") == ["no date outside the window"]
    assert assess(COACH, ["Harrowmere Rovers coach 2019"])[1]["outside_window"] == [2019]
    assert adequate(COACH, "Harrowmere Rovers coach 2025")


def test_a_time_the_question_fixes_must_be_named():
    assert missed(AIRLINE, "Vellacott airport airline passengers") == ["time"]
    assert missed(AIRLINE, "Vellacott airline passengers 2024") == ["time", "no date outside the window"]
    assert adequate(AIRLINE, "Vellacott airline passengers 2023")


def test_matching_is_by_words_with_entities_decoded_possessives_dropped_and_word_forms():
    assert words("The Rovers&#39; coach&apos;s O'Neil Brackwater-Lane") == ["the", "rovers", "coach", "o", "neil",
                                                                          "brackwater", "lane"]
    assert names("Harrowmere Rovers' managers", "manager") and names("coached by", "coach")
    assert names("HARROWMERE ROVERS's coach", "Harrowmere Rovers")
    assert not names("coachella", "coach") and not names("Rover", "Rovers") and not names("", "coach")
    assert adequate(COACH, "The head coach of Harrowmere Rovers&#39; first team")


def test_the_verdict_does_not_change_with_the_query_order_or_repeats():
    qs = ["Brackwater Lane club", "Harrowmere Rovers head coach", "Harrowmere Rovers head coach"]
    assert all(adequate(COACH, *order) for order in (qs, qs[::-1], qs[1:2]))


# -- the file -------------------------------------------------------------------------------------------
GOOD = """\
mini:01:
  entity: [Harrowmere Rovers]
  hop1: [Brackwater Lane]
  attribute: [coach]
  time: {years: [2024], required: false}
  competing: []
"""


def test_the_file_loads_into_targets(tmp_path):
    p = tmp_path / "query_targets.yaml"
    p.write_text(GOOD)
    t = load(p)["mini:01"]
    assert t.multi_hop and t.years == {2024} and t.competing == () and t.entity == ("Harrowmere Rovers",)


@pytest.mark.parametrize("edit,message", [
    (lambda s: s.replace("attribute: [coach]", "attribute: []"), "mini:01: 'attribute' must be a list of names"),
    (lambda s: s.replace("attribute: [coach]", "atribute: [coach]"), "mini:01: unknown field(s) atribute"),
    (lambda s: s.replace("[2024]", "['2024']"), "mini:01: 'time.years' must be a list of years"),
    (lambda s: s.replace("required: false", "required: maybe"), "'time.required' must be true or false"),
    (lambda s: s.replace("time: {years: [2024], required: false}", "time: 2024"), "'time' must be a mapping"),
    (lambda s: s.replace("entity: [Harrowmere Rovers]", "entity: [Harrowmere Rovers, '!!']"), "'entity'"),
    (lambda s: s + "  : [", "not readable YAML"),
    (lambda s: "- a list\n", "expected a mapping of question id"),
])
def test_a_bad_file_is_refused_naming_file_question_and_field(tmp_path, edit, message):
    p = tmp_path / "query_targets.yaml"
    p.write_text(edit(GOOD))
    with pytest.raises(QueryTargetsError) as e:
        load(p)
    assert message in str(e.value) and str(p) in str(e.value)


# -- targets-2: undecided where the targets cannot support a verdict ------------------------------
def undecided(targets, *queries):
    value, detail = assess(targets, list(queries))
    return value["query_adequate"] is None and detail["undecided"] and value["reason"].startswith("Undecided")


def test_a_possible_code_or_other_script_for_a_missed_entity_is_undecided():
    assert undecided(AIRLINE, "VLC busiest airline 2023")
    assert undecided(AIRLINE, "Веллакотт airline passengers 2023")
    assert assess(AIRLINE, ["Vellacott busiest airline 2023"])[1]["undecided"] is None


def test_a_comparison_year_beside_an_adequate_query_is_adequate():
    value, detail = assess(COACH, ["Harrowmere Rovers head coach 2024", "Harrowmere Rovers head coach 2019"])
    assert value["query_adequate"] is True and detail["comparison"]["years"] == [2019]
    assert adequate(COACH, "Harrowmere Rovers head coach 2019") is False  # no year inside the window: decided
    # an in-window year in a query that is not adequate on its own compares nothing: undecided
    assert undecided(COACH, "Harrowmere Rovers 2024", "Harrowmere Rovers head coach 2019")


def test_initials_of_an_entity_in_capitals_name_it():
    club = QueryTargets("x:3", entity=("Larchfield Football Club",), attribute=("manager",), years=frozenset({2025}))
    assert adequate(club, "LFC manager")
    assert assess(club, ["lfc manager"])[0]["query_adequate"] is not True  # lower case: not a code


def test_a_near_form_of_a_missed_entity_is_undecided():
    assert undecided(AIRLINE, "aéroport de Vellacot passagers 2023") or undecided(AIRLINE, "Vellacotts passengers 2023")
    country = QueryTargets("x:4", entity=("Estavia",), attribute=("finance minister",), years=frozenset({2025}))
    assert undecided(country, "ministre des finances Estavie")
    assert adequate(country, "Marrowby finance minister") is False  # nothing like the entity: decided
