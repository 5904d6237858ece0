"""The tasks trek/wild and trek/ctrl against the real inspect_ai wheel and the fake OpenAI server
(no network): a small invented Wild (tests/_full_run_world.py) and the recorded Ctrl build."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from _inspect_plan import MODEL  # noqa: E402

from trek.testing.fake_openai import FakeOpenAIServer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CONTEXTS = REPO / "data" / "runs" / "ctrl" / "build" / "contexts.jsonl"


@pytest.fixture()
def fake_env(monkeypatch, tmp_path):
    def start(rules):
        srv = FakeOpenAIServer(script=rules).start()
        monkeypatch.setenv("FAKE_API_KEY", "x")
        monkeypatch.setenv("FAKE_BASE_URL", srv.base_url)
        monkeypatch.chdir(tmp_path)
        started.append(srv)
        return srv

    started: list[FakeOpenAIServer] = []
    yield start
    for s in started:
        s.stop()


def _run(task, tmp_path, model, **kw):
    """One eval; each test names its own model (inspect keeps one client per model name, bound to the
    server the first eval of that name reached)."""
    from inspect_ai import eval as inspect_eval

    [log] = inspect_eval(task, model=f"{MODEL}-{model}", log_dir=str(tmp_path / "logs"), display="none", **kw)
    assert log.status == "success", log.error
    return log


@pytest.mark.slow
def test_wild_samples_carry_the_question_and_are_graded(fake_env, tmp_path):
    from _full_run_world import source_files

    from trek.datasets.common import LAYOUT
    from trek.inspect.tasks import wild

    data = tmp_path / "data"
    for key, blob in source_files().items():
        f = data / LAYOUT[key].relpath
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(blob)
    with pytest.raises(Exception, match="(?i)fewer|partial|paper"):
        wild(search="none", data_dir=str(data))  # a short set is refused unless allowed
    fake_env([{"reply": "I cannot say"}])
    log = _run(wild(search="none", data_dir=str(data), allow_partial=True, datasets="freshqa,sealqa", judge="model"),
               tmp_path, "wild")
    assert log.samples and {s.metadata["dataset"] for s in log.samples} == {"freshqa", "sealqa"}
    for s in log.samples:
        assert s.metadata["gold_urls"] and s.target and s.metadata["trek"] is True
        assert str(s.metadata["effective_year"]) in s.input  # the answer prompt names the year
        sc = s.scores["grade"]
        # the fake judge's reply is no verdict: unscored with a reason, never a wrong answer
        assert sc.reason == "grader_failed" or sc.value in ("C", "I", "N")


@pytest.mark.slow
def test_ctrl_answers_from_the_frozen_context_with_trek_methods(fake_env, tmp_path):
    from trek.inspect.tasks import ctrl

    fake_env([{"any_pattern": r"(?s)Document 1.*Brackwater Lane", "reply": "Dana Okafor"},
              {"reply": "Nobody"}])
    log = _run(ctrl(contexts=str(CONTEXTS), condition="GOLD", method="direct", judge="oracle"), tmp_path, "ctrl", limit=3)
    scores = {s.id: s.scores["grade"].value for s in log.samples}
    assert scores["mini:01"] == "C" and len(scores) == 3
    assert all(v in ("C", "I", "N") for v in scores.values())
    with pytest.raises(ValueError, match="method must be one of"):
        ctrl(contexts=str(CONTEXTS), method="nope")
