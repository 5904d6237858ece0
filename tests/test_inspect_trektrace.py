"""trek.inspect against the real inspect_ai wheel and Trek's fake OpenAI server (no network).

inspect talks to the fake server through its OpenAI-compatible provider (``openai-api/fake/...``
with ``FAKE_BASE_URL``); inspect's ``mockllm`` is not used (it downloads tokenizer tables)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

inspect_ai = pytest.importorskip("inspect_ai")

from _inspect_plan import MODEL, RESULTS, script  # noqa: E402

from trek.testing.fake_openai import FakeOpenAIServer  # noqa: E402


@pytest.fixture(scope="module")
def fake():
    with FakeOpenAIServer(script=script()) as server:
        yield server


@pytest.fixture()
def fake_env(fake, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_API_KEY", "x")
    monkeypatch.setenv("FAKE_BASE_URL", fake.base_url)
    monkeypatch.setenv("INSPECT_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.chdir(tmp_path)
    return fake


@pytest.fixture(scope="module")
def mini_log(fake, tmp_path_factory):
    """One trek/mini log of the six PLAN questions (written once for the module)."""
    tmp = tmp_path_factory.mktemp("mini")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FAKE_API_KEY", "x")
        mp.setenv("FAKE_BASE_URL", fake.base_url)
        mp.chdir(tmp)
        from inspect_ai import eval as inspect_eval

        [log] = inspect_eval("trek/mini", model=MODEL, task_args={"results": RESULTS}, limit=6,
                             log_dir=str(tmp / "logs"), display="none", log_format="eval")
    assert log.status == "success", log.error
    return log


def _trektrace(fake, **params):
    from trek.inspect.scorers import trektrace

    return trektrace(judge="oracle", **params)


def _score(log, scorer, fake):
    from inspect_ai import score

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FAKE_API_KEY", "x")
        mp.setenv("FAKE_BASE_URL", fake.base_url)
        return score(log, scorer, action="append", display="none")


@pytest.mark.slow
def test_mini_eval_grades_every_sample(mini_log):
    grades = {s.id: s.scores["grade"] for s in mini_log.samples}
    assert len(grades) == 6
    assert all(g.value in ("C", "I", "N") for g in grades.values()), grades
    assert grades["mini:06"].value == "C" and grades["mini:01"].value in ("I", "N")
    # the transcript records what trek/search retrieved, as URL citations
    tool_msgs = [m for m in mini_log.samples[0].messages if m.role == "tool"]
    assert tool_msgs and any(c.citations for c in tool_msgs[0].content)


@pytest.mark.slow
def test_trektrace_scores_each_sample_with_labels_or_a_reason(mini_log, fake):
    scored = _score(mini_log, _trektrace(fake), fake)
    for s in scored.samples:
        sc = s.scores["trektrace"]
        if isinstance(sc.value, float):
            assert math.isnan(sc.value) and sc.reason and sc.explanation
            continue
        assert set(sc.value) == {"pre_retrieval", "retrieval", "interpretation", "distraction", "randomness",
                                 "correct"}
        if sc.value["correct"] == 0:
            assert sum(sc.value.values()) >= 1 and sc.explanation and "Labels:" in sc.explanation
            assert "matched_urls" in sc.metadata and "gold_only_answer" in sc.metadata
    metrics = scored.results.scores[-1].metrics
    assert metrics["traced"].value >= 4 and metrics["correct"].value >= 1


def _labels(scored) -> dict[str, set[str]]:
    out = {}
    for s in scored.samples:
        v = s.scores["trektrace"].value
        if isinstance(v, dict) and not v["correct"]:
            out[str(s.id)] = {k for k, x in v.items() if x and k != "correct"}
    return out


def _trek(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, "-m", "trek.cli", *args], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    return res


@pytest.mark.slow
def test_every_label_occurs_and_inside_equals_outside(mini_log, fake, tmp_path):
    """The labels of trek/trektrace equal trek import inspect-ai + trek grade + trek trace on the
    same log with the same judges (the exact judge; the probes on the same fake model)."""
    from trek.trace import load_trace

    scored = _score(mini_log, _trektrace(fake), fake)
    inside = _labels(scored)
    assert set().union(*inside.values()) == {"pre_retrieval", "retrieval", "interpretation", "distraction",
                                             "randomness"}, inside
    run = tmp_path / "run"
    _trek("import", "inspect-ai", mini_log.location, "--out", str(run))
    _trek("grade", str(run), "--judge", "oracle", "--no-progress")
    _trek("trace", "run", str(run), "--judge", "oracle", "--model", "fake-model", "--base-url", fake.base_url,
          "--no-progress")
    outside = {r.question_id: {lab.lower().replace("-", "_") for lab in r.labels}
               for r in load_trace(run) if r.status == "done"}
    assert outside == inside


@pytest.mark.slow
def test_import_carries_trek_scores_into_grades_and_trace(mini_log, fake, tmp_path):
    from inspect_ai.log import write_eval_log

    from trek import runs
    from trek.trace import load_trace

    scored = _score(mini_log, _trektrace(fake), fake)
    path = tmp_path / "scored.eval"
    write_eval_log(scored, str(path))
    run = tmp_path / "run"
    res = _trek("import", "inspect-ai", str(path), "--out", str(run))
    assert "carried over" in res.stderr + res.stdout
    grades = [json.loads(line) for line in (run / runs.GRADES).read_text().splitlines()]
    assert {g["question_id"] for g in grades} == {str(s.id) for s in scored.samples}
    carried = {r.question_id: r.labels for r in load_trace(run)}
    for s in scored.samples:
        v = s.scores["trektrace"].value
        if isinstance(v, dict) and not v["correct"]:
            assert {x.lower().replace("-", "_") for x in carried[str(s.id)]} == {k for k, x in v.items()
                                                                                if x and k != "correct"}


@pytest.mark.slow
def test_a_log_of_another_task_is_unscored_with_a_reason(fake_env, tmp_path):
    """A log written by a small task of our own (no gold URLs, no Trek metadata)."""
    from inspect_ai import Task, score
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate

    task = Task(dataset=[Sample(id="capital", input="What is the capital of Freedonia?", target="Fredville"),
                         Sample(id="river", input="Name the longest river of Sylvania.", target="Sylva")],
                solver=generate(), scorer=includes(), name="other_task")
    [log] = inspect_eval(task, model=MODEL, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success"
    from trek.inspect.scorers import trektrace

    scored = score(log, trektrace(), action="append", display="none")
    for s in scored.samples:
        sc = s.scores["trektrace"]
        assert isinstance(sc.value, float) and math.isnan(sc.value)
        assert sc.reason == "scoring_failed" and "no gold URLs" in sc.explanation
    assert scored.results.scores[-1].unscored_samples == 2


def test_import_trek_does_not_import_inspect_ai():
    code = "import sys, trek, trek.imports.inspect_ai; print('inspect_ai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


def test_components_are_registered_under_trek():
    from inspect_ai._util.registry import registry_lookup

    found = {(t, n): registry_lookup(t, n) is not None for t, n in [
        ("task", "trek/wild"), ("task", "trek/mini"), ("task", "trek/ctrl"), ("scorer", "trek/grade"),
        ("scorer", "trek/trektrace"), ("tool", "trek/search")]}
    assert all(found.values()), found


GOLD = "https://freedonia-news.example/2025/new-capital"


@pytest.mark.slow
def test_a_missing_gold_page_is_unscored_and_a_page_store_fills_it(monkeypatch, tmp_path):
    """A task of our own with gold URLs but no search: without the gold page the gold-only probe
    cannot run (unscored, reason named); with -S pages=DIR holding it the case is traced."""
    from inspect_ai import Task, score
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.solver import generate

    from trek.inspect.scorers import trektrace
    from trek.pages import Page, PageStore, normalize_url

    task = Task(dataset=[Sample(id="capital", input="What is the capital of Freedonia?", target="Fredville",
                                metadata={"gold_urls": [GOLD], "effective_year": 2025})],
                solver=generate(), name="own_task")
    with FakeOpenAIServer(script=[
        {"any_pattern": r"gold-only probe", "reply": json.dumps({"answer": "Fredville", "used_urls": [GOLD],
                                                                  "reasoning": "The page says so."})},
        {"any_pattern": r"answer check[\s\S]*Candidate answer: Fredville", "reply": json.dumps(
            {"correct": True, "reason": "Same city."})},
        {"any_pattern": r"answer check", "reply": json.dumps({"correct": False, "reason": "Another city."})},
        {"any_pattern": r"Answer to grade", "reply": "verdict: incorrect"},
        {"any_pattern": r"gold-plus-noise probe", "reply": json.dumps({"answer": "Fredville", "used_urls": [],
                                                                        "reasoning": "Same page."})},
        {"reply": "Oldtown"},
    ]) as srv:
        monkeypatch.setenv("FAKE_API_KEY", "x")
        monkeypatch.setenv("FAKE_BASE_URL", srv.base_url)
        # a model name of its own: inspect keeps one client per model name, bound to the first server
        [log] = inspect_eval(task, model="openai-api/fake/gold-page-model", log_dir=str(tmp_path / "logs"),
                             display="none")
        missing = score(log, trektrace(), action="append", display="none").samples[0].scores["trektrace"]
        store = PageStore(tmp_path / "pages.sqlite")
        store.put(Page(url=GOLD, key=normalize_url(GOLD), title="New capital", text="Since 2025 the capital of Freedonia is Fredville."))
        store.close()
        found = score(log, trektrace(pages=str(tmp_path)), action="append", display="none").samples[0]
    assert math.isnan(missing.value) and "no gold page" in missing.explanation
    value = found.scores["trektrace"].value
    # nothing was searched (Pre-retrieval); both probes answered right from the gold page
    assert value == {"pre_retrieval": 1, "retrieval": 0, "interpretation": 0, "distraction": 0, "randomness": 0,
                     "correct": 0}, found.scores["trektrace"].explanation
    assert found.scores["trektrace"].metadata["gold_only_answer"] == "Fredville"
