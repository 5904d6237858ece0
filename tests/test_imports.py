"""trek import on the example logs (every field of issue 24, hidden cases included), malformed
input, question files, pages, validation and the shipped schema. No network."""

from __future__ import annotations

import json
import sqlite3
import zipfile
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.imports import ImportFailure, import_run, load_questions, parse_mapping
from trek.imports.page_files import add_pages, read_sources
from trek.imports.schema import SCHEMA_FILE, schema_text, validate_run
from trek.pages import PageStore
from trek.types import RecordError, Trajectory

EX = Path(__file__).resolve().parents[1] / "examples"
MAP = "id=qid,question=text,answers=gold,gold_urls=sources,effective_year=year"
G1, G2, G3 = ("https://lakeside-news.example/marathon-2025", "https://harbor-city.example/bridge-opening",
              "https://riverbend-sports.example/cup-final")


def run(fmt: str, file: str, out: Path, **kw) -> dict[str, Trajectory]:
    if fmt != "inspect-ai" and "questions" not in kw:
        kw.update(questions=EX / "questions.csv", mapping=parse_mapping(MAP))
    import_run(fmt, [EX / file], out, **kw)
    assert validate_run(out) == []
    return runs.load_answers(out)


def pages(out: Path) -> dict[str, tuple[str, str, str]]:
    with sqlite3.connect(out / "pages.sqlite") as c:
        return {u: (st, src, t) for u, st, src, t in c.execute("SELECT url, status, source, text FROM pages")}


def queries(t: Trajectory) -> list[str]:
    return [c.query for c in t.search_calls]


# -- each format -------------------------------------------------------------------------------
def test_openai_responses(tmp_path):
    a = run("openai-responses", "openai-responses.jsonl", tmp_path / "r")
    t1, t2, t3 = a["lake-1"], a["lake-2"], a["lake-3"]
    # search with query + queries + sources (tracking parameter removed), open_page, the older `find`
    assert queries(t1) == ["Lakeside Marathon 2025 winner", "Lakeside Marathon results 2025"]
    assert [r.url for r in t1.search_calls[0].results] == [G1, "https://runners-weekly.example/lakeside-preview"]
    assert [(s.kind, s.tool, s.url, s.query) for s in t1.steps if s.kind == "open"] == [
        ("open", "open_page", G1, None), ("open", "find", G1, "winner")]
    assert t1.citations[0].url == G1 and t1.citations[0].title == "Lakeside Marathon 2025"
    assert t1.final_answer == "Mara Quill won the 2025 Lakeside Marathon."
    assert (t1.usage.prompt_tokens, t1.usage.completion_tokens, t1.usage.cached_tokens,
            t1.usage.reasoning_tokens) == (5120, 410, 1024, 256)
    assert t1.coverage.model_dump(exclude={"notes"}) == {"queries": "all", "results": "all", "page_text": "none",
                                                         "url_identity": "urls"}
    assert t1.source.model_dump() == {"format": "openai-responses", "file": str(EX / "openai-responses.jsonl"),
                                      "record": 1, "record_id": "resp_lake1", "model": "gpt-5-mini-2025-08-07"}
    # no `sources`: results are known only through citations
    assert t2.search_calls[0].results == [] and t2.coverage.results == "cited_only"
    assert any("sources" in n for n in t2.coverage.notes)
    assert t2.retrieved_urls == ["https://harbor-city.example/old-plans"]
    assert [s.tool for s in t2.steps] == ["web_search", "find_in_page", None]
    # Agents SDK run items; a failed search call is an error result
    assert queries(t3) == ["Riverbend Cup 2025 final", "Riverbend Cup final result"]
    assert t3.search_calls[0].error == "web_search_call failed" and t3.search_calls[1].results[0].url == G3
    assert t3.model == "unknown" and runs.read_meta(tmp_path / "r").model == "gpt-5-mini-2025-08-07"
    assert runs.read_meta(tmp_path / "r").kind == "import"


def test_anthropic_messages(tmp_path):
    out = tmp_path / "a"
    a = run("anthropic-messages", "anthropic-messages.jsonl", out)
    t1, t2, t3 = a["lake-1"], a["lake-2"], a["lake-3"]
    assert list(runs.load_questions(out)) == ["lake-1", "lake-2", "lake-3"]  # wrappers in another order
    r = t2.search_calls[0].results
    assert [(x.url, x.title, x.date) for x in r] == [(G2, "Harbor Bridge opens", "March 3, 2025"),
                                                    ("https://harbor-city.example/old-plans", "Bridge plans",
                                                     "2019-05-01")]
    assert t2.citations[0].cited_text == "The bridge opened with six lanes of traffic."
    assert t2.final_answer == "The new Harbor Bridge has six lanes."  # the text after the last tool result
    assert t2.coverage.page_text == "encrypted" and t2.coverage.results == "all"
    # two turns: an error result, then a search and a web_fetch with its text
    assert [(c.query, c.error) for c in t1.search_calls] == [("Lakeside Marathon 2025", "too_many_requests"),
                                                             ("Lakeside Marathon 2025 winner", None)]
    assert [s.round for s in t1.steps] == [1, 2, 2, 2] and t1.opened_urls == [G1]
    assert t1.coverage.page_text == "snippet"  # fetched in full, the other page cited
    assert t1.usage.prompt_tokens == 1800 + 100 + 3200 + 100 and t1.usage.cached_tokens == 200
    assert t3.citations == [] and t3.coverage.page_text == "encrypted"
    p = pages(out)
    assert p["https://harbor-city.example/old-plans"][:2] == ("encrypted", "log")
    assert p[G2] == ("ok", "snippet", "The bridge opened with six lanes of traffic.")
    assert p[G1][:2] == ("ok", "log") and "2:21:09" in p[G1][2]


def test_chat_completions(tmp_path):
    a = run("chat-completions", "chat-completions.jsonl", tmp_path / "c")
    t1 = a["lake-1"]
    assert t1.search_calls == [] and [c.url for c in t1.citations] == [
        G1, "https://runners-weekly.example/lakeside-preview"]
    assert t1.retrieved_urls == [c.url for c in t1.citations]
    assert t1.coverage.model_dump(exclude={"notes"}) == {"queries": "none", "results": "cited_only",
                                                         "page_text": "none", "url_identity": "urls"}
    assert a["lake-3"].citations == [] and a["lake-3"].coverage.queries == "none"


def test_gemini_redirects(tmp_path):
    a = run("gemini", "gemini.json", tmp_path / "g")
    t1, t2, t3 = a["lake-1"], a["lake-2"], a["lake-3"]
    assert queries(t1) == ["Lakeside Marathon 2025 winner"] and t1.final_answer.startswith("Mara Quill")
    assert "Thinking" not in t1.final_answer  # the thought part is not the answer
    assert len(t1.retrieved_urls) == 2 and [c.title for c in t1.citations] == ["lakeside-news.example"]
    assert t1.coverage.url_identity == "redirects" and t1.coverage.results == "cited_only"
    assert t1.usage.reasoning_tokens == 30 and t1.source.model == "gemini-2.5-flash"
    assert queries(t2) == ["Harbor Bridge lanes", "Harbor Bridge opening 2025"]  # snake_case dump
    assert t3.search_calls == [] and t3.coverage.url_identity == "urls"


def test_inspect_ai_eval_and_json_agree(tmp_path):
    a = run("inspect-ai", "inspect-ai.eval", tmp_path / "e")
    b = run("inspect-ai", "inspect-ai.json", tmp_path / "j")
    strip = lambda t: t.model_dump(exclude={"created_at", "source"})  # noqa: E731
    assert {k: strip(v) for k, v in a.items()} == {k: strip(v) for k, v in b.items()}
    qs = runs.load_questions(tmp_path / "e")
    assert qs["lake-1"].answers == ["Mara Quill", "M. Quill"] and qs["lake-1"].gold_urls == [G1]
    assert qs["lake-2"].question == "How many lanes does the new Harbor Bridge have?"  # attachment resolved
    assert qs["lake-2"].answers == ["six", "6"] and qs["lake-3"].question.startswith("Which team")
    assert {q.grader for q in qs.values()} == {"generic"} and qs["lake-1"].dataset == "lakeside"
    t1, t2, t3 = a["lake-1"], a["lake-2"], a["lake-3"]
    # web_search tool with citations, web_browser_go, a click on a link resolved to its URL
    assert [r.url for r in t1.search_calls[0].results] == ["https://runners-weekly.example/lakeside-preview",
                                                            "https://lakeside-news.example/"]
    assert t1.opened_urls == ["https://lakeside-news.example/", G1]
    assert [s.round for s in t1.steps] == [1, 2, 3, 4]
    assert t1.details["inspect_scores"] == {"model_graded_qa": "C"}
    assert t1.source.record_id == "lake-1/epoch 1" and t1.usage.prompt_tokens == 4000
    # provider-native OpenAI search without sources, `find`, an attachment in the answer
    assert queries(t2) == ["Harbor Bridge lanes"] and t2.coverage.results == "cited_only"
    assert [s.tool for s in t2.steps if s.kind == "open"] == ["find"]
    assert t2.final_answer == "The bridge has four lanes."
    assert t2.citations[0].url == "https://harbor-city.example/old-plans"  # tracking parameter removed
    # a tool error, then an Anthropic-native search with encrypted results
    assert [(c.query, c.error) for c in t3.search_calls] == [
        ("Riverbend Cup 2025", "unknown: search provider timed out"), ("Riverbend Cup 2025 winner", None)]
    p = pages(tmp_path / "e")
    assert p[G1][:2] == ("ok", "log") and "2:21:09" in p[G1][2]  # the clicked page's text
    assert p["https://riverbend-sports.example/semi-finals"][:2] == ("ok", "snippet")


def test_inspect_epochs_and_questions_file(tmp_path):
    src = json.loads((EX / "inspect-ai.json").read_text())
    second = [dict(s, epoch=2, output={"choices": [{"message": {"role": "assistant", "content": "Epoch two."}}]})
              for s in src["samples"]]
    (tmp_path / "two.json").write_text(json.dumps({**src, "samples": src["samples"] + second}))
    rep = import_run("inspect-ai", [tmp_path / "two.json"], tmp_path / "e2", epoch=2)
    assert rep.skipped == 3 and {t.final_answer for t in rep.trajectories} == {"Epoch two."}
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"id": "lake-1", "question": "Winner?", "answers": "Mara Quill"}) + "\n")
    with pytest.raises(ImportFailure, match=r"sample 2.*'lake-2' is not a question of"):
        import_run("inspect-ai", [EX / "inspect-ai.json"], tmp_path / "e3", questions=q)


# -- malformed input: a clear error naming file and record, nothing written ----------------------
def bad(tmp_path: Path, name: str, text: str | bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


@pytest.mark.parametrize(("fmt", "name", "content", "match"), [
    ("gemini", "g.json", (EX / "gemini.json").read_text()[:900], r"g\.json: not valid JSON .*truncated"),
    ("openai-responses", "r.jsonl", (EX / "openai-responses.jsonl").read_text().splitlines()[0] + "\n{\"id\": 1,",
     r"r\.jsonl, line 2: not valid JSON"),
    ("openai-responses", "r.json", json.dumps([{"id": "x", "output": [{"type": "reasoning"}]}] * 3),
     r"r\.json, record 1: no 'message' item"),
    ("chat-completions", "c.json", json.dumps([{"id": "x", "choices": []}] * 3), r"c\.json, record 1: .*no choice"),
    ("anthropic-messages", "a.jsonl", json.dumps({"question_id": "lake-9", "record": {"content": []}}) + "\n",
     r"a\.jsonl, line 1: field 'question_id': 'lake-9' is not a question"),
    ("gemini", "g2.json", json.dumps(json.loads((EX / "gemini.json").read_text())[:2]),
     r"2 record\(s\) in .* but 3 question"),
    ("chat-completions", "c4.jsonl", "".join([(EX / "chat-completions.jsonl").read_text()] * 2),
     r"6 record\(s\) in .*c4\.jsonl but 3 question"),  # read one at a time, counted to the end
])
def test_malformed_input_names_file_and_record(tmp_path, fmt, name, content, match):
    p = bad(tmp_path, name, content)
    with pytest.raises(ImportFailure, match=match):
        import_run(fmt, [p], tmp_path / "out", questions=EX / "questions.csv", mapping=parse_mapping(MAP))
    assert not (tmp_path / "out").exists()
    assert [x.name for x in tmp_path.iterdir() if x.name.startswith(".")] == []  # no staging folder left


def test_broken_inspect_logs(tmp_path):
    with zipfile.ZipFile(tmp_path / "empty.eval", "w") as z:
        z.writestr("header.json", json.dumps({"eval": {"task": "t"}}))
    with pytest.raises(ImportFailure, match=r"empty\.eval: the log holds no samples"):
        import_run("inspect-ai", [tmp_path / "empty.eval"], tmp_path / "o")
    cut = bad(tmp_path, "cut.eval", (EX / "inspect-ai.eval").read_bytes()[:1000])
    with pytest.raises(ImportFailure, match=r"cut\.eval: not an inspect \.eval zip"):
        import_run("inspect-ai", [cut], tmp_path / "o")
    src = json.loads((EX / "inspect-ai.json").read_text())
    src["samples"][1]["messages"][0]["content"] = "attachment://missing"
    p = bad(tmp_path, "att.json", json.dumps(src))
    with pytest.raises(ImportFailure, match=r"att\.json, sample 2 \(sample id 'lake-2'\): attachment://missing"):
        import_run("inspect-ai", [p], tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_unknown_format_and_an_existing_run(tmp_path):
    r = CliRunner().invoke(app, ["import", "langchain", str(EX / "gemini.json"), "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "unknown format 'langchain'" in r.output
    out = tmp_path / "run"
    run("gemini", "gemini.json", out)
    before = (out / "answers.jsonl").read_bytes()
    with pytest.raises(ImportFailure, match="already exists"):
        run("gemini", "gemini.json", out)
    p = bad(tmp_path, "g.json", "[{")
    with pytest.raises(ImportFailure):
        import_run("gemini", [p], out, questions=EX / "questions.csv", mapping=parse_mapping(MAP), replace=True)
    assert (out / "answers.jsonl").read_bytes() == before  # the previous run is untouched
    import_run("chat-completions", [EX / "chat-completions.jsonl"], out, questions=EX / "questions.csv",
               mapping=parse_mapping(MAP), replace=True)
    assert runs.read_meta(out).config["format"] == "chat-completions"


# -- questions ---------------------------------------------------------------------------------
def test_question_files_with_a_mapping(tmp_path):
    qs = load_questions(EX / "questions.csv", parse_mapping(MAP))
    assert [(q.id, q.answers, q.gold_urls, q.effective_year, q.dataset, q.grader) for q in qs][1] == (
        "lake-2", ["six", "6"], [G2], 2025, "custom", "generic")
    p = tmp_path / "q.jsonl"
    p.write_text(json.dumps({"n": 1, "q": "Who?", "a": ["X", "Y"], "extra": 3}) + "\n"
                 + json.dumps({"n": 2, "q": "Where?", "a": "Z|W", "dataset": "freshqa"}) + "\n")
    qs = load_questions(p, parse_mapping("id=n,question=q,answers=a"), dataset="mine")
    assert [(q.id, q.answers, q.dataset, q.grader, q.metadata) for q in qs] == [
        ("1", ["X", "Y"], "mine", "generic", {"extra": 3}), ("2", ["Z", "W"], "freshqa", None, {})]
    with pytest.raises(RecordError, match=r"q\.jsonl, line 1: field 'answers': no column 'answers'"):
        load_questions(p, parse_mapping("id=n,question=q"))
    c = tmp_path / "q.csv"
    c.write_text("id,question,answers\n1,Who?,\n")
    with pytest.raises(RecordError, match=r"q\.csv, line 2: .*answers"):
        load_questions(c)
    c.write_text("id,question,answers\n1,Who?,A\n1,Again?,B\n")
    with pytest.raises(RecordError, match=r"line 3: field 'id': duplicate question id '1'"):
        load_questions(c)
    with pytest.raises(ValueError, match="'colour' is not a question field"):
        parse_mapping("colour=c")


# -- pages -------------------------------------------------------------------------------------
def test_pages_add_jsonl_html_and_text(tmp_path):
    out = tmp_path / "r"
    run("anthropic-messages", "anthropic-messages.jsonl", out)
    assert add_pages(out, [EX / "pages.jsonl"]) == len((EX / "pages.jsonl").read_text().splitlines())
    assert pages(out)[G2][:2] == ("ok", "corpus")  # the snippet is replaced by the full text
    html = tmp_path / "p.html"
    html.write_text('<html><head><title>Cup final</title><link rel="canonical" href="https://riverbend-sports.example/'
                    'report"></head><body><article><p>' + "The Otters won the final after a long season. " * 8
                    + "</p></article></body></html>")
    txt = tmp_path / "p.txt"
    txt.write_text("Plain page text.")
    assert add_pages(out, [html]) == 1 and add_pages(out, [txt], url="https://x.example/p") == 1
    p = pages(out)
    assert "Otters won the final" in p["https://riverbend-sports.example/report"][2]
    assert p["https://x.example/p"] == ("ok", "corpus", "Plain page text.")
    with pytest.raises(RecordError, match=r"p\.txt: no URL"):
        read_sources([txt])
    broken = tmp_path / "b.jsonl"
    broken.write_text('{"url": "https://a.example", "text": "t", "date": "May 5"}\n')
    with pytest.raises(RecordError, match=r"b\.jsonl, line 1: field 'date'"):
        read_sources([broken])
    r = CliRunner().invoke(app, ["pages", "add", str(out), str(broken)])
    assert r.exit_code == 2 and "line 1" in r.output


def test_pages_add_takes_minis_documents_and_notes_the_fields_it_ignores(tmp_path):
    docs = Path(__file__).resolve().parents[1] / "data" / "mini" / "documents.jsonl"
    n_lines = len(docs.read_text(encoding="utf-8").splitlines())
    out = tmp_path / "r"
    run("anthropic-messages", "anthropic-messages.jsonl", out)
    r = CliRunner().invoke(app, ["pages", "add", str(out), str(docs)])
    assert r.exit_code == 0, r.output
    stored, note = r.output.strip().splitlines()
    n_urls = len({json.loads(x)["url"] for x in docs.read_text(encoding="utf-8").splitlines()})
    assert stored.startswith(f"stored {n_urls} page(s)")
    assert note.startswith(f"note: {docs}: ignored field(s) ") and f"of {n_lines} line(s)" in note
    assert "question_id" in note and "metadata" in note and "url," not in note.split("(")[0]
    first = json.loads(docs.read_text(encoding="utf-8").splitlines()[0])
    assert PageStore(out / "pages.sqlite").get(first["url"]).text == first["text"]


def test_encrypted_and_snippet_pages_with_and_without_fetching(tmp_path):
    out = tmp_path / "a"
    run("anthropic-messages", "anthropic-messages.jsonl", out)
    store = PageStore(out / "pages.sqlite")
    enc = store.get("https://harbor-city.example/old-plans")
    assert not enc.available and "encrypted" in enc.text
    assert store.get(G2).available and store.get(G2).source == "snippet"
    store.close()

    def handler(request: httpx.Request) -> httpx.Response:
        if "old-plans" in str(request.url):
            return httpx.Response(200, text="The old plans had four lanes.", headers={"content-type": "text/plain"})
        return httpx.Response(404)

    live = PageStore(out / "pages.sqlite", fetch=True, transport=httpx.MockTransport(handler))
    assert live.get("https://harbor-city.example/old-plans").text == "The old plans had four lanes."
    kept = live.get(G2)  # the fetch fails: the snippet stays
    assert kept.source == "snippet" and "six lanes" in kept.text
    assert live.lookup(G2).source == "snippet"
    live.close()


# -- validation and the schema -----------------------------------------------------------------
def test_validate_names_file_line_and_field(tmp_path):
    out = tmp_path / "r"
    run("chat-completions", "chat-completions.jsonl", out)
    lines = (out / "answers.jsonl").read_text().splitlines()
    t = json.loads(lines[1])
    t["coverage"]["queries"] = "most"
    t["status"] = 7
    lines[1] = json.dumps(t)
    u = json.loads(lines[2])
    u["question_id"] = "lake-99"
    lines[2] = json.dumps(u)
    (out / "answers.jsonl").write_text("\n".join(lines) + "\n")
    problems = [str(p) for p in validate_run(out)]
    assert any("answers.jsonl, line 2: field 'coverage.queries'" in p for p in problems)
    assert any("answers.jsonl, line 2: field 'status'" in p for p in problems)
    assert any("answers.jsonl, line 3: field 'question_id': 'lake-99'" in p for p in problems)
    r = CliRunner().invoke(app, ["validate", str(out)])
    assert r.exit_code == 2 and "3 problem(s)" in r.output
    assert CliRunner().invoke(app, ["validate", str(tmp_path / "none")]).exit_code == 2


def test_a_hand_written_run_and_coverage_contradictions(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "mine", "kind": "import"}) + "\n")
    (tmp_path / "questions.jsonl").write_text(json.dumps(
        {"id": "q1", "dataset": "mine", "question": "Who?", "answers": ["X"], "grader": "generic"}) + "\n")
    t = {"question_id": "q1", "model": "my-agent", "schema_version": 1, "final_answer": "X",
         "search_calls": [{"query": "", "backend": "mine"}],
         "coverage": {"queries": "all", "results": "all", "page_text": "snippet", "url_identity": "urls"}}
    (tmp_path / "answers.jsonl").write_text(json.dumps(t) + "\n")
    assert [str(p) for p in validate_run(tmp_path)] == [
        f"{tmp_path / 'answers.jsonl'}, line 1: field 'coverage.queries': is 'all' but a search call has no query "
        "('some')"]
    t["schema_version"] = 2
    (tmp_path / "answers.jsonl").write_text(json.dumps(t) + "\n")
    assert "newer than this Trek reads" in str(validate_run(tmp_path)[0])


def test_the_shipped_schema_is_the_generated_one():
    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_text()
    doc = json.loads(schema_text())
    cov = doc["$defs"]["Coverage"]["properties"]
    assert cov["queries"]["enum"] == ["all", "some", "none"]
    assert cov["results"]["enum"] == ["all", "cited_only", "none"]
    assert cov["page_text"]["enum"] == ["full", "snippet", "encrypted", "none"]
    assert cov["url_identity"]["enum"] == ["urls", "document_ids", "redirects"]
    assert set(doc["$defs"]["Citation"]["properties"]) == {"url", "title", "cited_text"}


def test_runs_without_the_new_fields_read_as_fully_observed():
    t = Trajectory(question_id="q", model="m")
    assert t.observed.model_dump(exclude={"notes"}) == {"queries": "all", "results": "all", "page_text": "full",
                                                        "url_identity": "urls"}
    dumped = json.loads(t.model_dump_json())
    assert not {"schema_version", "citations", "source", "coverage"} & set(dumped)
