"""Options several commands share, defined once (same flag, default and meaning everywhere)."""

from __future__ import annotations

import typer

BASE_URL = typer.Option(None, "--base-url", envvar="OPENAI_BASE_URL", help="OpenAI-compatible endpoint.")
MAX_CONNECTIONS = typer.Option(16, "--max-connections", min=1, help="Model requests in flight at once.")
MAX_RETRIES = typer.Option(6, "--max-retries", min=0, help="Retries of a failing call before it is left pending.")
TIMEOUT = typer.Option(120.0, "--timeout", help="Seconds per model HTTP attempt.")
BUDGET = typer.Option(None, "--budget", help="Stop issuing model calls before this many US dollars are spent.")
PRICES = typer.Option(None, "--prices", help="Price table JSON merged over the bundled one [default: $TREK_PRICES].")
PROMPTS = typer.Option(None, "--prompts", envvar="TREK_PROMPTS", help="Folder of prompt template overrides.")
PROGRESS = typer.Option(True, "--progress/--no-progress", help="Show a progress bar.")
DRY_RUN = typer.Option(False, "--dry-run", help="Print the calls, tokens and dollars it would need; send nothing.")
CONFIRM_ABOVE = typer.Option(
    5.0, "--confirm-above", help="Ask before starting when the high estimate passes this many US dollars."
)
YES = typer.Option(False, "--yes", "-y", help="Start without asking, whatever the estimate.")
ASSUME_OUTPUT = typer.Option(
    4096, "--assume-output", min=1, help="Estimate: output tokens per call for requests that send no max_tokens."
)
BATCH = typer.Option(False, "--batch", help="Send through OpenAI's Batch API (half price, within 24 h); re-run to resume.")
BATCH_POLL = typer.Option(30.0, "--batch-poll", min=0.01, help="--batch: seconds between polls of a running batch.")
JUDGE_PARAM = typer.Option(
    None, "--judge-param",
    help="Judge request parameter KEY=VALUE, repeatable (temperature=0, reasoning_effort=high, "
    "max_completion_tokens=2000, ...). None is sent unless given.",
)

