"""data/mini/query_targets.yaml: one well-formed entry per TrekBench-Mini question, consistent with the
question texts under the word matching that trek/trace/query_targets.py applies.

The file says what adequate search queries aim at (entity, first-hop descriptor, asked attribute, time
window, competing entities). These tests read it as data only: shape and types, then the property
that makes "the question itself as the only query" a sensible baseline: a single-hop question names
its entity and attribute, a multi-hop question names its descriptor but not the bridge entity, and
no question names a competing entity or a year outside its window.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

MINI = Path(__file__).resolve().parents[1] / "data" / "mini"
TARGETS = MINI / "query_targets.yaml"
REQUIRED_KEYS = {"entity", "attribute", "time", "competing"}
ALLOWED_KEYS = REQUIRED_KEYS | {"hop1"}
TIME_KEYS = {"years", "required"}
ENDINGS = ("", "s", "es", "ed", "ing")
YEAR = re.compile(r"\b(1[89]\d\d|20\d\d)\b")
# The questions whose entity is given only through a descriptor (the FreshQA-style two-hop ones).
MULTI_HOP = {"mini:01", "mini:02", "mini:03", "mini:08", "mini:09", "mini:14", "mini:18"}


def _words(text: str) -> list[str]:
    """Lowercase words: HTML entities decoded, possessive 's dropped, other characters as spaces."""
    text = html.unescape(text).lower().replace("\u2019", "'")
    text = re.sub(r"'s\b", "", text)
    return re.sub(r"[^0-9a-z]+", " ", text).split()


def _word_matches(token: str, word: str) -> bool:
    return any(token == word + ending for ending in ENDINGS)


def _names(text: str, phrase: str) -> bool:
    """True when the phrase's words occur consecutively in the text (each with an allowed ending)."""
    tokens, words = _words(text), _words(phrase)
    if not words:
        return False
    return any(
        all(_word_matches(tokens[i + k], w) for k, w in enumerate(words))
        for i in range(len(tokens) - len(words) + 1)
    )


def _questions() -> dict[str, dict[str, Any]]:
    with (MINI / "questions.jsonl").open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return {row["id"]: row for row in rows}


@pytest.fixture(scope="module")
def targets() -> dict[str, Any]:
    data = yaml.safe_load(TARGETS.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def questions() -> dict[str, dict[str, Any]]:
    return _questions()


QUESTION_IDS = sorted(_questions())


def _phrases(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(p, str) and _words(p) for p in value)


def test_every_question_has_exactly_one_entry(targets, questions):
    assert len(questions) == 36
    assert sorted(targets) == sorted(questions)


def test_multi_hop_questions_are_the_expected_freshqa_ones(targets, questions):
    assert {qid for qid, entry in targets.items() if "hop1" in entry} == MULTI_HOP
    assert all(questions[qid]["dataset"] == "freshqa" for qid in MULTI_HOP)


@pytest.mark.parametrize("qid", QUESTION_IDS)
def test_entry_schema(targets, qid):
    entry = targets[qid]
    assert isinstance(entry, dict)
    assert REQUIRED_KEYS <= set(entry) <= ALLOWED_KEYS, sorted(set(entry) ^ REQUIRED_KEYS)
    for key in ("entity", "attribute"):
        assert _phrases(entry[key]) and entry[key], (qid, key)
    if "hop1" in entry:
        assert _phrases(entry["hop1"]) and entry["hop1"], qid
    assert _phrases(entry["competing"]), qid  # may be empty
    time = entry["time"]
    assert isinstance(time, dict) and set(time) == TIME_KEYS, qid
    years = time["years"]
    assert isinstance(years, list) and years, qid
    assert all(type(y) is int and 1900 <= y <= 2025 for y in years), (qid, years)
    assert years == sorted(set(years)), qid
    assert type(time["required"]) is bool, qid


@pytest.mark.parametrize("qid", QUESTION_IDS)
def test_phrases_are_not_single_letters_or_stop_words(targets, qid):
    entry = targets[qid]
    for key in ("entity", "hop1", "attribute", "competing"):
        for phrase in entry.get(key, []):
            words = _words(phrase)
            assert not (len(words) == 1 and (len(words[0]) < 2 or words[0] in {"the", "city", "current", "air"})), (
                qid,
                key,
                phrase,
            )


@pytest.mark.parametrize("qid", QUESTION_IDS)
def test_no_competing_name_equals_an_entity_alias(targets, qid):
    entry = targets[qid]
    aliases = {" ".join(_words(p)) for p in entry["entity"]}
    competing = [" ".join(_words(p)) for p in entry["competing"]]
    assert not aliases & set(competing), qid
    assert len(competing) == len(set(competing)), qid


@pytest.mark.parametrize("qid", QUESTION_IDS)
def test_question_text_against_its_entry(targets, questions, qid):
    entry, text = targets[qid], questions[qid]["question"]
    entities = [p for p in entry["entity"] if _names(text, p)]
    if "hop1" in entry:
        assert not entities, (qid, entities)
        assert any(_names(text, p) for p in entry["hop1"]), qid
    else:
        assert entities, qid
    assert any(_names(text, p) for p in entry["attribute"]), qid
    assert not [p for p in entry["competing"] if _names(text, p)], qid
    named_years = {int(y) for y in YEAR.findall(text)}
    assert named_years <= set(entry["time"]["years"]), (qid, named_years)
    if entry["time"]["required"]:
        assert named_years, qid  # a question that fixes a time names its year


def test_matcher_normalisation():
    assert _words("Rovers&#39; coach, the women's team (under-21)") == [
        "rovers",
        "coach",
        "the",
        "women",
        "team",
        "under",
        "21",
    ]
    assert _names("Who coaches the Rovers?", "coach")
    assert _names("passengers carried", "passenger")
    assert not _names("the Rovers Women", "Harrowmere Rovers")
    assert _names("Harrowmere  Rovers' new head coaches", "head coach")
