"""A small, fictional TrekBench-Wild world for the "A full run, step by step" test (docs/full-run.md).

Six questions, two per source dataset, written in each dataset's own file format (FreshQA CSV,
InfoDeepSeek JSON, SealQA parquet) with a few rows the paper's filters leave out; a web of pages
(a gold page and an outdated page per question) served through ``httpx.MockTransport``; a fake
Tavily search API; and the scripts of the fake OpenAI servers: the evaluated model (closed book
and agentic search) on one, the judges (dataset graders, TrekTrace judges) on the other.

Every fact, name and URL is invented (``.example`` domains, which never resolve). What each
scripted model does is a fixed plan per question (:data:`PLANS`), chosen so that the runs hold
right and wrong answers and the trace shows several labels; the numbers are fixtures, never
results.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODEL = "Qwen/Qwen3-8B"  # the evaluated model the README names
JUDGE = "Qwen/Qwen3-32B"  # the judges' model the README names


@dataclass(frozen=True)
class Plan:
    """One question and what happens to it.

    ``results``: what the web search returns for it (``gold``/``old`` pages, in rank order);
    ``opens``: the page the agentic model opens; ``closed``/``agentic``: which answer the model
    gives without and with search (``right`` or ``stale``); ``adequate``: the analysis judge's
    view of its queries; ``gold_only``/``noise``: the probe answers.
    """

    dataset: str
    question: str
    right: str
    stale: str
    slug: str
    year: int
    results: tuple[str, ...]
    opens: str
    closed: str
    agentic: str
    adequate: bool = True
    gold_only: str = "right"
    noise: str = "stale"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def gold_url(self) -> str:
        return f"https://{self.slug}.example/news/latest"

    @property
    def old_url(self) -> str:
        return f"https://{self.slug}.example/archive/{self.year - 2}"

    def url(self, which: str) -> str:
        return self.gold_url if which == "gold" else self.old_url

    def answer(self, which: str) -> str:
        return self.right if which == "right" else self.stale


PLANS: tuple[Plan, ...] = (
    Plan("freshqa", "Who coaches the club that won the most recent Brackwater Cup?", "Dana Okafor", "Piet Varga",
         "brackwater-cup", 2025, ("gold", "old"), "gold", "stale", "right"),
    Plan("freshqa", "Which ferry line runs the newest route out of the port that hosts the Skellig festival?",
         "Wend Line", "Skellig Ferries", "port-wend", 2025, ("old", "gold"), "old", "stale", "stale"),
    Plan("infodeepseek", "Who chairs the Fernhill curling association this season?", "Mara Quint", "Olle Brandt",
         "fernhill-curling", 2025, ("old",), "old", "right", "stale", adequate=True),
    Plan("infodeepseek", "Which cafe won the Dunmore pastry award most recently?", "The Copper Kettle",
         "Bramble House", "dunmore-pastry", 2024, ("old",), "old", "stale", "stale", adequate=False,
         gold_only="stale"),
    Plan("sealqa", "How many lanes does the Harbor Bridge of Harbor City carry today?", "six", "four",
         "harbor-city", 2025, ("gold", "old"), "gold", "stale", "right"),
    Plan("sealqa", "Who holds the Velmar open-water swimming record?", "Ines Arkwright", "Tomas Lind",
         "velmar-swim", 2025, ("old",), "old", "stale", "stale", adequate=False, noise="right"),
)


# --------------------------------------------------------------------------- the source files


def _freshqa_csv() -> bytes:
    cols = ["id", "split", "question", "effective_year", "next_review", "false_premise", "num_hops", "fact_type",
            "source", "answer_0", "answer_1", "note"]
    rows = [
        {"id": i + 1, "split": "TEST", "question": p.question, "effective_year": str(p.year), "next_review": "",
         "false_premise": "FALSE", "num_hops": "multi-hop", "fact_type": "fast-changing", "source": p.gold_url,
         "answer_0": p.right, "answer_1": "", "note": ""}
        for i, p in enumerate(PLANS) if p.dataset == "freshqa"
    ]
    # left out by the paper's filter (one-hop; never-changing)
    rows += [
        {"id": 90, "split": "TEST", "question": "Which team leads the Marrow Valley hockey table?",
         "effective_year": "2025", "next_review": "", "false_premise": "FALSE", "num_hops": "one-hop",
         "fact_type": "fast-changing", "source": "https://marrow-hockey.example/table", "answer_0": "Marrow Otters",
         "answer_1": "", "note": ""},
        {"id": 91, "split": "DEV", "question": "In what year did the Tallis bridge first open?",
         "effective_year": "before 2022", "next_review": "", "false_premise": "FALSE", "num_hops": "multi-hop",
         "fact_type": "never-changing", "source": "https://tallis.example/bridge", "answer_0": "1911",
         "answer_1": "", "note": ""},
    ]
    buf = io.StringIO()
    # the Google-Sheets export shape: two preamble lines before the header
    buf.write("FreshQA (fictional rows for Trek's tests),,,,,,,,,,,\nnext update: never,,,,,,,,,,,\n")
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\r\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue().encode("utf-8")


def _infodeepseek_json() -> bytes:
    items = []
    for i, p in enumerate(PLANS):
        if p.dataset == "infodeepseek":
            items.append({"id": i + 1, "determinacy": True, "difficulty_GPT": True, "difficulty_DS": False,
                          "multi_hop": True, "long_tail": False, "time_sensitive": True, "freshness": True,
                          "distracting_info": False, "false_premise": False, "domain": ["sports"],
                          "advantage_language": ["English"], "query_en": p.question, "answer_en": p.right,
                          "sources": [p.gold_url], "verified": True})
    items.append({"id": 99, "determinacy": True, "difficulty_GPT": True, "difficulty_DS": False, "multi_hop": False,
                  "long_tail": False, "time_sensitive": False, "freshness": False, "distracting_info": False,
                  "false_premise": False, "domain": ["history"], "advantage_language": ["English"],
                  "query_en": "In what year was the Harrow Lane library founded?", "answer_en": "1911",
                  "sources": ["https://harrow-library.example/about"], "verified": True})
    return json.dumps(items, indent=1).encode("utf-8")


def _seal_row(question: str, answer: str, url: str, freshness: str, year: str) -> dict[str, Any]:
    return {"question": question, "answer": answer, "urls": [url], "freshness": freshness,
            "question_types": ["advanced reasoning"], "effective_year": year, "search_results": "conflicting",
            "topic": "Sports", "canary": "fictional rows, no canary"}


def _parquet(rows: list[dict[str, Any]]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


def source_files() -> dict[str, bytes]:
    """``{LAYOUT key: file bytes}``: the four files ``trek data download`` fetches."""
    hard = [_seal_row(p.question, p.right, p.gold_url, "fast-changing", str(p.year))
            for p in PLANS if p.dataset == "sealqa"]
    hard.append(_seal_row("Which river is the longest in the Varrow basin?", "the Tamsel",
                          "https://varrow-basin.example/rivers", "never-changing", "2024"))
    zero = [_seal_row("Who leads the Corven league table?", "Rovers", "https://corven.example/table",
                      "fast-changing", "2025")]
    return {"freshqa": _freshqa_csv(), "infodeepseek": _infodeepseek_json(), "sealqa": _parquet(hard),
            "sealqa_seal_0": _parquet(zero)}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- the web and its search


def pages() -> dict[str, str]:
    """``{url: html}`` of every page of the fictional web."""
    out = {}
    for p in PLANS:
        out[p.gold_url] = _html(f"{p.slug}: latest", f"{p.year}-03-01",
                                f"Latest news for the question. As of {p.year}, the answer is {p.right}.")
        out[p.old_url] = _html(f"{p.slug}: archive", f"{p.year - 2}-05-01",
                               f"Archived news from {p.year - 2}. Back then, the answer was {p.stale}.")
    return out


def _html(title: str, date: str, text: str) -> str:
    body = " ".join([text] * 3)  # long enough for a text extractor to keep it as the main text
    return (f"<html><head><title>{title}</title><meta name='date' content='{date}'></head>"
            f"<body><article><h1>{title}</h1><p>{body}</p><p>{text}</p></article></body></html>")


def web_transport():
    """An ``httpx.MockTransport`` answering GET requests for the pages of :func:`pages` (404 else)."""
    import httpx

    web = pages()

    def handler(request: httpx.Request) -> httpx.Response:
        html = web.get(str(request.url))
        if html is None:
            return httpx.Response(404, text="not found")
        return httpx.Response(200, text=html, headers={"content-type": "text/html; charset=utf-8"})

    return httpx.MockTransport(handler)


def tavily_reply(query: str) -> dict[str, Any]:
    """What the fake Tavily API answers to ``query`` (the question's results of its plan)."""
    for p in PLANS:
        if p.question in query:
            results = [{"title": f"{p.slug} ({which})", "url": p.url(which), "score": 0.9 - 0.1 * i,
                        "content": (f"As of {p.year}, the answer is {p.right}." if which == "gold"
                                    else f"Back in {p.year - 2}, the answer was {p.stale}."), "raw_content": None}
                       for i, which in enumerate(p.results)]
            return {"query": query, "results": results, "answer": None, "images": [], "response_time": 0.1}
    return {"query": query, "results": [], "answer": None, "images": [], "response_time": 0.1}


# --------------------------------------------------------------------------- the fake servers' scripts


def model_script() -> list[dict[str, Any]]:
    """The evaluated model's rules (first match wins): agentic search, closed book, TrekTrace probes."""
    rules: list[dict[str, Any]] = []
    for p in PLANS:
        q = re.escape(p.question)
        agentic = rf"(?s)You have two tools.*{q}"
        rules += [
            {"model": MODEL, "any_pattern": rf"\[TrekTrace: gold-only probe\][\s\S]*{q}",
             "reply": json.dumps({"answer": p.answer(p.gold_only), "used_urls": [p.gold_url],
                                  "reasoning": "From the gold page."})},
            {"model": MODEL, "any_pattern": rf"\[TrekTrace: gold-plus-noise probe\][\s\S]*{q}",
             "reply": json.dumps({"answer": p.answer(p.noise), "used_urls": [], "reasoning": "From the pages."})},
            {"model": MODEL, "any_pattern": agentic, "tool_results": 0,
             "tool_calls": [{"name": "web_search", "arguments": {"query": p.question}}]},
            {"model": MODEL, "any_pattern": agentic, "tool_results": 1,
             "tool_calls": [{"name": "open_url", "arguments": {"url": p.url(p.opens)}}]},
            {"model": MODEL, "any_pattern": agentic, "reply": p.answer(p.agentic)},
            {"model": MODEL, "pattern": q, "reply": p.answer(p.closed)},
        ]
    # the judges' model is not served here: a request for it is a routing error, and fails the run
    rules.append({"model": JUDGE, "error": {"status": 404, "message": f"The model {JUDGE} does not exist here."}})
    return rules


def judge_script() -> list[dict[str, Any]]:
    """The judges' rules: each dataset's grader accepts a response equal to a reference; the
    TrekTrace judges follow each question's plan."""
    sep = r" \| "
    one_of = r"(?:[^\n]*" + sep + r")?([^\n|]+?)(?:" + sep + r"[^\n]*)?"
    rules: list[dict[str, Any]] = []
    for p in PLANS:
        q = re.escape(p.question)

        def rule(step: str, reply: dict[str, Any], extra: str = "", q: str = q) -> dict[str, Any]:
            return {"model": JUDGE, "any_pattern": rf"\[TrekTrace: {step}\][\s\S]*{q}{extra}", "reply": json.dumps(reply)}

        rules += [
            rule("answer check", {"correct": True, "reason": "Same as the reference."},
                 rf"[\s\S]*Candidate answer: {re.escape(p.right)}\n"),
            rule("answer check", {"correct": False, "reason": "Not the reference."}),
            rule("key evidence", {"key_evidence": f"The answer is {p.right}.", "gold_evidence_urls": [p.gold_url]}),
            rule("evidence match", {"evidence_match": False, "retrieved_key_evidence": "", "equivalent_urls": [],
                                    "reason": "The retrieved page gives an older answer."}),
            rule("query adequacy", {"query_adequate": p.adequate, "reason": "Scripted judgment of the queries."}),
            rule("stale reference check", {"supports_reference": True, "reason": "The gold page gives it."}),
        ]
    rules += [
        {"model": JUDGE, "any_pattern": "Reference answer: " + one_of + r"\nCandidate answer: \1\n", "reply": "Yes"},
        {"model": JUDGE, "any_pattern": "Reference answer:", "reply": "No"},
        {"model": JUDGE, "any_pattern": "Gold target: " + one_of + r"\nPredicted answer: \1\n", "reply": "A"},
        {"model": JUDGE, "any_pattern": "Gold target:", "reply": "B"},
        {"model": JUDGE, "any_pattern": "evaluation: correct", "reply": "evaluation: incorrect"},
        {"model": MODEL, "error": {"status": 404, "message": f"The model {MODEL} does not exist here."}},
    ]
    return rules


def expected_outcomes(system: str) -> dict[str, str]:
    """``{question text: correct/incorrect}`` of a run (``closed`` or ``agentic``), from the plans."""
    return {p.question: "correct" if getattr(p, system) == "right" else "incorrect" for p in PLANS}


def write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj), encoding="utf-8")
