"""The values a response names (trek.graders.exact_values): names, numbers, what no annotation covers,
and the parsers' one form of dates, grouped numbers, money and durations."""

from __future__ import annotations

import pytest

from trek.graders.exact_values import aliases, canonical, names, transliterate, uncovered, unreadable


def test_names_are_capitalized_runs_and_a_common_first_word_is_none():
    got = [v.text for v in names("The answer is Ossian Gray. Coaching is hard. Dana Okafor of Harrowmere Rovers won.")]
    assert got == ["Ossian Gray", "Dana Okafor of Harrowmere Rovers"]
    assert [v.text for v in names("The CEO said so in May.")] == []


def test_uncovered_leaves_out_annotated_answers_question_words_and_years():
    known = [("dana", "okafor"), ("okafor",)]
    got = uncovered("Okafor coaches Harrowmere Rovers since 2024, with 3 assistants.", known,
                    ["who", "coaches", "harrowmere", "rovers"])
    assert [(v.text, v.kind) for v in got] == [("3", "number")]
    assert [v.text for v in uncovered("Ossian Gray, in 2024.", known, [], years=True)] == ["Ossian Gray", "2024"]


@pytest.mark.parametrize("raw, want", [
    ("19/11/2024", "19 November 2024"),
    ("03/04/2024", "03/04/2024"),  # day and month could be read either way: left as written
    ("383 726 people", "383726 people"),
    ("1.374.687", "1374687"),
    ("US$44bn", "$44000000000"),
    ("USD 44,000,000,000", "$44000000000"),
    ("2 h 00 min 35 s", "7235 seconds"),
    ("2:00:35", "7235 seconds"),
    ("2 hours, 3 minutes and 10 seconds", "7390 seconds"),
    ("383.726", "383.726"),  # a decimal or a thousands group: left as written
    ("17 stations in 2024", "17 stations in 2024"),
])
def test_the_parsers_put_one_value_in_one_form(raw, want):
    assert canonical(raw) == want


def test_forms_no_parser_reads_are_unreadable():
    assert unreadable("383.726 people and 03/04/2024") == ["383.726", "03/04/2024"]
    assert unreadable(canonical("383 726 and 19/11/2024")) == []


def test_other_cased_scripts_are_transliterated_and_caseless_ones_kept():
    assert transliterate("Юки Танабе") == "Yuki Tanabe"
    assert transliterate("田辺 由紀 and Ömer") == "田辺 由紀 and Ömer"


def test_aliases_initials_lists_and_the_main_part_of_a_name():
    assert "Estavia and the UAP" in aliases("Estavia and the United Arab Provinces")
    assert "P. Castellan" in aliases("Priya Castellan")
    assert "Wend, Tine and Sorrel" in aliases("Sorrel, Tine and Wend")
    assert "San Lorenzo" in aliases("San Lorenzo, Calvera", main_part=True)
    assert "San Lorenzo" not in aliases("San Lorenzo, Calvera")
    assert "Sorrel" not in aliases("Sorrel, Tine and Wend", main_part=True)


def test_initials_that_spell_a_word_are_no_alias():
    from trek.graders.exact import decide
    from trek.types import Question

    assert aliases("Dana Okafor") == ["D. Okafor"]  # never "DO": the grader compares lower-cased words
    q = Question(id="c", dataset="freshqa", question="Who is the head coach?", answers=["Dana Okafor"])
    assert decide(q, "I do think the coach is Ossian Gray.", ["Bo Reed"]).outcome == "undecided"
    club = Question(id="l", dataset="sealqa", question="Which club won the title?", answers=["Vetch Harbour Athletic"])
    d = decide(club, "VHA won it.", ["Oldmere Rangers"])
    assert d.outcome == "correct" and d.unannotated == [], d.explain()  # an allowed form is no unannotated name
