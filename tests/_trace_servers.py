"""Real trace servers for the tests: ``phoenix serve`` and ``mlflow server`` on sqlite in a
temporary folder, on 127.0.0.1 at a free port, telemetry off, no network. Each is started in its
own process group; :meth:`TraceServer.wait` polls its health endpoint until it answers (bounded;
a server that exits or stays silent fails with the end of its log) and records how long the
start took; :meth:`TraceServer.stop` ends that process group (SIGTERM, then SIGKILL)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

#: How long a server may take to answer its health check (both start in 40-60 s on a busy machine).
START_TIMEOUT = 300.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _offline_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(NO_PROXY="127.0.0.1,localhost", DO_NOT_TRACK="1", PYTHONUNBUFFERED="1")
    return env


class TraceServer:
    """One server process: ``url`` once started, ``startup`` its start time in seconds."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], folder: Path, port: int, health: str):
        self.name, self.argv, self.env, self.folder, self.port, self.health = name, argv, env, folder, port, health
        self.url = f"http://127.0.0.1:{port}"
        self.log = folder / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.startup: float | None = None

    def start(self) -> TraceServer:
        self.t0 = time.monotonic()
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(self.argv, env=self.env, cwd=self.folder, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    def _tail(self) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-25:])

    def wait(self, timeout: float = START_TIMEOUT) -> TraceServer:
        assert self.proc is not None
        deadline = self.t0 + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} while starting:\n{self._tail()}")
            try:
                if httpx.get(self.url + self.health, timeout=2.0).status_code == 200:
                    self.startup = time.monotonic() - self.t0
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)  # polling a process we do not control: no event to wait on
        self.stop()
        raise RuntimeError(f"{self.name} did not answer {self.health} within {timeout:.0f} s:\n{self._tail()}")

    def terminate(self) -> None:
        """Ask the server's process group to stop (SIGTERM)."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM to the server's process group, SIGKILL after ``grace`` seconds."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.terminate()
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            self.proc.wait(10)


def phoenix_server(folder: Path) -> TraceServer:
    """``phoenix serve`` with its sqlite database and working folder in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = _offline_env()
    env.update(PHOENIX_WORKING_DIR=str(folder), PHOENIX_SQL_DATABASE_URL=f"sqlite:///{folder / 'phoenix.db'}",
               PHOENIX_TELEMETRY_ENABLED="false", PHOENIX_HOST="127.0.0.1", PHOENIX_PORT=str(port),
               PHOENIX_GRPC_PORT=str(free_port()), PHOENIX_LOGGING_LEVEL="warning", PHOENIX_DB_LOGGING_LEVEL="warning")
    return TraceServer("phoenix", [str(Path(sys.executable).with_name("phoenix")), "serve"], env, folder, port,
                       "/healthz")


def mlflow_server(folder: Path) -> TraceServer:
    """``mlflow server`` with a sqlite backend store and the artifacts in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = _offline_env()
    env.update(MLFLOW_DISABLE_TELEMETRY="true")
    argv = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
            "--default-artifact-root", str(folder / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
            "--workers", "1"]
    return TraceServer("mlflow", argv, env, folder, port, "/health")
