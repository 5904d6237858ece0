"""Fabrication: structural checks reject each kind of bad candidate, rejected candidates are retried
with the reason as feedback, and ``trek ctrl build --model`` adds fabrications (scripted fake model)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from trek.aio import closing_run
from trek.cli import app
from trek.ctrl import fabrication as F
from trek.ctrl.common import FICTITIOUS_DOMAINS, host_of
from trek.ctrl.pools import Pool, from_mini, read_pools
from trek.embeddings import WordLlamaEmbedder, make_embedder
from trek.llm import LLMClient
from trek.testing.fake_openai import FakeOpenAIServer
from trek.types import Document, Question

SPAN = "Harrowmere Rovers are pleased to announce the appointment of Dana Okafor as the club's new head coach."
WINDOW = "The club named Dana Okafor as coach. Dana Okafor starts on Tuesday. Tickets are on sale."


class FixedEmbedder:
    """Similarity decided by the test: identical texts get 1.0, different ones ``sim``."""

    name = "fixed"

    def __init__(self, sim: float):
        self.sim = sim

    def embed(self, texts):
        a, b = texts
        if a == b:
            return np.array([[1.0, 0.0], [1.0, 0.0]])
        return np.array([[1.0, 0.0], [self.sim, float(np.sqrt(1 - self.sim**2))]])


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for var in ("TREK_CACHE", "OPENAI_BASE_URL", "TREK_PROMPTS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def cand(answer: str, *reps: tuple[str, str]) -> dict:
    return {"wrong_answer": answer, "replacements": [{"find": f, "replace": r} for f, r in reps]}


@pytest.mark.parametrize(
    "candidate, kind",
    [
        (cand("Mira Lund", ("Dana Okafor", "Mira Lund")), "non_unique_span"),
        (cand("Mira Lund", ("not in the text", "x")), "span_not_found_in_window"),
        (cand("Mira Lund", ("The club", "The club")), "no_change"),
        (cand("Mira Lund"), "no_change"),
        (cand("dana okafor!", ("named Dana Okafor", "named Dana Okafor ")), "same_answer"),
        (cand("", ("named Dana Okafor", "named Mira Lund")), "empty_answer"),
        (cand("Used Name", ("named Dana Okafor", "named Used Name")), "repeated_answer"),
        (cand("Mira", ("The club named", "X"), ("club named Dana", "Y")), "overlapping_edits"),
    ],
)
def test_structural_checks_reject_each_kind(candidate, kind):
    with pytest.raises(F.Rejection) as e:
        F.check_candidate(WINDOW, candidate, ["Dana Okafor", "Okafor"], FixedEmbedder(1.0), 0.9, ["used name"])
    assert e.value.kind == kind


def test_similarity_floor_and_a_good_candidate():
    good = cand("Mira Lund", ("named Dana Okafor", "named Mira Lund"), ("Dana Okafor starts", "Mira Lund starts"))
    with pytest.raises(F.Rejection) as e:
        F.check_candidate(WINDOW, good, ["Dana Okafor"], FixedEmbedder(0.89), 0.90)
    assert e.value.kind == "low_similarity" and "0.890" in e.value.message
    edited, sim = F.check_candidate(WINDOW, good, ["Dana Okafor"], FixedEmbedder(0.95), 0.90)
    assert edited == "The club named Mira Lund as coach. Mira Lund starts on Tuesday. Tickets are on sale."
    assert sim == pytest.approx(0.95)


def test_wordllama_offline_similarity_separates_small_edits_from_rewrites():
    emb = make_embedder("wordllama")
    assert isinstance(emb, WordLlamaEmbedder)
    text = from_mini(question_ids=["mini:01"])[0].gold[0].text
    small = text.replace("Dana Okafor", "Mira Lund", 1)
    v = emb.embed([text, small, "Quarterly rainfall in the northern valleys rose by a tenth."])
    assert F.cosine(v[0], v[1]) >= 0.90 > F.cosine(v[0], v[2])


def test_window_length_is_the_bounded_median_of_nearby_historical_documents():
    q = Question(id="q", dataset="freshqa", question="?", answers=["a"], effective_year=2024)
    gold = Document(id="g", url="https://g.example/x", text="g", date="2024-06-01", role="gold")

    def hist(i, n, date):
        return Document(id=f"h{i}", url=f"https://h.example/{i}", text="x" * n, date=date, role="outdated")

    assert F.window_length(Pool(question=q, documents=[gold])) == 6000
    docs = [hist(i, 2000 + 1000 * i, f"20{10 + i}-01-01") for i in range(12)]  # 2,000..13,000 chars
    # dated 2010..2021; the ten nearest to 2024-06-01 are 2012..2021 (4,000..13,000 chars): median 8,500
    assert F.window_length(Pool(question=q, documents=[gold, *docs])) == 8500
    assert F.window_length(Pool(question=q, documents=[gold, hist(0, 100, "2020-01-01")])) == 1500
    assert F.window_length(Pool(question=q, documents=[gold, hist(0, 50000, "2020-01-01")])) == 12000


def test_cut_window_keeps_the_span_inside():
    text = " ".join(f"w{i}" for i in range(2000))
    a = text.index("w1000")
    lo, hi = F.cut_window(text, a, a + 5, 600)
    assert lo <= a and a + 5 <= hi and 500 <= hi - lo <= 600
    assert F.cut_window("short", 0, 5, 600) == (0, 5)


def script(bad_first: dict | None = None, verifier_ok: bool = True, name: str = "Priya Calloway") -> list[dict]:
    good = cand(name, ("appointment of Dana Okafor as", f"appointment of {name} as"))
    rules = [
        {"pattern": "Copy, character for character", "reply": json.dumps({"span": SPAN})},
        {"pattern": "previous attempt was rejected", "reply": json.dumps(good)},
        {"pattern": "Rewrite the passage", "reply": json.dumps(bad_first or good)},
        {"pattern": "Check an edited passage",
         "reply": json.dumps({"supports_declared_answer": verifier_ok, "internally_consistent": True,
                              "reason": "scripted"})},
    ]
    return rules


def fabricate(rules, **settings):
    pool = from_mini(question_ids=["mini:01"])[0]
    pool = pool.model_copy(update={"documents": [d for d in pool.documents if d.id != "mini:01:gold:2"]})
    with FakeOpenAIServer(script=rules) as srv:
        client = LLMClient("fake-model", base_url=srv.base_url, progress=False, max_retries=0)
        s = F.FabricationSettings(**{"target": 1, "max_attempts": 3, **settings})
        return closing_run(F.afabricate_pool(pool, client, FixedEmbedder(0.97), s), client)


@pytest.mark.parametrize("bad, kind", [
    (cand("Priya Calloway", ("Dana", "Priya")), "non_unique_span"),
    (cand("Okafor", ("appointment of Dana Okafor as", "appointment of Okafor as")), "same_answer"),
    (cand("Priya Calloway"), "no_change"),
])
def test_rejected_candidate_is_retried_with_the_reason_as_feedback(bad, kind):
    pool = fabricate(script(bad_first=bad))
    log = pool.notes["fabrication"]["attempts"]
    assert [e["outcome"] for e in log] == ["rejected", "accepted"]
    assert log[0]["kind"] == kind and log[1]["feedback"].startswith(kind)
    (doc,) = pool.role("fabrication")
    assert doc.supports_answer == "Priya Calloway" and "Priya Calloway as the club's new head coach" in doc.text
    assert "Dana Okafor as the club" not in doc.text and "Dana" not in doc.text and "Okafor" not in doc.text
    assert doc.metadata["synthetic"] and doc.metadata["source_doc"] == "mini:01:gold:1"
    assert doc.metadata["edits"] == [{"old": "appointment of Dana Okafor as", "new": "appointment of Priya Calloway as"}]
    # the model left the other mentions: the code made the dependent edits (first name by first name)
    assert {e["old"]: e["new"] for e in doc.metadata["dependent_edits"]} == {"Dana": "Priya"}
    assert "Priya has signed" in doc.text and "priya-calloway" in doc.url and "dana" not in doc.url
    assert host_of(doc.url) in FICTITIOUS_DOMAINS and doc.date == pool.gold[0].date


def test_a_model_fabrication_that_still_names_the_reference_is_refused(monkeypatch):
    # the model edits one mention; with the code's dependent edits switched off, "Dana has signed" is
    # left, and the consistency check refuses every attempt before the verifier is asked
    monkeypatch.setattr(F, "dependent_map", lambda q, v: [])
    pool = fabricate(script(), max_attempts=2)
    log = pool.notes["fabrication"]["attempts"]
    assert [e["kind"] for e in log] == ["names_reference", "names_reference"]
    assert "text: Dana" in log[0]["reason"] and log[1]["feedback"].startswith("names_reference")
    assert all("verifier" not in e for e in log) and pool.role("fabrication") == []


def test_verifier_false_rejects_every_attempt():
    pool = fabricate(script(verifier_ok=False), max_attempts=2)
    log = pool.notes["fabrication"]["attempts"]
    assert [e["kind"] for e in log] == ["verifier_rejected", "verifier_rejected"]
    assert pool.role("fabrication") == [] and pool.notes["fabrication"]["made"] == 0


def test_span_that_is_not_verbatim_is_rejected_then_relocated():
    rules = [{"pattern": r"Copy, character for character[\s\S]*rejected: span_not_found",
              "reply": json.dumps({"span": SPAN})},
             {"pattern": "Copy, character for character", "reply": json.dumps({"span": "Dana Okafor is coach."})},
             *script()[1:]]
    pool = fabricate(rules, min_window=200, max_window=400)  # a window shorter than the document
    assert [e.get("kind") for e in pool.notes["fabrication"]["attempts"]] == ["span_not_found", None]
    assert len(pool.role("fabrication")) == 1
    # a document that fits in its window (Mini's, with the default 1,500-character minimum) is the
    # window: no locate call is made, so the unusable span never comes back
    pool = fabricate(rules)
    assert [e.get("kind") for e in pool.notes["fabrication"]["attempts"]] == [None]
    assert pool.role("fabrication")[0].metadata["window"] == [0, len(pool.gold[0].text)]


def test_cli_build_with_a_scripted_model_adds_fabrications(tmp_path):
    out = tmp_path / "ctrl"
    # a name the wordllama similarity floor lets through once every "Dana" is replaced too
    with FakeOpenAIServer(script=script(name="Dina Okoro")) as srv:
        args = ["ctrl", "build", "--source", "mini", "--questions", "mini:01", "--out", str(out),
                "--model", "fake-model", "--base-url", srv.base_url, "--fabrications", "1",
                "--conditions", "SAA,SBA", "--fabricator", "model"]
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output
        assert "fabrication: 1 documents" in res.output and "skipped" not in res.output
        assert "fabrication similarity threshold 0.89 with wordllama-256 (calibrated" in res.output
        manifest = json.loads((out / "build.json").read_text())
        assert manifest["fabrication_similarity"]["min_similarity"] == 0.89
        assert manifest["fabrication_similarity"]["embedder"] == "wordllama-256"
        (pool,) = read_pools(out / "pools.jsonl")
        assert pool.notes["fabrication"]["min_similarity"] == 0.89
        first = (out / "contexts.jsonl").read_bytes()
        res = CliRunner().invoke(app, args)  # second build: answered from the cache, same bytes
        assert res.exit_code == 0 and (out / "contexts.jsonl").read_bytes() == first
    lines = [json.loads(x) for x in first.decode().splitlines()]
    assert [r["condition"] for r in lines] == ["SAA", "SBA"]
    roles = [d["role"] for d in lines[0]["documents"]]
    assert roles.count("fabrication") == 1 and roles.count("republication") == 5
    assert "Dina Okoro as the club's new head coach" in lines[0]["rendered"]
    (fab,) = [d for d in lines[0]["documents"] if d["role"] == "fabrication"]
    assert "Dana" not in fab["text"] and "Okafor" not in fab["text"] and "okafor" not in fab["url"]  # dependent edits


def test_a_failing_endpoint_leaves_the_question_pending_not_rejected():
    pool = fabricate([{"error": {"status": 503, "message": "overloaded"}}])
    note = pool.notes["fabrication"]
    assert note["pending"] and note["attempts"] == [] and pool.role("fabrication") == []


def test_openai_compatible_embeddings_endpoint():
    from _servers import LoopbackApp
    from aiohttp import web

    from trek.embeddings import OpenAIEmbedder

    seen = []

    async def handler(request):
        body = await request.json()
        seen.append(body)
        data = [{"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0]}
                for i, t in reversed(list(enumerate(body["input"])))]
        return web.json_response({"object": "list", "data": data, "model": body["model"],
                                  "usage": {"prompt_tokens": 1, "total_tokens": 1}})

    with LoopbackApp({"/v1/embeddings": handler}) as srv:
        emb = make_embedder("openai:text-embedding-3-small", base_url=srv.base_url)
        assert isinstance(emb, OpenAIEmbedder)
        v = emb.embed(["ab", "abcd"])
        assert v.tolist() == [[2.0, 1.0], [4.0, 1.0]]  # rows put back in input order
        assert seen[0]["model"] == "text-embedding-3-small" and seen[0]["input"] == ["ab", "abcd"]
    with pytest.raises(ValueError, match="unknown embedder"):
        make_embedder("bogus")


def test_offline_demo_fabrications_go_through_the_real_checks(tmp_path):
    from _scripts import load_script

    demo = load_script("demo_ctrl_build")
    build_with_demo_fabrications, demo_script = demo.build_with_demo_fabrications, demo.demo_script

    pools = from_mini(question_ids=["mini:01", "mini:02"])
    assert any("Variant: 5 of" in r.get("pattern", "") for r in demo_script(pools))
    a = build_with_demo_fabrications(pools, tmp_path / "a", conditions=("SAA",), count_tokens=False)
    build_with_demo_fabrications(pools, tmp_path / "b", conditions=("SAA",), count_tokens=False)
    assert (tmp_path / "a" / "contexts.jsonl").read_bytes() == (tmp_path / "b" / "contexts.jsonl").read_bytes()
    made = {p.question.id: len(p.role("fabrication")) for p in a.pools}
    assert made["mini:01"] >= 1  # mini:02's edits, completed with the dependent ones, fall below the similarity floor
    for p in a.pools:
        fabs = p.role("fabrication")
        assert len(fabs) <= 5
        answers = [d.supports_answer for d in fabs]
        assert len(set(answers)) == len(answers)  # each fabrication asserts another wrong answer
        for d in fabs:
            src = next(x for x in p.documents if x.id == d.metadata["source_doc"])
            lo, hi = d.metadata["window"]
            (edit,) = d.metadata["edits"]
            text = src.text[lo:hi].replace(edit["old"], edit["new"])
            for dep in d.metadata.get("dependent_edits", []):  # the code's dependent edits after the model's
                assert dep["old"] in text
            assert F.names_reference(p.question, d.supports_answer, d.url, d.title, d.text) == []
            assert d.metadata["similarity"] >= 0.89 and d.supports_answer in d.text
