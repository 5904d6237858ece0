"""The embedded model's server dies with the process that started it, also on ``kill -9`` of that
process (no ``finally`` runs then). A stand-in server (Python's ``http.server`` answering
``/v1/models``) takes the place of llama.cpp, started by the real :class:`trek.local.LocalServer`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from trek.local import with_lifeline

PARENT = textwrap.dedent("""
    import sys, time
    import trek.local as L

    L.server_available = lambda: True  # the stand-in needs no llama.cpp

    class StandIn(L.LocalServer):
        def command(self):
            return [sys.executable, "-m", "http.server", str(self.port), "--bind", "127.0.0.1",
                    "--directory", sys.argv[1]]

    server = StandIn(startup_timeout=60).start()
    print(server.proc.pid, flush=True)
    time.sleep(600)
""")


def gone(pid: int) -> bool:
    """The process has ended (no such process, or a zombie waiting for its reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states from /proc")
def test_the_server_dies_with_its_parent_on_kill_9(tmp_path):
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "models").write_text('{"data": []}')
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    child = None
    try:
        line = parent.stdout.readline()
        assert line.strip().isdigit(), "the parent did not start its server"
        child = int(line)
        assert not gone(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 30
        while not gone(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gone(child), f"the server {child} outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        if child is not None and not gone(child):
            os.kill(child, signal.SIGKILL)


def test_stop_ends_the_server_and_its_lifeline(tmp_path, monkeypatch):
    import trek.local as L

    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "models").write_text('{"data": []}')

    class StandIn(L.LocalServer):
        def command(self):
            return [sys.executable, "-m", "http.server", str(self.port), "--bind", "127.0.0.1", "--directory",
                    str(tmp_path)]

    monkeypatch.setattr(L, "server_available", lambda: True)
    server = StandIn(startup_timeout=60).start()
    proc = server.proc
    server.stop()
    assert proc.poll() is not None and server._lifeline is None


def test_only_python_module_commands_get_a_lifeline():
    cmd = with_lifeline([sys.executable, "-m", "pkg.mod", "--x", "1"], 7)
    assert cmd[:2] == [sys.executable, "-c"] and cmd[3:] == ["7", "-m", "pkg.mod", "--x", "1"]
    with pytest.raises(ValueError, match="python -m MODULE"):
        with_lifeline(["llama-server", "--port", "1"], 7)
