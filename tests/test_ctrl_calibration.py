"""The fabrication similarity threshold per embedder: the calibration set, what a threshold
separates on it, the equivalent of the paper's 0.90, the default it gives, and `trek ctrl calibrate`."""

from __future__ import annotations

import hashlib
import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from trek.cli import app
from trek.ctrl import calibration as K
from trek.ctrl import fabrication as F
from trek.ctrl.common import CtrlError
from trek.embeddings import make_embedder


def test_the_set_holds_edits_rewrites_and_unrelated_pairs_of_our_own_passages():
    pairs = K.load_pairs()
    kinds = [p.kind for p in pairs]
    n = len(json.loads(K.SET_PATH.read_text())["passages"])
    assert kinds.count("rewrite") == n == 8 and kinds.count("edit") == 3 * n
    assert kinds.count("unrelated") == n * (n - 1) // 2
    for p in pairs:
        assert p.a != p.b
        if p.kind == "edit":  # an edit changes a few words and keeps the rest
            assert abs(len(p.a) - len(p.b)) < 40


def test_a_broken_set_names_the_file_and_the_passage(tmp_path):
    data = json.loads(K.SET_PATH.read_text())
    data["passages"][1]["edits"][0]["replacements"][0]["find"] = "words that are not there"
    bad = tmp_path / "set.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(CtrlError, match=r"set\.json: ferry: .*not in the passage"):
        K.load_pairs(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(CtrlError, match=r"set\.json: not a calibration set"):
        K.load_pairs(bad)


def test_the_equivalent_threshold_keeps_the_relative_place_between_unrelated_and_identical():
    assert K.equivalent_threshold(0.20) == pytest.approx(0.90)
    assert K.equivalent_threshold(0.5) == pytest.approx(0.5 + 0.875 * 0.5)
    assert K.equivalent_threshold(0.0, reference_unrelated=0.5) == pytest.approx(0.8)
    with pytest.raises(ValueError):
        K.equivalent_threshold(0.3, reference_unrelated=0.95)


def test_wordllama_default_is_its_measured_equivalent_and_separates_the_set():
    cal = K.calibrate(make_embedder("wordllama"), (0.90, K.CALIBRATED["wordllama-256"]))
    assert cal.embedder == "wordllama-256"
    assert round(cal.equivalent, 2) == K.CALIBRATED["wordllama-256"]
    low, high = cal.separating_interval()
    assert low < K.CALIBRATED["wordllama-256"] <= high
    for t in (0.90, K.CALIBRATED["wordllama-256"]):
        assert cal.separation(t) == {"threshold": t, "edits_kept": 1.0, "rewrites_rejected": 1.0,
                                     "unrelated_rejected": 1.0}
    assert "published 0.20" in cal.notes[0]


def test_the_default_threshold_follows_the_embedder():
    assert K.default_min_similarity("openai:text-embedding-3-small")[0] == 0.90
    assert K.default_min_similarity("wordllama-256")[0] == K.CALIBRATED["wordllama-256"]
    value, why = K.default_min_similarity("openai:some-other-embedder")
    assert value == 0.90 and "no calibrated threshold" in why and "trek ctrl calibrate" in why

    class Named:
        name = "wordllama-256"

    assert F.resolve_settings(F.FabricationSettings(), Named()).min_similarity == K.CALIBRATED["wordllama-256"]
    assert F.resolve_settings(F.FabricationSettings(min_similarity=0.5), Named()).min_similarity == 0.5


def _hashed_bag_of_words(text: str, dim: int = 64) -> list[float]:
    v = np.zeros(dim)
    for w in re.findall(r"\w+", text.lower()):
        v[int(hashlib.sha256(w.encode()).hexdigest(), 16) % dim] += 1.0
    return v.tolist()


def test_cli_calibrates_an_openai_compatible_endpoint_and_measures_its_unrelated_level(tmp_path):
    from _servers import LoopbackApp
    from aiohttp import web

    calls = []

    async def handler(request):
        body = await request.json()
        calls.append(len(body["input"]))
        data = [{"object": "embedding", "index": i, "embedding": _hashed_bag_of_words(t)}
                for i, t in enumerate(body["input"])]
        return web.json_response({"object": "list", "data": data, "model": body["model"],
                                  "usage": {"prompt_tokens": 1, "total_tokens": 1}})

    out = tmp_path / "cal.json"
    with LoopbackApp({"/v1/embeddings": handler}) as srv:
        res = CliRunner().invoke(app, ["ctrl", "calibrate", "--embeddings", "openai:text-embedding-3-small",
                                       "--base-url", srv.base_url, "--thresholds", "0.9", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert calls == [8 + 8 + 24]  # every distinct text once, in one request
    report = json.loads(out.read_text())
    assert report["embedder"] == "openai:text-embedding-3-small"
    assert report["reference_unrelated"] == pytest.approx(report["unrelated_level"])  # measured, not published
    assert report["equivalent"] == pytest.approx(0.90)
    assert "measured here" in res.output and "default threshold for openai:text-embedding-3-small: 0.90" in res.output
    assert len(report["pairs"]["edit"]) == 24 and {"pair", "similarity"} <= set(report["pairs"]["edit"][0])


def test_cli_calibrate_refuses_bad_thresholds():
    res = CliRunner().invoke(app, ["ctrl", "calibrate", "--thresholds", "0.9,abc"])
    assert res.exit_code != 0 and "--thresholds" in res.output
    res = CliRunner().invoke(app, ["ctrl", "calibrate", "--thresholds", "1.5"])
    assert res.exit_code != 0 and "each in (0, 1]" in res.output
