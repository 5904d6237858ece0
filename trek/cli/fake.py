"""``trek fake-server``: the deterministic fake OpenAI server (:mod:`trek.testing.fake_openai`)
as a command, with the shipped ``demo`` script one option away."""

from __future__ import annotations

import typer


def fake_server_command(
    port: int = typer.Option(0, "--port", help="TCP port (0: a free one; the start line names it)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    script: str = typer.Option(None, "--script", metavar="FILE|demo",
                               help="Scripted replies: a JSON file (trek schema fake-script), or demo for a toy "
                                    "model and toy judges that answer Trek's own prompts."),
    latency: float = typer.Option(0.0, "--latency", metavar="SECONDS", help="Wait before every reply."),
    fault_rate: float = typer.Option(0.0, "--fault-rate", metavar="P", help="Share of requests given a fault."),
    seed: int = typer.Option(0, "--seed", help="Seed of the fault decisions."),
) -> None:
    """Serve a fake OpenAI-compatible endpoint on this machine until Ctrl-C.

    Prints one line, "fake-openai listening on http://HOST:PORT/v1"; point --base-url (or
    $OPENAI_BASE_URL) there. With --script demo, Trek's graders, TrekTrace steps and search agents
    get deterministic replies in their own formats, right or wrong as the pages decide (see
    trek.testing.demo). The other options of the server: python -m trek.testing.fake_openai --help.
    """
    from trek.testing.fake_openai import main

    argv = ["--port", str(port), "--host", host, "--latency", str(latency), "--fault-rate", str(fault_rate),
            "--seed", str(seed)]
    if script:
        argv += ["--script", script]
    raise typer.Exit(main(argv, prog="trek fake-server"))
