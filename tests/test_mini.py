"""TrekBench-Mini: the bundled demo data follows its content rules, and the loader checks references.

The content tests run on the bundled ``data/mini`` folder, whether or not the separately written part
``data/mini/_part2/`` is present yet. Rules that concern only the root files (questions mini:01 to
mini:07 and their style spread) read the root files directly.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from trek.datasets import mini
from trek.types import Document, Question, RecordError, read_jsonl

BUNDLED = mini.BUNDLED_DIR
PART2 = BUNDLED / "_part2"
HAS_PART2 = (PART2 / "questions.jsonl").exists()  # a part written separately, before it is merged
ROOT_IDS = [f"mini:{i:02d}" for i in range(1, 8)]
STYLES = ("freshqa", "infodeepseek", "sealqa")
ROLES = ("gold", "outdated", "relevance")
MIN_WORDS, MAX_WORDS = 150, 400
MIN_QUESTIONS, MIN_PER_STYLE, MIN_FALSE_PREMISE = 36, 12, 2  # issue 14: enough for paired statistics
MIN_OUTDATED, MIN_RELEVANCE = 8, 4
GENERATED_MIN_WORDS, GENERATED_MAX_WORDS = 12, 60  # one claim in a short dated frame


@pytest.fixture(scope="module")
def bench() -> mini.MiniBenchmark:
    return mini.load(BUNDLED)


def _norm(s: str | None) -> str:
    return " ".join((s or "").casefold().split())


def _answers(q: Question) -> set[str]:
    return {_norm(a) for a in q.answers}


def _iso(value: Any) -> dt.date | None:
    if not isinstance(value, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        return None


def _by_role(b: mini.MiniBenchmark, qid: str) -> dict[str, list[Document]]:
    return {r: b.documents_for(qid, r) for r in ROLES}


def _no_problems(problems: list[str]) -> None:
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------------------------------
# the bundled data
# --------------------------------------------------------------------------------------------------


def test_bundled_benchmark_loads(bench: mini.MiniBenchmark) -> None:
    ids = [q.id for q in bench.questions]
    assert set(ROOT_IDS) <= set(ids)
    assert len(ids) >= MIN_QUESTIONS, f"the demo benchmark needs >= {MIN_QUESTIONS} questions, has {len(ids)}"
    assert bench.path == BUNDLED
    assert len(bench.documents) >= 10 * len(ids)


def test_root_files_hold_questions_01_to_07_with_the_style_spread() -> None:
    qs = read_jsonl(BUNDLED / "questions.jsonl", Question)
    if HAS_PART2:
        assert [q.id for q in qs] == ROOT_IDS
    else:  # after the merge the root holds every part
        assert [q.id for q in qs][:7] == ROOT_IDS
    mine = [q for q in qs if q.id in ROOT_IDS]
    assert Counter(q.dataset for q in mine) == {"freshqa": 3, "infodeepseek": 2, "sealqa": 2}
    fp = [q for q in mine if q.false_premise]
    assert len(fp) == 1 and fp[0].dataset == "infodeepseek"


def test_question_fields(bench: mini.MiniBenchmark) -> None:
    problems = []
    for q in bench.questions:
        where = f"{q.id} ({bench.sources[q.id]})"
        if not re.fullmatch(r"mini:\d{2}", q.id):
            problems.append(f"{where}: id must look like mini:NN")
        if q.dataset not in STYLES:
            problems.append(f"{where}: dataset {q.dataset!r} not one of {STYLES}")
        if q.split != "mini":
            problems.append(f"{where}: split must be 'mini'")
        if not q.question.strip().endswith("?"):
            problems.append(f"{where}: question should end with '?'")
        if any(not a.strip() for a in q.answers) or len(_answers(q)) != len(q.answers):
            problems.append(f"{where}: answers must be non-empty and distinct")
        md = q.metadata
        if md.get("benchmark") != "mini":
            problems.append(f"{where}: metadata.benchmark must be 'mini'")
        if md.get("style") != q.dataset:
            problems.append(f"{where}: metadata.style {md.get('style')!r} != dataset {q.dataset!r}")
        for key in ("topic", "why_hard"):
            if not isinstance(md.get(key), str) or not md[key].strip():
                problems.append(f"{where}: metadata.{key} missing")
        if q.dataset == "infodeepseek":
            if q.effective_year is not None or q.effective_year_raw is not None:
                problems.append(f"{where}: infodeepseek-style questions have no effective year")
        else:
            if q.effective_year is None or not 2023 <= q.effective_year <= 2025:
                problems.append(f"{where}: effective_year must be 2023-2025")
            if q.effective_year_raw != str(q.effective_year):
                problems.append(f"{where}: effective_year_raw must equal str(effective_year)")
        if q.false_premise and q.dataset != "infodeepseek":
            problems.append(f"{where}: only infodeepseek-style questions may have a false premise")
    _no_problems(problems)


def test_styles_are_spread_over_the_whole_benchmark(bench: mini.MiniBenchmark) -> None:
    counts = Counter(q.dataset for q in bench.questions)
    assert all(counts[s] >= MIN_PER_STYLE for s in STYLES), counts
    false_premise = [q.id for q in bench.questions if q.false_premise and q.dataset == "infodeepseek"]
    assert len(false_premise) >= MIN_FALSE_PREMISE, false_premise


def test_documents_per_role(bench: mini.MiniBenchmark) -> None:
    problems = []
    for q in bench.questions:
        docs = bench.documents_for(q.id)
        roles = Counter(d.role for d in docs)
        if set(roles) - set(ROLES):
            problems.append(f"{q.id}: unexpected roles {sorted(set(roles) - set(ROLES))}")
        if not 1 <= roles["gold"] <= 2:
            problems.append(f"{q.id}: needs 1-2 gold documents, has {roles['gold']}")
        if roles["outdated"] < MIN_OUTDATED:
            problems.append(f"{q.id}: needs >= {MIN_OUTDATED} outdated documents, has {roles['outdated']}")
        if roles["relevance"] < MIN_RELEVANCE:
            problems.append(f"{q.id}: needs >= {MIN_RELEVANCE} relevance documents, has {roles['relevance']}")
    assert all(d.question_id is not None for d in bench.documents)
    _no_problems(problems)


def test_document_ids_follow_question_role_number(bench: mini.MiniBenchmark) -> None:
    problems = []
    for q in bench.questions:
        for role, docs in _by_role(bench, q.id).items():
            numbers = []
            for d in docs:
                m = re.fullmatch(rf"{re.escape(q.id)}:{role}:(\d+)", d.id)
                if m is None:
                    problems.append(f"{d.id}: id must be {q.id}:{role}:N")
                else:
                    numbers.append(int(m.group(1)))
            if sorted(numbers) != list(range(1, len(numbers) + 1)):
                problems.append(f"{q.id}: {role} documents must be numbered 1..{len(numbers)}, got {numbers}")
    _no_problems(problems)


def test_document_fields_and_lengths(bench: mini.MiniBenchmark) -> None:
    problems = []
    for d in bench.documents:
        where = f"{d.id} ({bench.sources[d.id]})"
        words = len(d.text.split())
        low, high = (GENERATED_MIN_WORDS, GENERATED_MAX_WORDS) if mini.is_generated(d) else (MIN_WORDS, MAX_WORDS)
        if not low <= words <= high:
            problems.append(f"{where}: text has {words} words, needs {low}-{high}")
        paragraphs = [p for p in d.text.split("\n\n") if p.strip()]
        if len(paragraphs) < 2 and not mini.is_generated(d):
            problems.append(f"{where}: text should have a few paragraphs")
        if not re.fullmatch(r"https://[a-z0-9.-]+\.[a-z]{2,}(/\S*)?", d.url):
            problems.append(f"{where}: url {d.url!r} does not look like a web address")
        if not d.title.strip() or not (d.source or "").strip():
            problems.append(f"{where}: title and source are required")
        if not (d.supports_answer or "").strip():
            problems.append(f"{where}: supports_answer is required")
        if _iso(d.metadata.get("valid_from")) is None:
            problems.append(f"{where}: metadata.valid_from must be an ISO date")
        if not isinstance(d.metadata.get("note"), str) or not d.metadata["note"].strip():
            problems.append(f"{where}: metadata.note is required")
    _no_problems(problems)


def test_ids_and_urls_are_unique(bench: mini.MiniBenchmark) -> None:
    for values in (
        [q.id for q in bench.questions],
        [d.id for d in bench.documents],
        [d.url for d in bench.documents],
    ):
        dupes = [v for v, n in Counter(values).items() if n > 1]
        assert not dupes, dupes


def test_gold_urls_match_gold_documents(bench: mini.MiniBenchmark) -> None:
    for q in bench.questions:
        gold = bench.documents_for(q.id, "gold")
        assert sorted(q.gold_urls) == sorted(d.url for d in gold), q.id


def test_dates_order_gold_outdated_relevance(bench: mini.MiniBenchmark) -> None:
    problems = []
    for q in bench.questions:
        by = _by_role(bench, q.id)
        gold = by["gold"]
        if any(d.date is None for d in gold):
            problems.append(f"{q.id}: gold documents must be dated")
            continue
        first_gold = min(d.date for d in gold if d.date is not None)
        last_gold = max(d.date for d in gold if d.date is not None)
        undated = [d.id for d in by["outdated"] + by["relevance"] if d.date is None]
        if not 1 <= len(undated) <= 2:
            problems.append(f"{q.id}: 1-2 outdated/relevance documents should be undated, found {undated}")
        for d in by["outdated"]:
            if d.date is not None and not d.date < first_gold:
                problems.append(f"{d.id}: outdated document dated {d.date}, not before gold ({first_gold})")
        for d in by["relevance"]:
            if d.date is not None and not d.date > last_gold:
                problems.append(f"{d.id}: relevance document dated {d.date}, not after gold ({last_gold})")
        if q.effective_year is not None and last_gold.year > q.effective_year:
            problems.append(f"{q.id}: gold dated {last_gold} is after the effective year {q.effective_year}")
        # valid_from may follow the document's date (a fact announced before it takes effect), but
        # the gold fact must have become true after every outdated one
        gold_from = [_iso(d.metadata.get("valid_from")) for d in gold]
        old_from = [_iso(d.metadata.get("valid_from")) for d in by["outdated"]]
        if all(gold_from) and all(old_from) and old_from and min(gold_from) <= max(old_from):  # type: ignore[type-var]
            problems.append(f"{q.id}: the gold fact must have become true after every outdated fact")
    _no_problems(problems)


def test_supported_answers(bench: mini.MiniBenchmark) -> None:
    problems = []
    for q in bench.questions:
        ok = _answers(q)
        by = _by_role(bench, q.id)
        for d in by["gold"]:
            if _norm(d.supports_answer) not in ok:
                problems.append(f"{d.id}: gold supports {d.supports_answer!r}, not one of the answers")
        for d in by["outdated"] + by["relevance"]:
            if _norm(d.supports_answer) in ok:
                problems.append(f"{d.id}: a {d.role} document must support another answer")
        if len({_norm(d.supports_answer) for d in by["outdated"]}) < 2:
            problems.append(f"{q.id}: outdated documents should support several different old answers")
    _no_problems(problems)


def test_gold_text_states_the_answer(bench: mini.MiniBenchmark) -> None:
    # counting / comparison (sealqa-style) and false-premise answers need not appear verbatim
    problems = []
    for q in bench.questions:
        if q.dataset == "sealqa" or q.false_premise:
            continue
        texts = [_norm(d.text) for d in bench.documents_for(q.id, "gold")]
        if not any(_norm(a) in t for a in q.answers for t in texts):
            problems.append(f"{q.id}: no gold document states any of {q.answers}")
    _no_problems(problems)


def test_latest_document_shortcut_is_right_without_and_wrong_with_relevance(
    bench: mini.MiniBenchmark,
) -> None:
    problems = []
    for q in bench.questions:
        ok = _answers(q)
        base = bench.documents_for(q.id, ("gold", "outdated"))
        full = bench.documents_for(q.id, ROLES)
        on_base = mini.latest_document_answer(base)
        on_full = mini.latest_document_answer(full)
        if _norm(on_base) not in ok:
            problems.append(f"{q.id}: latest of gold+outdated gives {on_base!r}, should be the reference")
        if on_full is None or _norm(on_full) in ok:
            problems.append(f"{q.id}: latest of gold+outdated+relevance gives {on_full!r}, should be wrong")
    _no_problems(problems)


def test_written_files_are_one_json_object_per_line() -> None:
    for f in [BUNDLED / "questions.jsonl", BUNDLED / "documents.jsonl"]:
        lines = f.read_text(encoding="utf-8").splitlines()
        assert lines and all(isinstance(json.loads(line), dict) for line in lines), f


# --------------------------------------------------------------------------------------------------
# the loader
# --------------------------------------------------------------------------------------------------


def _q(qid: str = "mini:90", gold_urls: list[str] | None = None) -> dict[str, Any]:
    return {
        "id": qid,
        "dataset": "freshqa",
        "question": "Who?",
        "answers": ["Ada"],
        "effective_year": 2024,
        "effective_year_raw": "2024",
        "gold_urls": [f"https://example.org/{qid}/gold"] if gold_urls is None else gold_urls,
        "split": "mini",
    }


def _d(
    qid: str = "mini:90", role: str = "gold", n: int = 1, date: str | None = "2024-05-01", **kw: Any
) -> dict[str, Any]:
    rec = {
        "id": f"{qid}:{role}:{n}",
        "url": f"https://example.org/{qid}/{role}" + ("" if n == 1 else f"/{n}"),
        "date": date,
        "text": "Some text.",
        "question_id": qid,
        "role": role,
        "supports_answer": "Ada" if role == "gold" else "Bob",
    }
    rec.update(kw)
    return rec


def _write(folder: Path, questions: list[dict[str, Any]], documents: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, recs in (("questions.jsonl", questions), ("documents.jsonl", documents)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")


def _valid(root: Path) -> None:
    _write(root, [_q()], [_d(), _d(role="outdated", date="2020-01-01")])


def test_load_small_folder_with_subfolder(tmp_path: Path) -> None:
    _valid(tmp_path)
    _write(tmp_path / "_part2", [_q("mini:91")], [_d("mini:91")])
    b = mini.load(tmp_path)
    assert [q.id for q in b.questions] == ["mini:90", "mini:91"]
    assert b.sources["mini:91:gold:1"] == tmp_path / "_part2" / "documents.jsonl"
    assert [d.id for d in b.documents_for("mini:90", "outdated")] == ["mini:90:outdated:1"]
    assert len(b.documents_for("mini:90")) == 2
    assert b.documents_for("nope") == []
    assert b.question("mini:91").id == "mini:91"
    with pytest.raises(KeyError):
        b.question("nope")


def test_subfolder_may_hold_only_documents(tmp_path: Path) -> None:
    _write(tmp_path, [_q(), _q("mini:91")], [_d()])
    sub = tmp_path / "extra"
    sub.mkdir()
    (sub / "documents.jsonl").write_text(json.dumps(_d("mini:91")) + "\n", encoding="utf-8")
    assert len(mini.load(tmp_path).documents) == 2


def test_env_overrides_default_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(mini.MINI_DIR_ENV, raising=False)
    assert mini.default_mini_dir() == Path(mini.__file__).resolve().parents[2] / "data" / "mini"
    _valid(tmp_path)
    monkeypatch.setenv(mini.MINI_DIR_ENV, str(tmp_path))
    assert mini.default_mini_dir() == tmp_path
    assert [q.id for q in mini.load().questions] == ["mini:90"]


def _error(tmp_path: Path) -> str:
    with pytest.raises(ValueError) as info:
        mini.load(tmp_path)
    # the streaming check (trek wild run's) gives the same error, word for word
    with pytest.raises(type(info.value)) as scanned:
        mini.scan(tmp_path)
    assert str(scanned.value) == str(info.value)
    return str(info.value)


def test_error_duplicate_question_id_across_files(tmp_path: Path) -> None:
    _valid(tmp_path)
    _write(tmp_path / "_part2", [_q()], [])
    msg = _error(tmp_path)
    assert str(tmp_path / "_part2" / "questions.jsonl") in msg and "'mini:90'" in msg and "duplicate" in msg


def test_error_duplicate_document_id(tmp_path: Path) -> None:
    _write(tmp_path, [_q()], [_d(), _d(url="https://example.org/other")])
    msg = _error(tmp_path)
    assert str(tmp_path / "documents.jsonl") in msg and "'mini:90:gold:1'" in msg and "duplicate" in msg


def test_error_duplicate_url(tmp_path: Path) -> None:
    _write(tmp_path, [_q()], [_d(), _d(role="outdated", url="https://example.org/mini:90/gold")])
    msg = _error(tmp_path)
    assert str(tmp_path / "documents.jsonl") in msg and "'mini:90:outdated:1'" in msg and "url" in msg


def test_error_document_for_unknown_question(tmp_path: Path) -> None:
    _write(tmp_path, [_q()], [_d(), _d(role="outdated", question_id="mini:99")])
    msg = _error(tmp_path)
    assert str(tmp_path / "documents.jsonl") in msg and "'mini:90:outdated:1'" in msg and "'mini:99'" in msg


def test_error_question_without_gold(tmp_path: Path) -> None:
    _write(tmp_path, [_q()], [_d(role="outdated")])
    msg = _error(tmp_path)
    assert str(tmp_path / "questions.jsonl") in msg and "'mini:90'" in msg and "no gold" in msg


@pytest.mark.parametrize(
    "gold_urls",
    [[], ["https://example.org/wrong"], ["https://example.org/mini:90/gold"] * 2],
    ids=["missing", "wrong", "repeated"],
)
def test_error_gold_urls_mismatch(tmp_path: Path, gold_urls: list[str]) -> None:
    _write(tmp_path, [_q(gold_urls=gold_urls)], [_d()])
    msg = _error(tmp_path)
    assert str(tmp_path / "questions.jsonl") in msg and "'mini:90'" in msg and "gold_urls" in msg


def test_error_invalid_record_names_file_line_and_field(tmp_path: Path) -> None:
    _write(tmp_path, [_q()], [_d(), _d(role="outdated", colour="red")])
    with pytest.raises(RecordError) as info:
        mini.load(tmp_path)
    msg = str(info.value)
    assert str(tmp_path / "documents.jsonl") in msg and "line 2" in msg and "colour" in msg
    with pytest.raises(RecordError) as scanned:
        mini.scan(tmp_path)
    assert str(scanned.value) == msg


def test_error_missing_files_and_folder(tmp_path: Path) -> None:
    with pytest.raises(mini.MiniBenchmarkError, match="does not exist"):
        mini.load(tmp_path / "absent")
    _write(tmp_path, [_q()], [_d()])
    (tmp_path / "documents.jsonl").unlink()
    with pytest.raises(RecordError, match="documents.jsonl"):
        mini.load(tmp_path)
    with pytest.raises(RecordError, match="documents.jsonl"):
        mini.scan(tmp_path)
    with pytest.raises(mini.MiniBenchmarkError, match="does not exist"):
        mini.scan(tmp_path / "absent")


def _doc(date: str | None, answer: str, n: int) -> Document:
    return Document.model_validate(_d(role="outdated", n=n, date=date, supports_answer=answer))


def test_latest_document_answer() -> None:
    assert mini.latest_document_answer([]) is None
    assert mini.latest_document_answer([_doc(None, "A", 1)]) is None
    docs = [_doc("2020-01-01", "A", 1), _doc("2022-01-01", "B", 2), _doc(None, "C", 3)]
    assert mini.latest_document_answer(docs) == "B"
    assert mini.latest_document_answer([*docs, _doc("2022-01-01", "B", 4)]) == "B"
    assert mini.latest_document_answer([*docs, _doc("2022-01-01", "D", 4)]) is None  # tie: undecided
