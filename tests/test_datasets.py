"""Unit tests of the dataset loaders, TrekBench-Wild, the downloader and `trek data`.

All data here is invented: the fixtures in tests/fixtures/datasets and the parquet files written
below describe fictional places and use example.* URLs.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
import socket
import sys
import threading
import types
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trek.cli.data import app
from trek.datasets import (
    DatasetError,
    LoadReport,
    MissingDataError,
    SkippedRow,
    load_freshqa,
    load_infodeepseek,
    load_longseal,
    load_sealqa,
    wild,
)
from trek.datasets import download as dl
from trek.datasets.common import LAYOUT, SourceLayout, question_hash
from trek.types import Document, Question

FIXTURES = Path(__file__).parent / "fixtures" / "datasets"
FRESHQA_CRLF = FIXTURES / "freshqa_preamble_crlf.csv"
FRESHQA_LF = FIXTURES / "freshqa_plain_lf.csv"
INFODEEPSEEK = FIXTURES / "infodeepseek.json"
TEST_CANARY = "trek-invented-canary-3f1c0d9e"

FRESHQA_HEADER = [
    "id",
    "split",
    "question",
    "effective_year",
    "next_review",
    "false_premise",
    "num_hops",
    "fact_type",
    "source",
    *[f"answer_{i}" for i in range(10)],
    "note",
]


# ---------------------------------------------------------------------------------------------
# helpers


def freshqa_row(**over: str) -> dict[str, str]:
    row = {
        "id": "7",
        "split": "TEST",
        "question": "Who keeps the Brackwater ferry log this year?",
        "effective_year": "2024",
        "next_review": "frequently",
        "false_premise": "FALSE",
        "num_hops": "multi-hop",
        "fact_type": "fast-changing",
        "source": "https://example.org/brackwater/ferry",
        "answer_0": "Lio Tamsin",
    }
    row.update(over)
    return row


def write_freshqa(
    path: Path, rows: list[dict[str, str]], header: list[str] = FRESHQA_HEADER, preamble: int = 0
) -> Path:
    buf = io.StringIO(newline="")
    w = csv.writer(buf, lineterminator="\r\n")
    for _ in range(preamble):
        w.writerow(["Invented preamble line"] + [""] * (len(header) - 1))
    w.writerow(header)
    for r in rows:
        w.writerow([r.get(c, "") for c in header])
    path.write_text(buf.getvalue(), encoding="utf-8", newline="")
    return path


def ids_item(**over: object) -> dict[str, object]:
    item: dict[str, object] = {
        "id": 5,
        "time_sensitive": True,
        "freshness": True,
        "false_premise": False,
        "multi_hop": True,
        "query_en": "Who runs the Gullhaven bakery today?",
        "answer_en": "Oda Brisk",
        "sources": ["https://example.org/gullhaven/bakery"],
    }
    item.update(over)
    return item


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def seal_row(**over: object) -> dict[str, object]:
    row: dict[str, object] = {
        "question": "Which club tops the invented Corven football league right now?",
        "answer": "Corven Rovers",
        "urls": ["https://example.org/corven/league#:~:text=top%20of%20the%20table\r"],
        "freshness": "fast-changing",
        "question_types": ["advanced reasoning"],
        "effective_year": "2025",
        "search_results": "conflicting",
        "topic": "Sports",
        "canary": TEST_CANARY,
    }
    row.update(over)
    return row


SEAL_ROWS = [
    seal_row(),
    seal_row(
        question="Who was the first person to swim across the invented Lake Morrow in winter?",
        answer="Nobody has swum across Lake Morrow in winter.",
        urls=["https://example.com/morrow/swims", "https://example.com/morrow/records \r"],
        question_types=["false-premise", "entity/event disambiguation"],
        effective_year="before 2024",
    ),
    seal_row(
        question="How many stations does the fictional Pell Valley tram line have?",
        answer="14",
        urls=["https://example.net/pell/tram"],
        freshness="slow-changing",
        effective_year="2024",
    ),
    seal_row(
        question="What is the boiling point of the invented liquid quorrel at sea level?",
        answer="71 degrees Celsius",
        urls=["https://example.net/quorrel"],
        freshness="never-changing",
        effective_year="before 2024",
    ),
    seal_row(
        question="Who currently presents the invented evening show Night Harbour?",
        answer="Ines Calder",
        urls=["https://example.org/night-harbour"],
        effective_year="2026",
    ),
]


def write_parquet(path: Path, rows: list[dict[str, object]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def doc(url: str, text: str, title: str = "", date: str | None = None) -> dict[str, object]:
    return {"date": date, "text": text, "title": title, "url": url}


def longseal_rows() -> list[dict[str, object]]:
    gold_a = doc("https://example.org/corven/table", "Rovers lead the table.", "Table", "2025-03-02")
    old_1 = doc("https://example.org/corven/2023", "Athletic led the table.", "Old table", None)
    old_2 = doc("https://example.com/corven/2022", "United led the table.", "Older table", "March 5, 2022")
    old_3 = doc("https://example.net/corven/2021", "Albion led the table.", "Oldest", "2021-01-09T10:00:00Z")
    gold_b = doc("https://example.com/morrow/records", "No winter crossing is on record.", "Records")
    old_4 = doc("https://example.com/morrow/2019", "A winter crossing was planned.", "Plans", "2019-12-01")
    return [
        seal_row(
            golds=[gold_a],
            **{"12_docs": [old_1], "20_docs": [old_1, old_2], "30_docs": [old_1, old_2, old_3, gold_a]},
        ),
        {
            **SEAL_ROWS[1],
            "golds": [gold_b],
            "12_docs": [old_4],
            "20_docs": [old_4],
            "30_docs": [old_4],
        },
    ]


def make_data_dir(root: Path) -> Path:
    (root / "freshqa").mkdir(parents=True)
    (root / "infodeepseek").mkdir()
    (root / "sealqa").mkdir()
    shutil.copy(FRESHQA_CRLF, root / "freshqa" / "FreshQA_test.csv")
    shutil.copy(INFODEEPSEEK, root / "infodeepseek" / "InfoDeepSeek_v1.json")
    write_parquet(root / "sealqa" / "sealqa_seal_hard.parquet", SEAL_ROWS)
    return root


def raises_naming(exc: pytest.ExceptionInfo[DatasetError], *parts: str) -> None:
    msg = str(exc.value)
    for part in parts:
        assert part in msg, f"{part!r} not in error message {msg!r}"


# ---------------------------------------------------------------------------------------------
# FreshQA


def test_freshqa_fixture_really_has_crlf_and_preamble() -> None:
    raw = FRESHQA_CRLF.read_bytes()
    assert b"\r\n" in raw and b"\n" not in raw.replace(b"\r\n", b"")
    assert not raw.startswith(b"id,")


def test_freshqa_preamble_crlf_multi_url() -> None:
    questions, report = load_freshqa(FRESHQA_CRLF)
    assert [q.id for q in questions] == [f"freshqa:{i}" for i in range(10, 17)]
    assert report.rows_read == report.rows_kept == 7 and report.skipped == []
    assert report.row_kind == "line" and report.is_consistent()
    by_id = {q.id: q for q in questions}

    q10 = by_id["freshqa:10"]
    assert q10.dataset == "freshqa" and q10.split == "TEST"
    assert q10.answers == ["Ada Pennywhistle", "A. Pennywhistle"]
    assert q10.gold_urls == [
        "https://example.org/glimmerfield/rowing#:~:text=chair%20since,-2019",
        "https://example.com/news/rowing-club",
    ]
    assert q10.effective_year == 2024 and q10.effective_year_raw == "2024"
    assert q10.false_premise is False
    assert q10.metadata == {
        "next_review": "occasionally",
        "num_hops": "multi-hop",
        "fact_type": "fast-changing",
        "line": 4,
    }

    q11 = by_id["freshqa:11"]
    assert q11.effective_year is None and q11.effective_year_raw == "before 2022"
    assert q11.metadata["line"] == 6 and q11.split == "DEV"

    q12 = by_id["freshqa:12"]
    assert q12.false_premise is True
    assert q12.gold_urls == [] and q12.metadata["source_placeholder"] == "N/A"

    q13 = by_id["freshqa:13"]
    assert q13.gold_urls == [
        "https://example.net/quillshire/chess",
        "https://example.net/quillshire/chess/members#:~:text=members",
    ]
    assert q13.metadata["note"] == "count refreshed every spring"
    assert q13.metadata["line"] == 8
    assert by_id["freshqa:14"].metadata["line"] == 11  # row 13 spans three physical lines
    assert by_id["freshqa:14"].false_premise is False  # lower-case "false"
    for q in questions:
        assert all("\r" not in u and u == u.strip() for u in q.gold_urls)


def test_freshqa_plain_lf_other_column_order() -> None:
    questions, report = load_freshqa(FRESHQA_LF)
    assert [q.id for q in questions] == ["freshqa:3", "freshqa:4", "freshqa:5"]
    assert report.rows_read == 3
    q3, q4, q5 = questions
    assert q3.question == "What is the newest ferry route out of Port Wend?"
    assert q3.gold_urls == [
        "https://example.org/port-wend/ferries",
        "https://example.org/port-wend/ferries/new#:~:text=route",
    ]
    assert q4.answers == ["Marrow Otters", "The Otters"]
    assert q4.metadata["next_review"] is None and "note" not in q4.metadata
    assert q5.false_premise is True and q5.effective_year_raw == "before 2022"
    assert q5.metadata["line"] == 5  # q3's source cell spans lines 2-3


def test_freshqa_same_rows_with_lf_or_crlf(tmp_path: Path) -> None:
    lf = tmp_path / "lf.csv"
    lf.write_bytes(FRESHQA_CRLF.read_bytes().replace(b"\r\n", b"\n"))
    a, _ = load_freshqa(FRESHQA_CRLF)
    b, _ = load_freshqa(lf)
    assert [q.model_dump() for q in a] == [q.model_dump() for q in b]


def test_freshqa_missing_column(tmp_path: Path) -> None:
    header = [c for c in FRESHQA_HEADER if c != "fact_type"]
    path = write_freshqa(tmp_path / "fq.csv", [freshqa_row()], header=header, preamble=2)
    with pytest.raises(DatasetError) as exc:
        load_freshqa(path)
    raises_naming(exc, str(path), "line 3", "fact_type")
    assert exc.value.field == "fact_type"


def test_freshqa_no_header(tmp_path: Path) -> None:
    path = tmp_path / "fq.csv"
    path.write_text("a,b,c\n1,2,3\n", encoding="utf-8")
    with pytest.raises(DatasetError) as exc:
        load_freshqa(path)
    raises_naming(exc, str(path), "no header row", "id")


@pytest.mark.parametrize(
    ("override", "field", "needle"),
    [
        ({"question": "   "}, "question", "empty"),
        ({"answer_0": ""}, "answer_0..answer_9", "no answer"),
        ({"effective_year": "around 2020"}, "effective_year", "unreadable year"),
        ({"effective_year": "20x4"}, "effective_year", "unreadable year"),
        ({"source": "www.example.org/page"}, "source", "malformed URL"),
        ({"source": "https://example.org/a\r\nexample.org/b"}, "source[1]", "malformed URL"),
        ({"false_premise": "maybe"}, "false_premise", "TRUE or FALSE"),
    ],
)
def test_freshqa_bad_row_names_file_line_id_field(
    tmp_path: Path, override: dict[str, str], field: str, needle: str
) -> None:
    rows = [freshqa_row(id="6", question="A fine question about Brackwater?"), freshqa_row(**override)]
    path = write_freshqa(tmp_path / "fq.csv", rows, preamble=2)
    with pytest.raises(DatasetError) as exc:
        load_freshqa(path)
    raises_naming(exc, str(path), "line 5", "id freshqa:7", f"field '{field}'", needle)
    assert exc.value.row == 5 and exc.value.field == field and exc.value.qid == "freshqa:7"


def test_freshqa_empty_and_duplicate_ids(tmp_path: Path) -> None:
    path = write_freshqa(tmp_path / "fq.csv", [freshqa_row(), freshqa_row(id="")])
    with pytest.raises(DatasetError) as exc:
        load_freshqa(path)
    raises_naming(exc, str(path), "line 3", "field 'id'", "empty")
    path = write_freshqa(tmp_path / "fq2.csv", [freshqa_row(), freshqa_row()])
    with pytest.raises(DatasetError) as exc:
        load_freshqa(path)
    raises_naming(exc, str(path), "line 3", "id freshqa:7", "field 'id'", "duplicate")


def test_freshqa_non_strict_records_skipped_rows(tmp_path: Path) -> None:
    rows = [
        freshqa_row(id="1"),
        freshqa_row(id="2", question=""),
        freshqa_row(id="3", effective_year="soon"),
        freshqa_row(id="4"),
        freshqa_row(id="5", source="not a url"),
    ]
    path = write_freshqa(tmp_path / "fq.csv", rows, preamble=1)
    questions, report = load_freshqa(path, strict=False)
    assert [q.id for q in questions] == ["freshqa:1", "freshqa:4"]
    assert report.rows_read == 5 and report.rows_kept == 2 and report.is_consistent()
    assert [(s.row, s.id, s.field) for s in report.skipped] == [
        (4, "freshqa:2", "question"),
        (5, "freshqa:3", "effective_year"),
        (7, "freshqa:5", "source"),
    ]
    assert all(s.reason for s in report.skipped)


def test_freshqa_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError) as exc:
        load_freshqa(tmp_path / "absent.csv")
    raises_naming(exc, "absent.csv", "does not exist")


# ---------------------------------------------------------------------------------------------
# InfoDeepSeek


def test_infodeepseek_fixture() -> None:
    questions, report = load_infodeepseek(INFODEEPSEEK)
    assert [q.id for q in questions] == [f"infodeepseek:{i}" for i in (3, 21, 40, 41, 57)]
    assert report.rows_read == report.rows_kept == 5 and report.row_kind == "index"
    by_id = {q.id: q for q in questions}
    q3 = by_id["infodeepseek:3"]
    assert q3.dataset == "infodeepseek"
    assert q3.answers == ["Mara Quint"]
    assert q3.gold_urls[0] == "https://example.org/fernhill/curling#:~:text=head%20coach"
    assert q3.effective_year is None and q3.effective_year_raw is None
    assert q3.metadata["time_sensitive"] is True and q3.metadata["freshness"] is True
    assert q3.metadata["verified"] is True and q3.metadata["domain"] == ["sports"]
    assert q3.metadata["index"] == 0
    assert by_id["infodeepseek:21"].answers == ["The Copper Kettle", "Copper Kettle Café"]
    assert by_id["infodeepseek:41"].false_premise is True
    assert by_id["infodeepseek:40"].false_premise is False


def test_infodeepseek_id_falls_back_to_index(tmp_path: Path) -> None:
    item = ids_item()
    del item["id"]
    path = write_json(tmp_path / "ids.json", [ids_item(id=9), item])
    questions, _ = load_infodeepseek(path)
    assert [q.id for q in questions] == ["infodeepseek:9", "infodeepseek:1"]


@pytest.mark.parametrize(
    ("override", "drop", "field", "needle"),
    [
        ({}, "query_en", "query_en", "missing"),
        ({"query_en": ""}, None, "query_en", "empty"),
        ({"answer_en": "  "}, None, "answer_en", "no answer"),
        ({"answer_en": []}, None, "answer_en", "no answer"),
        ({"sources": ["example.org/no-scheme"]}, None, "sources[0]", "malformed URL"),
        ({"sources": ["https://example.org/a", "https:///no-host"]}, None, "sources[1]", "malformed URL"),
        ({"time_sensitive": "sometimes"}, None, "time_sensitive", "TRUE or FALSE"),
    ],
)
def test_infodeepseek_bad_item_names_file_index_id_field(
    tmp_path: Path, override: dict[str, object], drop: str | None, field: str, needle: str
) -> None:
    bad = ids_item(id=21, **override)
    if drop:
        del bad[drop]
    path = write_json(tmp_path / "ids.json", [ids_item(), bad])
    with pytest.raises(DatasetError) as exc:
        load_infodeepseek(path)
    raises_naming(exc, str(path), "index 1", "id infodeepseek:21", f"field '{field}'", needle)


def test_infodeepseek_bad_file_shapes(tmp_path: Path) -> None:
    path = write_json(tmp_path / "obj.json", {"items": []})
    with pytest.raises(DatasetError) as exc:
        load_infodeepseek(path)
    raises_naming(exc, str(path), "JSON array")
    path = tmp_path / "broken.json"
    path.write_text("[{", encoding="utf-8")
    with pytest.raises(DatasetError) as exc:
        load_infodeepseek(path)
    raises_naming(exc, str(path), "not valid JSON")
    path = write_json(tmp_path / "items.json", [ids_item(), "just text"])
    with pytest.raises(DatasetError) as exc:
        load_infodeepseek(path)
    raises_naming(exc, str(path), "index 1", "JSON object")


def test_infodeepseek_non_strict(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "ids.json",
        [ids_item(id=1), ids_item(id=2, answer_en=""), ids_item(id=3), ids_item(id=4, sources=["nope"])],
    )
    questions, report = load_infodeepseek(path, strict=False)
    assert [q.id for q in questions] == ["infodeepseek:1", "infodeepseek:3"]
    assert [(s.row, s.id, s.field) for s in report.skipped] == [
        (1, "infodeepseek:2", "answer_en"),
        (3, "infodeepseek:4", "sources[0]"),
    ]
    assert report.is_consistent()


# ---------------------------------------------------------------------------------------------
# SealQA


def test_sealqa_parquet(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "sealqa_seal_hard.parquet", SEAL_ROWS)
    questions, report = load_sealqa(path)
    assert report.rows_read == report.rows_kept == 5 and report.row_kind == "row"
    q0, q1 = questions[0], questions[1]
    expected = hashlib.sha256(str(SEAL_ROWS[0]["question"]).encode()).hexdigest()[:12]
    assert q0.id == f"sealqa:{expected}" == f"sealqa:{question_hash(str(SEAL_ROWS[0]['question']))}"
    assert q0.dataset == "sealqa" and q0.split == "test"
    assert q0.answers == ["Corven Rovers"]
    assert q0.gold_urls == ["https://example.org/corven/league#:~:text=top%20of%20the%20table"]
    assert q0.effective_year == 2025 and q0.effective_year_raw == "2025"
    assert q0.metadata["freshness"] == "fast-changing" and q0.metadata["subset"] == "seal_hard"
    assert q0.metadata["topic"] == "Sports" and q0.metadata["search_results"] == "conflicting"
    assert q0.false_premise is False
    assert q1.false_premise is True
    assert q1.effective_year is None and q1.effective_year_raw == "before 2024"
    assert q1.gold_urls == ["https://example.com/morrow/swims", "https://example.com/morrow/records"]
    dumped = json.dumps([q.model_dump() for q in questions])
    assert TEST_CANARY not in dumped and "canary" not in dumped


def test_sealqa_subset_from_name_and_override(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "seal-0.parquet", SEAL_ROWS[:1])
    assert load_sealqa(path).questions[0].metadata["subset"] == "seal_0"
    assert load_sealqa(path, subset="seal_hard").questions[0].metadata["subset"] == "seal_hard"


def test_sealqa_missing_column(tmp_path: Path) -> None:
    rows = [{k: v for k, v in r.items() if k != "freshness"} for r in SEAL_ROWS]
    path = write_parquet(tmp_path / "seal.parquet", rows)
    with pytest.raises(DatasetError) as exc:
        load_sealqa(path)
    raises_naming(exc, str(path), "freshness", "missing required column")


@pytest.mark.parametrize(
    ("override", "field", "needle", "has_id"),
    [
        ({"question": " "}, "question", "empty", False),
        ({"answer": ""}, "answer", "no answer", True),
        ({"effective_year": "mid 2024"}, "effective_year", "unreadable year", True),
        ({"urls": ["https://example.org/ok", "/relative/path"]}, "urls[1]", "malformed URL", True),
    ],
)
def test_sealqa_bad_row_names_file_row_id_field(
    tmp_path: Path, override: dict[str, object], field: str, needle: str, has_id: bool
) -> None:
    rows = [SEAL_ROWS[0], seal_row(**{"question": "Which invented river floods most often?", **override})]
    path = write_parquet(tmp_path / "seal.parquet", rows)
    with pytest.raises(DatasetError) as exc:
        load_sealqa(path)
    parts = [str(path), "row 1", f"field '{field}'", needle]
    if has_id:
        parts.append(f"id sealqa:{question_hash('Which invented river floods most often?')}")
    raises_naming(exc, *parts)


def test_sealqa_non_strict(tmp_path: Path) -> None:
    rows = [*SEAL_ROWS[:2], seal_row(question="Bad year question?", effective_year="someday")]
    path = write_parquet(tmp_path / "seal.parquet", rows)
    questions, report = load_sealqa(path, strict=False)
    assert len(questions) == 2 and report.rows_read == 3
    (skip,) = report.skipped
    assert skip.row == 2 and skip.field == "effective_year"
    assert skip.id == f"sealqa:{question_hash('Bad year question?')}"


def test_sealqa_not_parquet(tmp_path: Path) -> None:
    path = tmp_path / "seal.parquet"
    path.write_bytes(b"not parquet")
    with pytest.raises(DatasetError) as exc:
        load_sealqa(path)
    raises_naming(exc, str(path), "parquet")


# ---------------------------------------------------------------------------------------------
# LongSeal


def test_longseal_questions_and_documents(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "longseal.parquet", longseal_rows())
    questions, documents, report = load_longseal(path)
    assert report.rows_read == report.rows_kept == 2
    q0, q1 = questions
    assert q0.id == f"sealqa:{question_hash(str(SEAL_ROWS[0]['question']))}"
    assert q0.metadata["subset"] == "longseal"
    assert all(isinstance(d, Document) for d in documents)
    docs0 = [d for d in documents if d.question_id == q0.id]
    assert [d.id for d in docs0] == [
        f"{q0.id}:gold:0",
        f"{q0.id}:12_docs:0",
        f"{q0.id}:20_docs:1",
        f"{q0.id}:30_docs:2",
    ]
    gold, old1, old2, old3 = docs0
    assert gold.role == "gold" and gold.supports_answer == "Corven Rovers"
    assert gold.date is not None and gold.date.isoformat() == "2025-03-02"
    assert gold.metadata["pools"] == ["gold", "30_docs"]
    assert gold.metadata["positions"] == {"gold": 0, "30_docs": 3}
    assert old1.role == "outdated" and old1.date is None and old1.supports_answer is None
    assert old1.metadata["pools"] == ["12_docs", "20_docs", "30_docs"]
    assert old2.date is not None and old2.date.isoformat() == "2022-03-05"
    assert old2.metadata["date_raw"] == "March 5, 2022"
    assert old3.date is not None and old3.date.isoformat() == "2021-01-09"
    assert all(d.source == "longseal" for d in documents)
    assert q0.metadata["documents"] == {"gold": 1, "outdated": 3}
    docs1 = [d for d in documents if d.question_id == q1.id]
    assert [d.role for d in docs1] == ["gold", "outdated"]
    assert docs1[1].metadata["pools"] == ["12_docs", "20_docs", "30_docs"]
    assert len({d.id for d in documents}) == len(documents)
    assert TEST_CANARY not in json.dumps([q.model_dump() for q in questions])


_OK_A = doc("https://example.org/ok/a", "fine text", "A")
_OK_B = doc("https://example.org/ok/b", "other text", "B")


@pytest.mark.parametrize(
    ("pool", "docs", "field", "needle"),
    [
        (
            "golds",
            [doc("https://example.org/x", "t", "T", "the other day")],
            "golds[0].date",
            "unreadable date",
        ),
        ("30_docs", [_OK_A, doc("example.org/no-scheme", "t")], "30_docs[1].url", "malformed URL"),
        (
            "20_docs",
            [_OK_A, _OK_B, {"date": None, "title": "x", "url": "https://example.org/y"}],
            "20_docs[2].text",
            "missing",
        ),
    ],
)
def test_longseal_bad_document_names_file_row_id_field(
    tmp_path: Path, pool: str, docs: list[dict[str, object]], field: str, needle: str
) -> None:
    rows = longseal_rows()
    rows[1][pool] = docs
    path = write_parquet(tmp_path / "longseal.parquet", rows)
    with pytest.raises(DatasetError) as exc:
        load_longseal(path)
    qid = f"sealqa:{question_hash(str(SEAL_ROWS[1]['question']))}"
    raises_naming(exc, str(path), "row 1", f"id {qid}", f"field '{field}'", needle)
    questions, documents, report = load_longseal(path, strict=False)
    assert len(questions) == 1 and report.skipped[0].field == field
    assert all(d.question_id == questions[0].id for d in documents)


def test_longseal_missing_golds_column(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "longseal.parquet", SEAL_ROWS)
    with pytest.raises(DatasetError) as exc:
        load_longseal(path)
    raises_naming(exc, str(path), "golds")


# ---------------------------------------------------------------------------------------------
# TrekBench-Wild


def test_wild_load_applies_paper_filters(tmp_path: Path) -> None:
    bench = wild.load(make_data_dir(tmp_path))
    assert bench.counts() == {"freshqa": 4, "infodeepseek": 3, "sealqa": 3}
    assert not bench.matches_paper()
    assert {q.id for q in bench.questions if q.dataset == "freshqa"} == {
        "freshqa:10",
        "freshqa:12",
        "freshqa:13",
        "freshqa:14",
    }
    assert {q.id for q in bench.questions if q.dataset == "infodeepseek"} == {
        "infodeepseek:3",
        "infodeepseek:21",
        "infodeepseek:57",
    }
    for name, rep in bench.reports.items():
        assert rep.is_consistent(), name
        assert rep.filter
    assert bench.reports["freshqa"].rows_filtered_out == 3
    assert len({q.id for q in bench.questions}) == len(bench.questions)


def test_wild_short_of_the_papers_counts_is_an_error_naming_what_is_missing(tmp_path: Path) -> None:
    bench = wild.load(make_data_dir(tmp_path))
    with pytest.raises(wild.IncompleteDataError) as exc:
        wild.check_complete(bench)
    raises_naming(exc, "freshqa has 4 of its 49 questions (45 missing", "FreshQA_test.csv", "7 rows read",
                  "infodeepseek has 3 of its 31", "sealqa has 3 of its 64", "--allow-partial", "10 question(s)")
    bench.paper_counts = bench.counts()  # as many as the paper's: complete
    wild.check_complete(bench)
    bench.paper_counts = {**bench.counts(), "freshqa": 3}  # more than the paper's (a newer export): complete
    wild.check_complete(bench)


def test_wild_run_refuses_a_partial_question_set_unless_allowed(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from trek.cli import app

    monkeypatch.setenv("OPENAI_API_KEY", "k")
    data = make_data_dir(tmp_path / "data")
    args = ["wild", "run", "--model", "m", "--run", str(tmp_path / "run"), "--questions", "wild", "--data-dir",
            str(data), "--search", "none", "--base-url", "http://127.0.0.1:9/v1", "--dry-run"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2 and "TrekBench-Wild is incomplete" in r.output and "freshqa has 4 of its 49" in r.output
    r = CliRunner().invoke(app, [*args, "--allow-partial"])
    assert r.exit_code == 0, r.output
    assert "warning: TrekBench-Wild is incomplete" in " ".join(r.output.split())


def test_wild_summarize_tables(tmp_path: Path) -> None:
    bench = wild.load(make_data_dir(tmp_path))
    summary = wild.summarize(bench)
    ov = summary.overview
    assert list(ov.index) == ["freshqa", "infodeepseek", "sealqa"]
    assert ov.loc["freshqa", "rows_read"] == 7 and ov.loc["freshqa", "rows_kept"] == 4
    assert ov.loc["freshqa", "false_premise"] == 1 and ov.loc["infodeepseek", "false_premise"] == 1
    assert ov.loc["sealqa", "paper_count"] == 64
    years = summary.years
    assert list(years.columns) == ["freshqa", "infodeepseek", "sealqa"]
    assert list(years.index) == ["2023", "before 2024", "2024", "2025", "2026", "unspecified"]
    assert years.loc["2024", "freshqa"] == 2 and years.loc["unspecified", "infodeepseek"] == 3
    assert years.to_numpy().sum() == len(bench.questions)
    assert summary.skipped.empty


def test_year_distribution_orders_bounds_before_years() -> None:
    qs = [
        Question(
            id=f"x:{i}", dataset="d", question="q?", answers=["a"], effective_year=y, effective_year_raw=r
        )
        for i, (y, r) in enumerate([(2022, "2022"), (None, "before 2022"), (None, None), (2021, "2021")])
    ]
    df = wild.year_distribution(qs)
    assert list(df.index) == ["2021", "before 2022", "2022", "unspecified"]
    assert df["d"].tolist() == [1, 1, 1, 1]


def test_wild_missing_files_are_listed(tmp_path: Path) -> None:
    (tmp_path / "freshqa").mkdir()
    shutil.copy(FRESHQA_CRLF, tmp_path / "freshqa" / "fq.csv")
    with pytest.raises(MissingDataError) as exc:
        wild.load(tmp_path)
    msg = str(exc.value)
    assert "infodeepseek/InfoDeepSeek_v1.json" in msg and "sealqa/sealqa_seal_hard.parquet" in msg
    assert "freshqa:" not in msg and str(tmp_path) in msg and "trek data download" in msg


def test_wild_ambiguous_files(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    shutil.copy(FRESHQA_LF, tmp_path / "freshqa" / "other.csv")
    with pytest.raises(MissingDataError) as exc:
        wild.load(tmp_path)
    assert "several files" in str(exc.value)
    shutil.copy(FRESHQA_CRLF, tmp_path / LAYOUT["freshqa"].relpath)  # the standard name wins
    assert wild.load(tmp_path).files["freshqa"].name == "FreshQA_v04072025.csv"


def test_wild_default_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_data_dir(tmp_path / "elsewhere")
    monkeypatch.setenv("TREK_DATA_DIR", str(tmp_path / "elsewhere"))
    assert wild.load().data_dir == tmp_path / "elsewhere"
    monkeypatch.delenv("TREK_DATA_DIR")
    make_data_dir(tmp_path / "cwd" / "datasets")
    monkeypatch.chdir(tmp_path / "cwd")
    assert wild.load().data_dir.resolve() == (tmp_path / "cwd" / "datasets").resolve()


def test_wild_non_strict_reports_skips(tmp_path: Path) -> None:
    root = make_data_dir(tmp_path)
    data = json.loads(INFODEEPSEEK.read_text(encoding="utf-8"))
    data[0]["sources"] = ["no-scheme.example.org"]
    write_json(root / "infodeepseek" / "InfoDeepSeek_v1.json", data)
    with pytest.raises(DatasetError):
        wild.load(root)
    bench = wild.load(root, strict=False)
    rep = bench.reports["infodeepseek"]
    assert rep.rows_read == 5 and len(rep.skipped) == 1 and rep.rows_kept == 2 and rep.is_consistent()
    summary = wild.summarize(bench)
    assert summary.skipped.iloc[0]["id"] == "infodeepseek:3"
    assert summary.skipped.iloc[0]["where"] == "index 0"


def test_describe_corpus() -> None:
    qs = [
        Question(id="a:1", dataset="freshqa", question="q?", answers=["x"], false_premise=True),
        Question(id="b:1", dataset="sealqa", question="q?", answers=["x"]),
    ]
    docs = [
        Document(id="d1", url="https://example.org/1", text="t", role="gold", date="2024-01-02"),
        Document(id="d2", url="https://example.org/2", text="t", role="outdated"),
        Document(id="d3", url="https://example.org/3", text="t", role="outdated", date="2023-01-02"),
    ]
    t = wild.describe_corpus(qs, docs)
    assert t["questions"].loc["freshqa", "false_premise"] == 1
    assert t["documents"].loc["outdated"].tolist() == [2, 1, 1]


# ---------------------------------------------------------------------------------------------
# Download


def test_pins_take_their_paths_from_layout() -> None:
    names = [p.name for p in dl.PINS]
    assert len(names) == len(set(names))
    sources = [p.source for p in dl.PINS]
    assert all(s in LAYOUT.values() for s in sources)  # no path is written twice
    assert all(lay in sources for lay in LAYOUT.values())  # every expected file can be fetched
    for p in dl.PINS:
        assert len(p.sha256) == 64 and int(p.sha256, 16) >= 0
        assert p.content_sha256 is None or len(p.content_sha256) == 64
        assert "{revision}" in p.url
        if p.is_pinned:
            assert p.revision in p.resolved_url
    assert all(p.is_pinned for p in dl.PINS)  # every file, SealQA included, has a version to fetch


def test_sealqa_is_pinned_to_one_hub_revision() -> None:
    seal = [p for p in dl.PINS if p.dataset == "sealqa"]
    assert len(seal) == 2 and {p.revision for p in seal} == {dl.SEALQA_REVISION}
    assert len(dl.SEALQA_REVISION) == 40 and int(dl.SEALQA_REVISION, 16) >= 0
    assert {p.resolved_url for p in seal} == {
        f"https://huggingface.co/datasets/vtllms/sealqa/resolve/{dl.SEALQA_REVISION}/{name}"
        for name in ("seal-hard.parquet", "seal-0.parquet")}
    assert all(p.content_sha256 for p in seal)  # re-saved reference copies: the content decides


def test_download_help_names_every_file_and_the_sealqa_revision() -> None:
    result = CliRunner().invoke(app, ["download", "--help"], terminal_width=400)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for pin in dl.PINS:
        assert pin.relpath in text
    assert dl.SEALQA_REVISION in text and "save it as sealqa/sealqa_seal_hard.parquet" in text


class FileServer:
    """Serves invented files over HTTP on 127.0.0.1 (port chosen by the OS); records each path."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, bytes]] = {}
        self.seen: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.seen.append(self.path)
                status, body = owner.routes.get(self.path, (404, b"not here"))
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"


@pytest.fixture
def server() -> Iterator[FileServer]:
    srv = FileServer()
    thread = threading.Thread(target=srv.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()
    thread.join()


def refused_url() -> str:
    """A loopback address nothing listens on: connecting to it is refused, as when offline."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def fake_pin(base: str, content: bytes, relpath: str = "freshqa/test.csv", **over: object) -> dl.Pin:
    fields: dict[str, object] = {
        "name": "fake",
        "source": SourceLayout(relpath.split("/")[0], relpath, (relpath,), "invented test file"),
        "url": base + "/{revision}/file",
        "revision": "rev1",
        "sha256": hashlib.sha256(content).hexdigest(),
        "content_sha256": None,
        "home": "https://data.example.org",
    }
    fields.update(over)
    return dl.Pin(**fields)  # type: ignore[arg-type]


def leftover_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_download_success_writes_file(tmp_path: Path, server: FileServer) -> None:
    body = b"id,question\n1,invented?\n"
    server.routes["/rev1/file"] = (200, body)
    pin = fake_pin(server.url, body)
    out = dl.fetch(pin, tmp_path)
    assert out.status == "downloaded" and out.ok, out.message
    assert (tmp_path / "freshqa" / "test.csv").read_bytes() == body
    assert server.seen == ["/rev1/file"]
    assert leftover_files(tmp_path) == [tmp_path / "freshqa" / "test.csv"]
    again = dl.fetch(pin, tmp_path)
    assert again.status == "present" and server.seen == ["/rev1/file"]  # no second request


@pytest.mark.parametrize("content_sha256", [None, "0" * 64], ids=["bytes-only", "with-content-checksum"])
def test_download_checksum_mismatch_leaves_no_file(
    tmp_path: Path, server: FileServer, content_sha256: str | None
) -> None:
    server.routes["/rev1/file"] = (200, b"some other bytes")
    pin = fake_pin(server.url, b"the pinned bytes", content_sha256=content_sha256)
    out = dl.fetch(pin, tmp_path)
    assert server.seen == ["/rev1/file"]
    assert out.status == "checksum_mismatch" and not out.ok
    assert "does not match" in out.message and pin.sha256 in out.message
    assert list(tmp_path.iterdir()) == []  # no file, no temporary file, no empty folder


def test_a_sealqa_mismatch_says_why_and_where_to_put_the_file(tmp_path: Path, server: FileServer) -> None:
    server.routes["/rev1/file"] = (200, b"a newer release")
    pin = fake_pin(server.url, b"the pinned bytes", relpath="sealqa/sealqa_seal_hard.parquet", note=dl.SEALQA_NOTE)
    out = dl.fetch(pin, tmp_path)
    assert out.status == "checksum_mismatch" and "rewritten every few weeks" in out.message
    assert str(tmp_path / "sealqa" / "sealqa_seal_hard.parquet") in out.message


def test_download_accepts_content_match_with_other_bytes(tmp_path: Path, server: FileServer) -> None:
    reference = tmp_path / "ref.json"
    reference.write_text(json.dumps([{"a": 1, "b": [1, 2]}], indent=2), encoding="utf-8")
    served = json.dumps([{"b": [1, 2], "a": 1}]).encode()
    server.routes["/rev1/file"] = (200, served)
    pin = fake_pin(
        server.url,
        reference.read_bytes(),
        relpath="infodeepseek/x.json",
        content_sha256=dl.content_fingerprint(reference),
    )
    out = dl.fetch(pin, tmp_path / "data")
    assert out.status == "downloaded" and "content checksum" in out.message
    assert leftover_files(tmp_path / "data") == [tmp_path / "data" / "infodeepseek" / "x.json"]
    assert (tmp_path / "data" / "infodeepseek" / "x.json").read_bytes() == served


def test_download_offline_names_manual_path(tmp_path: Path) -> None:
    pin = fake_pin(refused_url(), b"x", relpath="sealqa/sealqa_seal_hard.parquet")
    out = dl.fetch(pin, tmp_path)
    assert out.status == "failed" and "could not reach" in out.message
    assert "sealqa/sealqa_seal_hard.parquet" in out.message and str(tmp_path) in out.message
    assert "offline" in out.message and "Traceback" not in out.message
    assert list(tmp_path.iterdir()) == []
    text = dl.manual_instructions(tmp_path, [pin])
    assert "sealqa/sealqa_seal_hard.parquet" in text and str(tmp_path / pin.relpath) in text


def test_download_http_error(tmp_path: Path, server: FileServer) -> None:
    out = dl.fetch(fake_pin(server.url, b"x"), tmp_path)  # the server has no such file: 404
    assert server.seen == ["/rev1/file"]
    assert out.status == "failed" and "HTTP 404" in out.message and "freshqa/test.csv" in out.message
    assert list(tmp_path.iterdir()) == []


def test_download_unpinned_makes_no_request(tmp_path: Path, server: FileServer) -> None:
    server.routes["/rev1/file"] = server.routes[f"/{dl.UNPINNED}/file"] = (200, b"x")
    out = dl.fetch(fake_pin(server.url, b"x", revision=dl.UNPINNED), tmp_path)
    assert out.status == "unpinned" and "freshqa/test.csv" in out.message and str(tmp_path) in out.message
    assert server.seen == [] and list(tmp_path.iterdir()) == []


def test_download_existing_mismatch_is_kept_unless_forced(tmp_path: Path, server: FileServer) -> None:
    body = b"pinned content"
    target = tmp_path / "freshqa" / "test.csv"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"local edits")
    pin = fake_pin(server.url, body)
    server.routes["/rev1/file"] = (500, b"server trouble")
    out = dl.fetch(pin, tmp_path, force=True)  # a failed forced download keeps the old file
    assert out.status == "failed" and "HTTP 500" in out.message
    assert leftover_files(tmp_path) == [target] and target.read_bytes() == b"local edits"
    server.routes["/rev1/file"] = (200, body)
    out = dl.fetch(pin, tmp_path)
    assert out.status == "conflict" and target.read_bytes() == b"local edits"
    assert server.seen == ["/rev1/file"]  # the conflict was found without a request
    out = dl.fetch(pin, tmp_path, force=True)
    assert out.status == "downloaded" and target.read_bytes() == body
    assert leftover_files(tmp_path) == [target]


def test_select_pins() -> None:
    assert {p.name for p in dl.select_pins(["sealqa"])} == {"sealqa_seal_hard", "sealqa_seal_0"}
    assert [p.name for p in dl.select_pins(["infodeepseek"])] == ["infodeepseek"]
    assert len(dl.select_pins([])) == len(dl.PINS)
    with pytest.raises(ValueError, match="unknown dataset"):
        dl.select_pins(["nope"])


# ---------------------------------------------------------------------------------------------
# CLI

runner = CliRunner()


def test_cli_help_mentions_data_dir_default() -> None:
    result = runner.invoke(app, ["info", "--help"])
    assert result.exit_code == 0
    assert "TREK_DATA_DIR" in result.output and "./datasets" in result.output


def test_cli_info_over_fixtures(tmp_path: Path) -> None:
    root = make_data_dir(tmp_path / "data")
    result = runner.invoke(app, ["info", "--data-dir", str(root)])
    assert result.exit_code == 0, result.output
    out = result.output
    for text in ("freshqa", "infodeepseek", "sealqa", "rows read", "rows kept", "false premise", "Table 10"):
        assert text in out
    assert "before 2024" in out and "unspecified" in out
    assert "(paper: 49)" in out  # fixture counts differ from the paper's


def test_cli_info_lists_skipped_rows(tmp_path: Path) -> None:
    root = make_data_dir(tmp_path / "data")
    data = json.loads(INFODEEPSEEK.read_text(encoding="utf-8"))
    data[1]["answer_en"] = ""
    write_json(root / "infodeepseek" / "InfoDeepSeek_v1.json", data)
    result = runner.invoke(app, ["info", "--data-dir", str(root)])
    assert result.exit_code == 0, result.output
    assert "infodeepseek:21" in result.output and "no answer" in result.output
    result = runner.invoke(app, ["info", "--data-dir", str(root), "--strict"])
    assert result.exit_code == 2 and "infodeepseek:21" in result.output


def test_cli_info_missing_data(tmp_path: Path) -> None:
    result = runner.invoke(app, ["info", "--data-dir", str(tmp_path / "empty")])
    assert result.exit_code == 2
    assert "freshqa/FreshQA_v04072025.csv" in result.output


def test_cli_info_mini_absent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TREK_MINI_DIR", str(tmp_path / "nowhere"))
    result = runner.invoke(app, ["info", "--mini"])
    assert result.exit_code == 2 and "Could not load the bundled demo benchmark" in result.output
    assert "nowhere" in result.output


def test_cli_info_mini(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("trek.datasets.mini")
    qs = [
        Question(id="freshqa:m1", dataset="freshqa", question="q?", answers=["a"]),
        Question(id="sealqa:m2", dataset="sealqa", question="q?", answers=["a"], false_premise=True),
    ]
    docs = [
        Document(id="m1:gold:0", url="https://example.org/g", text="t", role="gold", date="2024-05-01"),
        Document(id="m1:outdated:0", url="https://example.org/o", text="t", role="outdated"),
    ]
    fake.load = lambda path=None: types.SimpleNamespace(questions=qs, documents=docs)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "trek.datasets.mini", fake)
    monkeypatch.setattr(sys.modules["trek.datasets"], "mini", fake, raising=False)
    result = runner.invoke(app, ["info", "--mini"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "2 questions, 2 documents" in out
    assert "Questions per dataset" in out and "Documents per role" in out
    assert "gold" in out and "outdated" in out and "dated" in out


def test_cli_download(tmp_path: Path, server: FileServer, monkeypatch: pytest.MonkeyPatch) -> None:
    body = b"invented,bytes\n"
    server.routes["/rev1/file"] = (200, body)
    monkeypatch.setattr(dl, "PINS", (fake_pin(server.url, body),))
    result = runner.invoke(app, ["download", "--data-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "freshqa" / "test.csv").read_bytes() == body
    assert "downloaded" in result.output and server.seen == ["/rev1/file"]

    monkeypatch.setattr(dl, "PINS", (fake_pin(refused_url(), body),))
    result = runner.invoke(app, ["download", "--data-dir", str(tmp_path / "other")])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)  # no traceback
    assert "freshqa/test.csv" in result.output and "offline" in result.output
    assert str(tmp_path / "other" / "freshqa" / "test.csv") in result.output  # the manual place
    assert not (tmp_path / "other").exists()

    result = runner.invoke(app, ["download", "--only", "nope"])
    assert result.exit_code == 2 and "error:" in result.output and "nope" in result.output


def test_load_report_consistency_helper() -> None:
    rep = LoadReport(dataset="d", path="p", rows_read=3, rows_kept=1, rows_filtered_out=1)
    assert not rep.is_consistent()
    skip = SkippedRow(row=2, id="d:2", field="f", reason="bad")
    rep.skipped.append(skip)
    assert rep.is_consistent() and skip.describe() == "field 'f': bad"
    assert rep.skip_reasons() == {"field 'f': bad": 1}
