"""``trek local``: serve the embedded local model, or say whether it is installed."""

from __future__ import annotations

import time

import typer

from trek.local import MODEL_NAME, LocalModelUnavailable, LocalServer, find_model_file, server_available

app = typer.Typer(help="The embedded local model (llama.cpp server with SmolLM2-135M).", no_args_is_help=True)


@app.command("serve")
def serve(
    port: int = typer.Option(8080, "--port", min=1, max=65535, help="Port on 127.0.0.1."),
    n_ctx: int = typer.Option(4096, "--n-ctx", min=256, help="Context window in tokens."),
) -> None:
    """Start the local model's OpenAI-compatible server and keep it running until Ctrl-C."""
    server = LocalServer(port, n_ctx=n_ctx)
    try:
        server.start()
    except LocalModelUnavailable as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"local model {MODEL_NAME} serving at {server.base_url} (Ctrl-C to stop)")
    try:
        while server.proc is not None and server.proc.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        typer.echo("stopped")


@app.command("info")
def info() -> None:
    """Say whether the llama.cpp server and the model file are installed."""
    typer.echo(f"llama-cpp-python[server]: {'installed' if server_available() else 'missing'}")
    try:
        typer.echo(f"model: {find_model_file()}")
    except LocalModelUnavailable as e:
        typer.echo(f"model: missing ({e})")
