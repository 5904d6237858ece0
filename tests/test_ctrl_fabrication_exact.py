"""Exact fabrication: annotated answer spans edited to another answer of the question's timeline,
through the model fabricator's checks, with no model; and how a build chooses its fabricator."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from trek.cli import app
from trek.ctrl import fabrication as F
from trek.ctrl.build import build
from trek.ctrl.common import CtrlError, is_fictitious, same_answer
from trek.ctrl.pools import Pool, from_mini
from trek.datasets.mini import answer_span
from trek.embeddings import make_embedder
from trek.llm import LLMClient
from trek.testing.fake_openai import FakeOpenAIServer
from trek.types import Document, Question


class FixedEmbedder:
    """Similarity decided by the test."""

    name = "fixed"

    def __init__(self, sim: float):
        self.sim = sim

    def embed(self, texts):
        return np.array([[1.0, 0.0], [self.sim, float(np.sqrt(max(0.0, 1 - self.sim**2)))]])


@pytest.fixture(scope="module")
def wordllama():
    return make_embedder("wordllama")


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for var in ("TREK_CACHE", "OPENAI_BASE_URL", "TREK_PROMPTS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def _shown(d: Document) -> str:
    span = answer_span(d)
    assert span is not None, d.id
    return d.text[span.start:span.end]


def test_exact_fabrications_edit_the_gold_span_to_older_answers(wordllama):
    (pool,) = from_mini(question_ids=["mini:01"])
    out = F.fabricate_exact(pool, wordllama)
    fabs = out.role("fabrication")
    values = F.exact_values(pool)
    assert values[:5] == ["Kofi Brennan-Adu", "Owen Lachance", "Ilse Marchetti", "Gideon Fairweather", "Tomas Reyel"]
    # the first gold page names Dana five times: with every mention replaced, its windows fall below the
    # similarity floor for most values; the season preview names the coach once
    assert [d.supports_answer for d in fabs] == ["Gideon Fairweather", "Ruth Pask", "Ansel Vreeland"]
    golds = {g.id: g for g in pool.gold}
    for d in fabs:
        m = d.metadata
        src = golds[m["source_doc"]]
        assert m["fabricator"] == "exact" and m["model"] is None and m["verifier"] is None
        assert d.role == "fabrication" and m["synthetic"]
        assert is_fictitious(d.url) and d.date == src.date  # a fictitious domain, the gold page's date
        lo, hi = m["window"]
        window = src.text[lo:hi]
        assert m["edits"][0]["old"].count("Dana Okafor") == 1 and d.supports_answer in m["edits"][0]["new"]
        for e in m["edits"]:  # each find occurs once; applied, they give the text
            assert window.count(e["old"]) == 1
            window = window.replace(e["old"], e["new"])
        assert window == d.text
        assert m["similarity"] >= 0.89 and _shown(d) == d.supports_answer
        assert not same_answer(d.supports_answer, pool.question.answers)
        # no word of the reference answer anywhere: URL, title, text (the consistency check)
        assert F.names_reference(pool.question, d.supports_answer, d.url, d.title, d.text) == []
        assert "Dana" not in d.text and "Okafor" not in d.text and "okafor" not in d.url
        slug = d.url.rsplit("/", 1)[1]
        assert F.fabricated_slug(d.title, d.supports_answer) in slug and slug not in src.url
    notes = out.notes["fabrication"]
    assert notes["fabricator"] == "exact" and notes["made"] == 3 and notes["values"] == values
    assert {a.get("kind") for a in notes["attempts"]} == {None, "low_similarity"}


def test_dependent_edits_replace_every_mention_of_the_reference(wordllama):
    text = ("The club named Ada Lind as coach on Monday. Lind's first match is on Saturday, and Ada said the squad "
            "was ready. ADA LIND is on the poster; the Lindholm stadium is sold out.")
    a = text.index("Ada Lind")
    out = F.fabricate_exact(_pool(text, a, a + 8, ["Bo Sten"]), FixedEmbedder(0.95), F.FabricationSettings(target=1))
    (d,) = out.role("fabrication")
    assert d.text.startswith("The club named Bo Sten as coach on Monday. Sten's first match")
    assert "Bo said" in d.text and "Lindholm" in d.text  # first name by first name; another word stays
    assert [e["old"] for e in d.metadata["edits"]] == ["Ada Lind", "Monday. Lind's", "and Ada said", "ADA LIND"]
    assert "Bo Sten is on the poster" in d.text and "ADA" not in d.text  # a capitalized mention in any case
    assert d.text[d.metadata["answer_span"]["start"]:d.metadata["answer_span"]["end"]] == "Bo Sten"
    assert F.dependent_map(_pool(text, a, a + 8, []).question, "Bo Sten") == [
        ("Ada Lind", "Bo Sten"), ("Lind", "Sten"), ("Ada", "Bo")]


def test_a_count_named_by_its_ordinal_is_a_mention_and_is_edited_with_the_value():
    q = Question(id="c", dataset="sealqa", question="How many times has she won the Classic?", answers=["5", "five"])
    assert F.names_reference(q, "4", "https://f.example/2023/4-her-fifth-classic-win-f1", "Her 5th win", "") == [
        "url: fifth", "title: 5th"]
    mapping = F.dependent_map(q, "4")
    assert F.map_text("Her fifth Classic win (5th; five in all)", mapping) == "Her fourth Classic win (4th; four in all)"
    # "first" and "second" are too common to name a count; a value's own ordinal is no leak
    one = q.model_copy(update={"answers": ["2"]})
    assert F.reference_words(one, "3") == ["2"] and "fourth" not in F.reference_words(q, "4")


@pytest.mark.parametrize("answers, value, words", [
    (["17", "17 stations", "seventeen"], "15", ["17", "seventeenth", "17th", "seventeen"]),  # numbers, ordinals
    (["Sunniva Adeyemi-Hart", "Adeyemi-Hart"], "Bram Heskett", ["Sunniva", "Adeyemi-Hart", "Adeyemi", "Hart"]),
    (["Lanner-2", "Lanner 2"], "Lanner-1", ["Lanner-2"]),  # a word the value shares is no leak
    (["Norvale Mobile", "Norvale"], "Brightlink", ["Norvale", "Mobile"]),  # an option the question offers
    (["4.2", "Lanternfish 4.2"], "4.1", ["4.2"]),  # the question's own subject is no name of the answer
])
def test_the_words_that_name_the_reference(answers, value, words):
    q = Question(id="w", dataset="freshqa", question="Which of Brightlink, Norvale Mobile and Cellaro, or which "
                 "version of Lanternfish, or how many stations?", answers=answers)
    assert F.reference_words(q, value) == words
    assert F.reference_words(q.model_copy(update={"false_premise": True}), value) == []


def test_the_consistency_check_refuses_a_fabrication_that_names_the_reference():
    q = Question(id="c", dataset="freshqa", question="Who coaches?", answers=["Ada Lind", "Lind"])
    ok = Document(id="c:fabrication:1", url="https://x.info/2024/01/bo-sten-named-coach-f1", title="Bo Sten named coach",
                  text="The club named Bo Sten.", role="fabrication", supports_answer="Bo Sten")
    F.check_no_reference(q, ok)
    for field, value in [("url", "https://x.info/2024/01/ada-lind-named-coach-f1"), ("title", "Ada Lind named coach"),
                         ("text", "The club named Bo Sten; Lind left.")]:
        bad = ok.model_copy(update={field: value})
        with pytest.raises(F.Rejection, match="names_reference.*" + ("url" if field == "url" else field)):
            F.check_no_reference(q, bad)
    # "lind" inside another word, or a lower-case common word, names nothing
    F.check_no_reference(q, ok.model_copy(update={"text": "The Lindholm stadium named Bo Sten."}))
    assert F.fabricated_slug("Reserve Bank trims rate to 4.00% in 2024", "3") == "3-reserve-bank-trims-rate-to-in"


def test_the_exact_fabricator_refuses_what_still_names_the_reference(monkeypatch):
    # with the dependent edits switched off, the second mention ("Lind's") is left: the check refuses it
    text = "The club named Ada Lind as coach on Monday. Lind's first match is on Saturday."
    a = text.index("Ada Lind")
    monkeypatch.setattr(F, "dependent_map", lambda q, v: [])
    out = F.fabricate_exact(_pool(text, a, a + 8, ["Bo Sten", "Cy Moor"]), FixedEmbedder(0.95),
                            F.FabricationSettings(target=1, max_attempts=2))
    assert out.role("fabrication") == []
    attempts = out.notes["fabrication"]["attempts"]
    assert [x["kind"] for x in attempts] == ["names_reference", "names_reference"]
    assert "text: Lind" in attempts[0]["reason"]


def test_capitals_name_the_reference_lower_case_does_not():
    q = Question(id="c", dataset="freshqa", question="Who coaches?", answers=["Ada Lind"])
    assert F.names_reference(q, "Bo Sten", "https://x.info/a", "ADA LIND ERA", "") == ["title: Ada", "title: Lind"]
    assert F.names_reference(q, "Bo Sten", "https://x.info/a", "", "a lind of trees") == []
    assert F.map_text("ADA LIND and ada", F.dependent_map(q, "Bo Sten")) == "Bo Sten and ada"


@pytest.mark.parametrize(("qid", "old", "first_new"), [
    ("mini:06", "fourth", "third"),  # {value_ordinal}
    ("mini:12", "in March, June, September (by half a point) and now December", "three times"),
    ("mini:05", "was not acquired and remains an independent company",
     "was acquired by Calloway Marine Group and is no longer an independent company"),  # a false premise
    ("mini:11", "2.75", "2.85"),  # {value_number}: the number alone
])
def test_templates_write_the_other_answer_as_the_page_writes_it(wordllama, qid, old, first_new):
    (pool,) = from_mini(question_ids=[qid])
    fab = F.fabricate_exact(pool, wordllama).role("fabrication")[0]
    (edit,) = fab.metadata["edits"]
    assert old in edit["old"] and first_new in edit["new"]
    assert fab.text.count(first_new) >= 1 and old not in fab.text


def test_the_span_is_widened_until_it_occurs_once():
    w = "Tickets cost 2.75 dollars. A pass costs 2.75 dollars for students."
    a = w.index("2.75", 20)
    lo, hi = F._unique_find(w, a, a + 4)
    assert w.count(w[lo:hi]) == 1 and lo <= a and hi >= a + 4 and w[lo:hi] == "costs 2.75 dollars"


def _pool(text: str, start: int, end: int, values: list[str], template: str | None = None) -> Pool:
    q = Question(id="t:1", dataset="freshqa", question="Who coaches?", answers=["Ada Lind"], effective_year=2024,
                 effective_year_raw="2024")
    span = {"start": start, "end": end, **({"template": template} if template else {})}
    docs = [Document(id="t:1:gold:1", url="https://club.example/g", date="2024-02-01", text=text, question_id="t:1",
                     role="gold", supports_answer="Ada Lind", metadata={"answer_span": span})]
    docs += [Document(id=f"t:1:outdated:{i}", url=f"https://club.example/o{i}", date=f"20{10 + i}-01-01",
                      text=f"{v} coaches.", question_id="t:1", role="outdated", supports_answer=v)
             for i, v in enumerate(values, start=1)]
    return Pool(question=q, documents=docs, origin="test")


GOLD = "The club named Ada Lind as coach on Monday."


def test_checks_reject_like_the_model_fabricators():
    a = GOLD.index("Ada Lind")
    # a low similarity rejects every value, one attempt each, and the notes keep why
    out = F.fabricate_exact(_pool(GOLD, a, a + 8, ["Bo Sten", "Cy Moor"]), FixedEmbedder(0.5),
                            F.FabricationSettings(target=2, max_attempts=2))
    assert out.role("fabrication") == []
    kinds = [(x["value"], x["kind"]) for x in out.notes["fabrication"]["attempts"]]
    assert kinds == [("Cy Moor", "low_similarity"), ("Bo Sten", "low_similarity")]
    assert out.notes["fabrication"]["reason"] == "the timeline offers 2 other answers"
    # a value the template cannot write is rejected, the next one is used
    out = F.fabricate_exact(_pool("It has 16 clubs now.", 7, 9, ["14", "Osprey"], "{value_number}"),
                            FixedEmbedder(0.95), F.FabricationSettings(target=1))
    assert [x.get("kind") for x in out.notes["fabrication"]["attempts"]] == ["unfit_value", None]
    assert out.role("fabrication")[0].text == "It has 14 clubs now."
    # the reference and repeated answers are never offered
    assert F.exact_values(_pool(GOLD, a, a + 8, ["ada lind", "Bo Sten", "Bo Sten"])) == ["Bo Sten"]


def test_a_pool_without_an_annotated_span_gets_no_exact_fabrication(wordllama):
    (pool,) = from_mini(question_ids=["mini:29"])
    assert not F.has_answer_span(pool)
    out = F.fabricate_exact(pool, wordllama)
    assert out.role("fabrication") == []
    assert out.notes["fabrication"]["reason"] == "no gold document has an annotated answer span"


def test_saa_holds_exact_fabrications_for_mini_without_any_model(tmp_path):
    ids = ["mini:01", "mini:05", "mini:12"]
    r = build(from_mini(question_ids=ids), tmp_path, conditions=("SAA", "SBA"), count_tokens=False)
    manifest = json.loads((tmp_path / "build.json").read_text())
    assert manifest["fabrication"] == "done" and manifest["fabricators"] == {"exact": 3, "model": 0}
    assert manifest["model"] is None and manifest["fabricator"] == "auto"
    saa = [json.loads(x) for x in (tmp_path / "contexts.jsonl").read_text().splitlines() if '"SAA"' in x]
    assert len(saa) == 3
    made = {p.question.id: len(p.role("fabrication")) for p in r.pools}
    # mini:05's timeline has 4 other answers; mini:01's first gold page falls below the similarity floor
    # once every mention of Dana is replaced, for most values
    assert made == {"mini:01": 3, "mini:05": 4, "mini:12": 5}
    for ctx in saa:
        fab = [d for d in ctx["documents"] if d["role"] == "fabrication"]
        assert len(fab) == made[ctx["question_id"]] and all(d["synthetic"] and is_fictitious(d["url"]) for d in fab)
    for p in r.pools:  # 0 fabricated documents name the reference answer (URL, title, text)
        for d in p.role("fabrication"):
            assert F.names_reference(p.question, d.supports_answer, d.url, d.title, d.text) == []
    assert any("by exact edits of annotated answer spans (no model)" in m for m in r.messages)


def test_shortened_builds_cut_fabrications_around_the_new_answer(tmp_path):
    r = build(from_mini(question_ids=["mini:13"]), tmp_path, conditions=("SAA",), count_tokens=False, doc_chars=160)
    (pool,) = r.pools
    for d in pool.documents:
        assert len(d.text) <= 170, d.id
    for d in pool.role("fabrication"):
        assert d.metadata["fabricator"] == "exact" and d.metadata["similarity"] >= 0.90  # checked on the full window
        assert _shown(d) == d.supports_answer  # the span moved with the cut, and the passage shows it


def test_auto_uses_the_model_only_where_no_span_is_annotated(tmp_path):
    pools = from_mini(question_ids=["mini:01", "mini:29"])
    rules = [{"pattern": "Brackwater Lane", "error": {"status": 500, "message": "mini:01 must not reach the model"}},
             {"pattern": "Copy, character for character", "reply": json.dumps({"span": None})}]
    with FakeOpenAIServer(script=rules) as srv:
        client = LLMClient("fake-model", base_url=srv.base_url, api_key="sk-x", progress=False, max_retries=0)
        r = build(pools, tmp_path, client=client, conditions=("SAA",), count_tokens=False,
                  fabrication_settings=F.FabricationSettings(target=2, max_attempts=1))
        locate_calls = srv.stats()["requests"]
    by = {p.question.id: p for p in r.pools}
    assert by["mini:01"].notes["fabrication"]["fabricator"] == "exact" and by["mini:01"].role("fabrication")
    assert by["mini:29"].notes["fabrication"]["fabricator"] == "model"
    assert locate_calls >= 1 and by["mini:29"].notes["fabrication"]["attempts"]  # mini:29 went to the model
    assert not any(p.notes["fabrication"].get("pending") for p in r.pools)  # mini:01 never did
    manifest = json.loads((tmp_path / "build.json").read_text())
    assert manifest["fabricators"] == {"exact": 1, "model": 1} and manifest["model"] == "fake-model"


def test_fabricator_choices_are_checked(tmp_path):
    pools = from_mini(question_ids=["mini:01"])
    with pytest.raises(CtrlError, match="needs a model"):
        build(pools, tmp_path, fabricator="model")
    with pytest.raises(CtrlError, match="unknown fabricator"):
        build(pools, tmp_path, fabricator="magic")
    r = build(pools, tmp_path, fabricator="none", conditions=("SAA",), count_tokens=False)
    assert r.fabrication == "skipped" and not r.pools[0].role("fabrication")
    assert any("skipped for 1 of 1 questions: --fabricator none" in m for m in r.messages)
    bad = CliRunner().invoke(app, ["ctrl", "build", "--out", str(tmp_path / "x"), "--fabrication", "magic"])
    assert bad.exit_code != 0 and "--fabrication must be one of" in bad.output
    bad = CliRunner().invoke(app, ["ctrl", "build", "--out", str(tmp_path / "x"), "--fabrication", "model"])
    assert bad.exit_code != 0 and "--fabrication model needs --fabricator MODEL" in bad.output
    old = CliRunner().invoke(app, ["ctrl", "build", "--out", str(tmp_path / "x"), "--fabricator", "model"])  # old spelling
    assert old.exit_code != 0 and "old spelling of --fabrication model" in old.output and "needs --fabricator" in old.output
