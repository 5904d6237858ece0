"""The exact judge on hand-built cases, role by role, and its refusals (no model anywhere)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from trek import runs
from trek.annotations import AnnotatedPage, Annotations, MissingAnnotation, from_contexts, from_mini
from trek.exact import ExactJudge
from trek.graders.exact import VERSION, abstains, decide, normalize
from trek.pages import PageStore
from trek.query_targets import QueryTargets
from trek.trace.exact import ExactTrace
from trek.trace.inputs import TraceInput
from trek.types import Document, Grade, Question, RunMeta, Trajectory

Q = Question(id="t:1", dataset="freshqa", question="Who coaches the Lantern Rovers?", answers=["Ada Vale", "Vale"],
             effective_year=2024, gold_urls=["https://g.example/coach"])


def doc(n: str, role: str, answer: str | None, url: str, date: str | None, text: str, qid: str = "t:1",
        valid_from: str | None = None) -> Document:
    return Document(id=f"{qid}:{role}:{n}", url=url, date=date, text=text, question_id=qid, role=role,  # type: ignore[arg-type]
                    supports_answer=answer, metadata={"valid_from": valid_from or date})


DOCS = [
    doc("1", "gold", "Ada Vale", "https://g.example/coach", "2024-02-01", "Ada Vale named coach of the Rovers apple"),
    doc("1", "outdated", "Bo Reed", "https://o.example/coach", "2021-05-01", "Bo Reed coach of the Rovers banana"),
    doc("1", "relevance", "Cy Moss", "https://r.example/women", "2024-09-01", "Cy Moss women's coach cherry"),
    doc("1", "gold", "Dee Ash", "https://x.example/other", "2024-03-01", "another question's page", qid="t:2"),
]
Q2 = Question(id="t:2", dataset="sealqa", question="Who runs the other club?", answers=["Dee Ash"],
              gold_urls=["https://x.example/other"])


def annotations(docs=DOCS, questions=(Q, Q2)) -> Annotations:
    ann = Annotations("hand-built")
    for q in questions:
        ann.add(q, [AnnotatedPage.of(d) for d in docs if d.question_id == q.id])
    return ann


def verdict(response, q=Q, competing=("Ada Vale", "Bo Reed", "Cy Moss"), **kw):
    return decide(q, response, list(competing), **kw)


# -- grading ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("response", [
    "Ada Vale", "ada vale.", "The coach is Ada Vale", "VALE", "**Ada  Vale**", "It's Ada Vale (since 2024).",
])
def test_an_acceptable_answer_named_after_normalisation_is_correct(response):
    assert verdict(response).outcome == "correct"


@pytest.mark.parametrize("response", ["Bo Reed", ""])
def test_a_competing_answer_or_none_is_incorrect(response):
    assert verdict(response).outcome == "incorrect"


@pytest.mark.parametrize("response, named", [("Adam Vales", "Adam Vales"), ("The coach is Eve Tan", "Eve Tan")])
def test_an_unannotated_answer_is_undecided_with_its_reason(response, named):
    d = verdict(response)
    assert d.outcome == "undecided" and d.unannotated == [named]
    assert d.undecided == f"rule commitment: the response names {named!r}, which no annotation covers"
    assert d.undecided in d.explain() and json.loads(d.to_json())["undecided"] == d.undecided


def test_number_formats_and_number_words_are_read_as_numbers():
    q = Question(id="n", dataset="freshqa", question="How many stations?", answers=["17", "seventeen"])
    assert normalize("Thirty-one, two thousand and twenty four; 61,482") == ["31", "2024", "61482"]
    assert normalize("two ninety") == ["2", "90"]
    assert decide(q, "Seventeen stations", ["17", "15"]).correct
    assert decide(q, "It has 17 stops", ["17", "15"]).correct
    assert not decide(q, "fifteen", ["17", "15"]).correct
    assert not decide(q, "170 stations", ["17", "15"]).correct  # a whole number, not a prefix


def test_the_three_rules_on_a_response_that_names_two_answers():
    later = "Ada Vale, who replaced Bo Reed"
    earlier = "Bo Reed, then Ada Vale"
    assert verdict(later, rule="first").correct and not verdict(earlier, rule="first").correct
    assert not verdict(later, rule="any").correct and not verdict(earlier, rule="any").correct
    assert verdict(later, rule="mention").correct and verdict(earlier, rule="mention").correct
    with pytest.raises(ValueError, match="rule"):
        verdict("Ada Vale", rule="loose")


def test_the_longer_of_two_overlapping_answers_is_the_one_named():
    q = Question(id="m", dataset="sealqa", question="Which operator is largest?", answers=["Norvale Mobile"])
    competing = ["Norvale Mobile Business", "Cellaro"]
    assert decide(q, "Norvale Mobile", competing).correct
    d = decide(q, "Norvale Mobile Business", competing)
    assert d.outcome == "incorrect" and d.named == ["Norvale Mobile Business"]
    q2 = Question(id="s", dataset="sealqa", question="Which album?", answers=["Salt Lanterns by Mira Quell"])
    assert decide(q2, "Salt Lanterns by Mira Quell", ["Mira Quell", "Tin Bells"]).correct  # the shorter is inside


def test_repeating_the_options_of_the_question_names_none_of_them():
    q = Question(id="c", dataset="sealqa", question="Which of the towns Ardley, Brisk and Cole has the most people?",
                 answers=["Brisk"])
    competing = ["Ardley", "Cole"]
    assert decide(q, "Of the towns Ardley, Brisk and Cole, Cole is the biggest", competing).outcome == "incorrect"
    assert decide(q, "Of the towns Ardley, Brisk and Cole, Cole is the biggest", competing).named == ["Cole"]
    assert decide(q, "Brisk has the most people", competing).correct
    assert decide(q, "Of the towns Ardley, Brisk and Cole has the most people", competing).named == []


def test_sealqa_gives_not_attempted_to_a_refusal_and_freshqa_incorrect():
    seal = Q.model_copy(update={"dataset": "sealqa"})
    assert verdict("I don't know.", q=seal).outcome == "not_attempted"
    assert verdict("", q=seal).outcome == "not_attempted"
    assert verdict("Eve Tan", q=seal).outcome == "undecided"  # an attempt: no annotation says whether it is right
    assert verdict("Not sure, maybe Bo Reed", q=seal).outcome == "incorrect"  # a hedge naming a wrong answer
    assert verdict("I'm not sure, but probably Ada Vale", q=seal).outcome == "correct"  # hedged but right
    assert verdict("I don't know.").outcome == "incorrect"
    assert abstains("The pages do not mention it.") and not abstains("Ada Vale")


def test_a_false_premise_is_correct_only_when_the_response_rejects_it():
    fp = Question(id="f", dataset="infodeepseek", question="Which company acquired Brenmoor in 2024?",
                  answers=["No company acquired Brenmoor in 2024: the Calloway takeover was blocked."], false_premise=True)
    competing = ["Calloway Marine Group", "Tessaly Holdings"]
    assert decide(fp, "No company did; the Calloway Marine Group deal was blocked.", competing).correct
    assert decide(fp, "Brenmoor wasn't acquired in 2024.", competing).correct
    assert not decide(fp, "Calloway Marine Group acquired it.", competing).correct
    assert not decide(fp, "I don't know.", competing).correct
    assert decide(fp.model_copy(update={"dataset": "freshqa"}), "None, it never happened", competing).correct


def test_the_exact_judge_records_an_exact_grade():
    judge = ExactJudge(annotations(), rule="any")
    g = judge.grade(Q, "Ada Vale")
    assert isinstance(g, Grade)
    assert (g.outcome, g.method, g.grader, g.grader_version, g.judge_model) == ("correct", "exact", "exact", VERSION,
                                                                              "oracle")
    assert g.judge_settings == {"rule": "any", "annotations": "hand-built"}
    assert json.loads(g.judge_raw[0])["acceptable"] == ["Ada Vale"]
    assert g.usage.calls == 0
    assert judge.grade(Q, "Bo Reed").outcome == "incorrect"  # Bo Reed is an annotated competing answer


def test_the_exact_judge_is_a_judge_and_no_client():
    from trek.judges import Judge
    from trek.llm.client import LLMClient

    judge = ExactJudge(annotations())
    assert isinstance(judge, Judge) and not isinstance(judge, LLMClient)
    assert not hasattr(judge, "chat") and not hasattr(judge, "achat")  # nothing to send a request with
    assert judge.makes_calls is False and judge.http_calls == 0


def test_mini_is_annotated_for_every_question():
    ann = from_mini()
    for q in ann.questions.values():
        assert ann.question(q)
        gold = ann.gold(q)
        assert {p.url for p in gold} == set(q.gold_urls)


# -- refusals -------------------------------------------------------------------------------------------
def test_a_question_without_annotations_is_refused_by_name():
    ann = annotations()
    stranger = Question(id="wild:9", dataset="freshqa", question="?", answers=["x"])
    with pytest.raises(MissingAnnotation, match="'wild:9'.*not in the annotations"):
        ann.question(stranger)
    with pytest.raises(MissingAnnotation, match="reference answers"):
        ann.question(Q.model_copy(update={"answers": ["Someone Else"]}))
    bare = annotations(docs=[*DOCS, doc("2", "outdated", None, "https://o.example/2", "2020-01-01", "no label")])
    with pytest.raises(MissingAnnotation, match=r"'t:1:outdated:2'.*supports_answer"):
        bare.question(Q)
    undated = annotations(docs=[doc("1", "gold", "Ada Vale", "https://g.example/coach", None, "x"), *DOCS[1:]])
    with pytest.raises(MissingAnnotation, match="gold document 't:1:gold:1' has no date"):
        undated.gold(Q)
    with pytest.raises(MissingAnnotation, match="not in the annotations"):
        ExactJudge(ann).grade(stranger, "x")


def test_grading_a_run_with_questions_it_has_no_annotations_for_is_refused_before_any_grade(tmp_path):
    from trek.grading import run_grading

    rd = tmp_path / "run"
    runs.write_records(rd, runs.QUESTIONS, [Q, Question(id="wild:9", dataset="freshqa", question="?", answers=["x"])])
    runs.write_records(rd, runs.ANSWERS, [Trajectory(question_id=q, model="m", final_answer="Ada Vale")
                                           for q in ("t:1", "wild:9")])
    with pytest.raises(MissingAnnotation, match="wild:9"):
        run_grading(rd, ExactJudge(annotations()), progress=False)
    assert not (rd / runs.GRADES).exists()


# -- TrekTrace roles --------------------------------------------------------------------------------------
@pytest.fixture
def oracle(tmp_path):
    store = PageStore()
    store.add_documents(DOCS)
    rd = tmp_path / "run"
    rd.mkdir()
    runs.write_meta(rd, RunMeta(run_id="run", kind="wild", config={"system": {
        "system": "agentic", "search": "local", "results_per_search": 1, "corpus": store.fingerprint()}}))
    return ExactTrace(annotations(), store, rd)


def case(collection, queries=()) -> TraceInput:
    return TraceInput(question=Q, trajectory=Trajectory(question_id=Q.id, model="m"), grade=None,  # type: ignore[arg-type]
                      queries=list(queries), collection=list(collection))


def test_evidence_is_a_retrieved_page_annotated_as_supporting_the_reference(oracle):
    yes, _ = oracle.evidence_match(Q, ["https://o.example/coach", "https://g.example/coach/"])
    assert yes["evidence_match"] is True and yes["equivalent_urls"] == ["https://g.example/coach/"]
    no, _ = oracle.evidence_match(Q, ["https://o.example/coach", "https://r.example/women", "https://x.example/other"])
    assert no["evidence_match"] is False and no["equivalent_urls"] == []
    # a page of the question that is not gold but states the reference counts; an outdated one never does
    extra = ExactTrace(annotations([*DOCS, doc("1", "republication", "Ada Vale", "https://p.example/1", "2024-05-01",
                                               "copy"), doc("3", "outdated", "Ada Vale", "https://o.example/3",
                                                            "2019-01-01", "old")]), oracle.store, oracle.run_dir)
    assert extra.evidence_match(Q, ["https://p.example/1"])[0]["evidence_match"] is True
    assert extra.evidence_match(Q, ["https://o.example/3"])[0]["evidence_match"] is False


TARGETS = QueryTargets("t:1", entity=("Lantern Rovers", "Rovers"), attribute=("coach", "manager"),
                       years=frozenset({2024, 2025}), competing=("Rovers Women",))


def with_targets(oracle, targets=TARGETS) -> ExactTrace:
    ann = oracle.annotations
    ann.targets = {"t:1": targets}
    return ExactTrace(ann, oracle.store, oracle.run_dir)


def test_query_adequacy_reads_the_queries_and_keeps_the_rank_only_as_a_diagnostic(oracle):
    judge = with_targets(oracle)
    good, detail = judge.query_adequacy(Q, ["banana", "Rovers coach 2024"])
    assert good["query_adequate"] is True and detail["missed"] == []
    # the rank diagnostic: "Rovers coach 2024" brings up the gold page second on the local index
    assert detail["retrievable"]["best_rank"] == 2 and detail["retrievable"]["best"]["query"] == "Rovers coach 2024"
    # "apple" is the gold page's own word (rank 1) but names neither entity nor fact: not adequate
    bad, detail = judge.query_adequacy(Q, ["apple"])
    assert bad["query_adequate"] is False and detail["retrievable"]["best_rank"] == 1
    assert detail["missed"] == ["entity", "attribute"] and "Not adequate" in bad["reason"]


def test_the_query_verdict_does_not_depend_on_the_run_depth_or_backend(oracle, tmp_path):
    verdicts = []
    for n, system in enumerate(({"system": "agentic", "search": "local", "results_per_search": 1},
                                {"system": "agentic", "search": "local", "results_per_search": 50},
                                {"system": "search-then-read", "search": "local", "top_k": 2},
                                {"system": "agentic", "search": "tavily"}, None)):
        rd = tmp_path / f"r{n}"
        rd.mkdir()
        runs.write_meta(rd, RunMeta(run_id="r", kind="wild", config={"system": system} if system else {}))
        judge = ExactTrace(with_targets(oracle).annotations, oracle.store, rd)
        judge.check([case([], ["Rovers manager"])], diagnostic=False, analysis=True, stale=False)
        verdicts.append([judge.query_adequacy(Q, qs)[0]["query_adequate"]
                         for qs in (["Rovers manager"], ["2024-12-31"], ["Rovers Women coach"], ["apple"])])
    assert verdicts == [[True, False, False, False]] * 5
    # the diagnostic is not taken off the local index, and says why
    tavily = ExactTrace(oracle.annotations, oracle.store, tmp_path / "r3")
    assert tavily.query_adequacy(Q, ["Rovers manager"])[1]["retrievable"]["not_taken"].endswith("not the local index")


def test_a_question_without_query_targets_is_refused_naming_it(oracle):
    oracle.annotations.targets = {}
    with pytest.raises(MissingAnnotation, match="'t:1' has no query targets"):
        oracle.check([case([], ["Rovers coach"])], diagnostic=False, analysis=True, stale=False)
    oracle.check([case([], [])], diagnostic=False, analysis=True, stale=False)  # no query: nothing to read


def test_a_retrieved_page_that_is_not_annotated_is_refused(oracle):
    oracle.check([case(["https://g.example/coach"])], diagnostic=True, analysis=False, stale=False)
    with pytest.raises(MissingAnnotation, match="1 retrieved page.*https://web.example/page"):
        oracle.check([case(["https://g.example/coach", "https://web.example/page"])], diagnostic=True,
                     analysis=False, stale=False)


def test_probe_verdicts_follow_the_grading_rule(oracle):
    assert oracle.verdict(Q, "The coach is Ada Vale.")[0]["correct"] is True
    assert oracle.verdict(Q, "Bo Reed")[0]["correct"] is False
    assert oracle.verdict(Q, None)[0]["correct"] is False


def test_the_stale_check_looks_for_a_newer_page_of_the_question_with_another_answer(oracle):
    assert oracle.stale(Q)[0]["supports_reference"] is True  # the newer relevance page answers another question
    newer = doc("4", "outdated", "Bo Reed", "https://o.example/4", "2024-06-01", "Bo Reed back as coach")
    flagged = ExactTrace(annotations([*DOCS, newer]), oracle.store, oracle.run_dir)
    value, detail = flagged.stale(Q)
    assert value["supports_reference"] is False and detail["newer"] == ["t:1:outdated:4"]
    later = doc("5", "outdated", "Bo Reed", "https://o.example/5", "2025-02-01", "Bo Reed back in 2025")
    after_year = ExactTrace(annotations([*DOCS, later]), oracle.store, oracle.run_dir)
    assert after_year.stale(Q)[0]["supports_reference"] is True  # true only after the effective year
    same = doc("6", "gold", "Ada Vale", "https://g.example/6", "2024-08-01", "Ada Vale renews")
    assert ExactTrace(annotations([*DOCS, same]), oracle.store, oracle.run_dir).stale(Q)[0]["supports_reference"]


# -- Ctrl contexts -----------------------------------------------------------------------------------------
def test_ctrl_contexts_add_their_documents_answers(tmp_path):
    from trek.contexts import Context, ContextDocument, sha256_of

    docs = [ContextDocument(doc_id="t:1:fabrication:1", role="fabrication", url="https://f.example/1",
                            date="2024-03-01", synthetic=True, answer="Ada Vales", text="Ada Vales named coach")]
    rendered = "[Document 1]\nAda Vales named coach"
    ctx = Context(question_id="t:1", dataset="freshqa", condition="SAA", documents=docs, n_distractors=1,
                  rendered=rendered, sha256=sha256_of(rendered))
    path = tmp_path / "contexts.jsonl"
    path.write_text(ctx.model_dump_json() + "\n")
    ann = annotations().merged(from_contexts(path, {"t:1": Q}, label="contexts.jsonl"))
    assert "Ada Vales" in ann.competing(Q)
    assert ann.page("https://f.example/1").role == "fabrication"
    assert "contexts contexts.jsonl" in ann.source
    # the fabricated answer is its own (longer) name, not the reference
    assert not decide(Q, "Ada Vales", ann.competing(Q)).correct


def test_annotated_page_keeps_dates():
    p = AnnotatedPage.of(DOCS[0])
    assert p.date == dt.date(2024, 2, 1) and p.valid_from == dt.date(2024, 2, 1) and p.role == "gold"


def test_an_undecided_grade_carries_its_reason():
    g = ExactJudge(annotations()).grade(Q, "Ossian Gray coaches them.")
    assert g.outcome == "undecided" and g.grader_version == "exact-5"
    raw = json.loads(g.judge_raw[0])
    assert raw["undecided"] == "rule commitment: the response names 'Ossian Gray', which no annotation covers"
    assert raw["unannotated"] == ["Ossian Gray"]
