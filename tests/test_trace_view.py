"""The case viewer: escaped, self-contained HTML, checked in a real headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.trace.records import Step, TraceRecord, UrlMatch
from trek.trace.view import render_html, write_view
from trek.types import write_jsonl

# Payloads that would leave a mark in the DOM if they ran; the marks are assembled at run time,
# so they never appear in the page's source text.
SCRIPT = "<script>document.title='PW'+'NED'</script>"
IMG = "<img src=x onerror=\"document.body.setAttribute('data-hit','IMG'+'FIRED')\">"
CLOSE = "</details></div><script>document.body.setAttribute('data-x','BRO'+'KEN')</script>"


def rec(qid, labels, dataset="freshqa", status="done"):
    return TraceRecord(
        question_id=qid, dataset=dataset, question=f"What is {SCRIPT} in {qid}?", answers=[IMG],
        gold_urls=["https://gold.example/a"], prediction=CLOSE, original_outcome="incorrect",
        retrieved_urls=["https://www.gold.example/a/", "https://other.example/b"],
        url_matches=[UrlMatch(gold_url="https://gold.example/a", matched_url="https://www.gold.example/a/")],
        status=status, labels=labels, key_evidence=IMG, gold_only_answer=SCRIPT,
        steps=[Step(name="gold_only", role="evaluated", model="m", endpoint="e", template="t", version="v",
                    status="ok", raw=[SCRIPT + IMG])],
    )


RECORDS = [rec("q1", ["Retrieval", "Distraction"]), rec("q2", ["Interpretation"], "sealqa"),
           rec("q3", ["Randomness"]), rec("q4", [], status="pending")]


def test_everything_is_escaped_and_self_contained():
    page = render_html([("run", r) for r in RECORDS])
    assert "<script>document" not in page and "<img" not in page
    assert "&lt;script&gt;document.title=&#x27;PW&#x27;+&#x27;NED&#x27;&lt;/script&gt;" in page
    assert page.count("<script>") == 1  # only the viewer's own filter script
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # no external resource
    assert "Content-Security-Policy" in page
    assert page.count('class="case"') == len(RECORDS)
    assert "<mark>https://www.gold.example/a/</mark>" in page  # the matched URL is highlighted
    assert "<mark>https://other.example/b" not in page
    assert "stale reference?" not in page
    assert "stale reference?" in render_html([("run", RECORDS[0].model_copy(update={"stale_reference": True}))])


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def dump_dom(path, tmp_path):
    exe = _chromium()
    out = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed")
def test_in_a_headless_browser_nothing_runs_and_every_case_is_shown(tmp_path):
    # positive control: the same payloads in an unescaped page do run in this browser
    raw = tmp_path / "raw.html"
    raw.write_text(f"<!DOCTYPE html><html><head><title>t</title></head><body>{SCRIPT}{IMG}</body></html>")
    control = dump_dom(raw, tmp_path)
    assert "PWNED" in control and "IMGFIRED" in control

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_jsonl(run_dir / runs.TRACE, RECORDS)
    path = write_view([run_dir])
    dom = dump_dom(path, tmp_path)
    assert "PWNED" not in dom and "IMGFIRED" not in dom and "BROKEN" not in dom
    assert "&lt;script&gt;document.title" in dom  # shown as text
    assert len(re.findall(r'<details class="case"', dom)) == len(RECORDS)
    # the viewer's own script ran and counted the cases it shows
    assert f"{len(RECORDS)} of {len(RECORDS)} cases shown" in dom


def test_view_cli(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    res = CliRunner().invoke(app, ["trace", "view", str(run_dir)])
    assert res.exit_code == 2
    write_jsonl(run_dir / runs.TRACE, RECORDS[:2])
    res = CliRunner().invoke(app, ["trace", "view", str(run_dir), "--out", str(tmp_path / "v.html")])
    assert res.exit_code == 0 and (tmp_path / "v.html").read_text().count('class="case"') == 2
