"""Round 6 on the backend paths (issue 53): every conversation with a trace server ends by its
deadline (a server that trickles a byte at a time, one that always offers another page), a
redirect to another host is refused, an import never creates a store at its source, and two
exports of one run at once cannot both write. The servers are small loopback servers started
here. No network."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from test_trace_export import traced  # noqa: F401  (the fixture)
from typer.testing import CliRunner

from trek.cli import app

EX = Path(__file__).resolve().parents[1] / "examples"
MAP = "id=qid,question=text,answers=gold,gold_urls=sources,effective_year=year"
needs_phoenix = pytest.mark.skipif(importlib.util.find_spec("phoenix") is None, reason="the 'phoenix' extra")


class _Server:
    """A loopback HTTP server whose every request is answered by ``answer(handler)``."""

    def __init__(self, answer):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                outer.requests += 1
                answer(self)

            do_POST = do_GET

        self.requests = 0
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def trickle():
    """Headers at once, then one byte every 0.2 s of a long body."""
    def answer(h):
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", "100000")
        h.end_headers()
        try:
            for _ in range(100000):
                h.wfile.write(b" ")
                h.wfile.flush()
                time.sleep(0.2)
        except (BrokenPipeError, ConnectionResetError):
            pass
    s = _Server(answer)
    yield s
    s.close()


def _import(kind: str, url: str, out: Path) -> object:
    return CliRunner().invoke(app, ["import", kind, url, "--questions", str(EX / "questions.csv"), "--map", MAP,
                                    "--out", str(out)])


@needs_phoenix
def test_import_phoenix_from_a_trickling_server_ends_by_its_deadline(trickle, tmp_path, monkeypatch):
    monkeypatch.setenv("TREK_SERVER_DEADLINE", "2")
    t = time.monotonic()
    r = _import("phoenix", trickle.url, tmp_path / "run")
    took = time.monotonic() - t
    assert r.exit_code == 2 and "did not finish within 2 s" in r.output and "Traceback" not in r.output, r.output
    assert took < 15, took  # per-read timeouts never fire on a byte every 0.2 s
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("dest", ["otlp", pytest.param("phoenix", marks=needs_phoenix)])
def test_export_to_a_trickling_server_ends_by_its_deadline(trickle, traced, dest, monkeypatch):  # noqa: F811
    monkeypatch.setenv("TREK_SERVER_DEADLINE", "2")
    t = time.monotonic()
    r = CliRunner().invoke(app, ["trace", "export", str(traced), "--to", dest, trickle.url])
    assert r.exit_code == 2 and "did not finish within 2 s" in r.output and "Traceback" not in r.output, r.output
    assert time.monotonic() - t < 15


def test_a_bad_deadline_setting_is_one_line(traced, monkeypatch):  # noqa: F811
    for bad in ("nan", "-1", "soon"):
        monkeypatch.setenv("TREK_SERVER_DEADLINE", bad)
        r = CliRunner().invoke(app, ["trace", "export", str(traced), "--to", "otlp", "http://127.0.0.1:9"])
        assert r.exit_code == 2 and "TREK_SERVER_DEADLINE" in r.output and "Traceback" not in r.output, r.output


def test_the_deadline_says_it_is_waiting(capsys, monkeypatch):
    from trek.trace import destinations

    monkeypatch.setattr(destinations, "PROGRESS_EVERY", 0.2)
    d = destinations.Deadline("http://127.0.0.1:9", "reading spans", seconds=1.0)
    with pytest.raises(destinations.DeadlineExceeded, match="did not finish within 1 s"):
        destinations.call_within(d, lambda: time.sleep(5))
    assert "still waiting for http://127.0.0.1:9 (reading spans)" in capsys.readouterr().err


@needs_phoenix
def test_a_phoenix_server_that_always_offers_another_page_is_capped(tmp_path, monkeypatch):
    from trek.imports import phoenix

    served = {"n": 0}

    def answer(h):
        served["n"] += 1
        n = served["n"]
        span = {"id": f"s{n}", "name": "agent", "context": {"trace_id": f"{n:032x}", "span_id": f"{n:016x}"},
                "span_kind": "AGENT", "parent_id": None, "start_time": "2026-01-01T00:00:00+00:00",
                "end_time": "2026-01-01T00:00:01+00:00", "status_code": "OK", "status_message": "",
                "attributes": {}, "events": []}
        body = json.dumps({"data": [span], "next_cursor": f"c{n}"}).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    s = _Server(answer)
    monkeypatch.setattr(phoenix, "MAX_SPANS", 30)
    try:
        r = _import("phoenix", s.url, tmp_path / "run")
    finally:
        s.close()
    assert r.exit_code == 2 and "offers more than 30 spans" in r.output and "Traceback" not in r.output, r.output
    assert served["n"] <= 40  # it stopped asking


@pytest.fixture
def elsewhere():
    """A server that redirects every request to another host (localhost, not 127.0.0.1)."""
    def answer(h):
        h.send_response(302)
        h.send_header("Location", f"http://localhost:{h.server.server_address[1]}/stolen{h.path}")
        h.send_header("Content-Length", "0")
        h.end_headers()
    s = _Server(answer)
    yield s
    s.close()


@needs_phoenix
def test_import_phoenix_refuses_a_redirect_to_another_host(elsewhere, tmp_path):
    r = _import("phoenix", elsewhere.url, tmp_path / "run")
    assert r.exit_code == 2 and "refused a redirect to another host" in r.output, r.output


def test_export_otlp_refuses_a_redirect_to_another_host(elsewhere, traced):  # noqa: F811
    r = CliRunner().invoke(app, ["trace", "export", str(traced), "--to", "otlp", elsewhere.url])
    assert r.exit_code == 2 and "refused a redirect to another host" in r.output, r.output
    assert elsewhere.requests == 1


needs_mlflow = pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="the 'mlflow' extra")


@pytest.mark.slow
@needs_mlflow
def test_import_mlflow_refuses_a_redirect_to_another_host_and_does_not_retry_for_minutes(elsewhere, tmp_path):
    t = time.monotonic()
    r = _import("mlflow", elsewhere.url, tmp_path / "run")
    assert r.exit_code == 2 and "refused a redirect to another host" in r.output, r.output
    assert time.monotonic() - t < 120


@pytest.mark.slow
@needs_mlflow
def test_import_mlflow_against_a_closed_port_says_so_quickly(tmp_path):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    t = time.monotonic()
    r = _import("mlflow", f"http://127.0.0.1:{port}", tmp_path / "run")
    assert r.exit_code == 2 and "no trace" not in r.output and "Traceback" not in r.output, r.output
    assert "Connection refused" in r.output or "Failed to establish" in r.output, r.output
    assert time.monotonic() - t < 120  # MLflow's own 7 retries with backoff took minutes


@needs_mlflow
def test_import_mlflow_never_creates_a_store_at_its_source(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for uri, made in (("sqlite:///typo.db", tmp_path / "typo.db"), (str(tmp_path / "runs-typo"), tmp_path / "runs-typo"),
                      (f"file://{tmp_path}/mlruns-typo", tmp_path / "mlruns-typo")):
        r = _import("mlflow", uri, tmp_path / "run")
        assert r.exit_code == 2 and "an import only reads" in r.output and "Traceback" not in r.output, r.output
        assert not made.exists()
    assert not (tmp_path / "mlruns").exists() and not (tmp_path / "run").exists()


def test_two_exports_of_one_run_to_one_destination_cannot_run_at_once(traced, monkeypatch):  # noqa: F811
    import subprocess
    import sys
    import textwrap

    from trek.runs import RunDir

    hold = textwrap.dedent("""
        import sys
        from trek.runs import RunDir
        with RunDir(sys.argv[1]).output_lock("export-otlp"):
            print("held", flush=True)
            sys.stdin.readline()
    """)
    p = subprocess.Popen([sys.executable, "-c", hold, str(traced)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        r = CliRunner().invoke(app, ["trace", "export", str(traced), "--to", "otlp", "http://127.0.0.1:9"])
        assert r.exit_code == 2 and f"being written by process {p.pid}" in " ".join(r.output.split()), r.output
        assert "another export of this run to otlp" in " ".join(r.output.split())
    finally:
        p.kill()
        p.wait()
    with RunDir(traced).output_lock("export-otlp"):
        pass


@pytest.mark.slow
@needs_mlflow
def test_import_and_export_mlflow_against_a_trickling_server_end_by_the_deadline(trickle, traced, tmp_path,  # noqa: F811
                                                                                 monkeypatch):
    monkeypatch.setenv("TREK_SERVER_DEADLINE", "4")
    for args in (["import", "mlflow", trickle.url, "--questions", str(EX / "questions.csv"), "--map", MAP, "--out",
                  str(tmp_path / "run")],
                 ["trace", "export", str(traced), "--to", "mlflow", trickle.url]):
        t = time.monotonic()
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 2 and "Traceback" not in r.output, r.output
        assert "did not finish within 4 s" in r.output or "timed out" in r.output.lower(), r.output
        assert time.monotonic() - t < 60, args  # mlflow's import itself takes some 10 s


def test_a_timeout_cut_to_the_deadline_is_said_as_the_deadline():
    """On a loaded machine the client's read timeout (cut to what is left of the deadline) can fire
    before the deadline's own check: the error is still the deadline's, not the client's."""
    import httpx

    from trek.trace import destinations

    class Slow(httpx.BaseTransport):
        def handle_request(self, request):
            raise httpx.ReadTimeout("timed out", request=request)

    d = destinations.Deadline("http://127.0.0.1:9", "reading spans", seconds=5.0)
    with httpx.Client(transport=destinations.DeadlineTransport(Slow(), d), timeout=30.0) as c, \
            pytest.raises(destinations.DeadlineExceeded, match="did not finish within 5 s"):
        c.get("http://127.0.0.1:9/")
    # a client timeout shorter than what is left is the client's own error
    d = destinations.Deadline("http://127.0.0.1:9", "reading spans", seconds=60.0)
    with httpx.Client(transport=destinations.DeadlineTransport(Slow(), d), timeout=1.0) as c, \
            pytest.raises(httpx.ReadTimeout):
        c.get("http://127.0.0.1:9/")
