"""What several commands share, defined once: options (same flag, default and meaning everywhere),
groups of options that always come together, and the way a command stops on an error."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import math
import sys
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NoReturn

import typer
from rich.console import Console


def check_number(name: str, value: float | None, low: float | None = None, high: float | None = None, *,
                 low_open: bool = False, high_open: bool = False) -> float | None:
    """The one check of a numeric setting: ``value`` (``None``: not given) must be a finite number
    in the range (``low``/``high`` bounds, excluded when ``low_open``/``high_open``); otherwise a
    :class:`ValueError` naming ``name``, the range and the value (``nan``, ``-5``, ``inf``...)."""
    if value is None:
        return None
    lo = "" if low is None else (f"above {low:g}" if low_open else f"at least {low:g}")
    hi = "" if high is None else (f"below {high:g}" if high_open else f"at most {high:g}")
    want = " and ".join(w for w in (lo, hi) if w)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or \
            (low is not None and (value <= low if low_open else value < low)) or \
            (high is not None and (value >= high if high_open else value > high)):
        raise ValueError(f"{name} must be a finite number{' ' + want if want else ''}, not {value!r}")
    return value


def number(low: float | None = None, high: float | None = None, *, low_open: bool = False,
           high_open: bool = False) -> Callable[..., Any]:
    """A typer ``callback`` that checks an option with :func:`check_number` (``nan``, ``inf``
    and values out of range are refused with exit code 2 and the option's name)."""

    def callback(param: typer.CallbackParam, value: Any) -> Any:
        name = (param.opts or [param.name or "value"])[0]
        try:
            return check_number(name, value, low, high, low_open=low_open, high_open=high_open)
        except ValueError as e:
            raise typer.BadParameter(str(e).removeprefix(f"{name} "), param=param) from None

    return callback


#: Option checks shared by every command (see :func:`number`).
POSITIVE = number(0, low_open=True)
NON_NEGATIVE = number(0)

BASE_URL = typer.Option(None, "--base-url", envvar="OPENAI_BASE_URL", help="OpenAI-compatible endpoint.")
#: The judges' endpoint: the same flag in trek grade, trek trace and trek ctrl run (``--base-url`` is
#: always the evaluated model's).
JUDGE_BASE_URL = typer.Option(
    None, "--judge-base-url", envvar="TREK_JUDGE_BASE_URL",
    help="OpenAI-compatible endpoint of the judge(s) (default: $OPENAI_BASE_URL, else OpenAI's).",
)
MAX_CONNECTIONS = typer.Option(
    None, "--max-connections", min=1, help="Model requests in flight at once (default: 16; 1 for --model local)."
)
MAX_RETRIES = typer.Option(6, "--max-retries", min=0, help="Retries of a failing call before it is left pending.")
TIMEOUT = typer.Option(120.0, "--timeout", callback=POSITIVE, help="Seconds per model HTTP attempt.")


def _budget(value: float | None) -> float | None:
    """``--budget``: a finite number of US dollars >= 0 (NaN, infinite and negative are refused)."""
    from trek.llm.ledger import check_budget

    try:
        return check_budget(value)
    except ValueError:
        raise typer.BadParameter(f"must be a finite number of US dollars, 0 or more (got {value})") from None


BUDGET = typer.Option(
    None, "--budget", callback=_budget,
    help="Ceiling in US dollars on this command's model calls for its output, over every invocation (resumes "
    "included; recorded in a .<output>.spend ledger): a call whose worst-case price would pass it is not sent.",
)
PRICES = typer.Option(None, "--prices", help="Price table JSON merged over the bundled one (default: $TREK_PRICES).")
PROMPTS = typer.Option(None, "--prompts", envvar="TREK_PROMPTS", help="Folder of prompt template overrides.")
PROGRESS = typer.Option(True, "--progress/--no-progress", help="Show a progress bar.")
DRY_RUN = typer.Option(False, "--dry-run", help="Print the calls, tokens and dollars it would need; send nothing.")
CONFIRM_ABOVE = typer.Option(
    5.0, "--confirm-above", callback=NON_NEGATIVE, help="Ask before starting when the high estimate passes this many US dollars."
)
YES = typer.Option(False, "--yes", "-y", help="Start without asking, whatever the estimate.")
ASSUME_OUTPUT = typer.Option(
    4096, "--assume-output", min=1, help="Estimate: output tokens per call for requests that send no max_tokens."
)
JUDGE_PARAM = typer.Option(
    None, "--judge-param",
    help="Judge request parameter KEY=VALUE, repeatable (temperature=0, reasoning_effort=high, "
    "max_completion_tokens=2000, ...). None is sent unless given.",
)

GRADER = typer.Option(None, "--grader", help="Grade every question with this grader (generic, freshqa, infodeepseek, "
                      "sealqa) instead of each question's own (generic for a custom dataset).")
EXACT_RULE = typer.Option(
    "first", "--exact-rule",
    help="With the exact judge (oracle): how named answers decide: first (the first annotated answer named must "
    "be acceptable), any (no competing answer anywhere), mention (an acceptable answer anywhere).",
)
AUDIT_JUDGE = typer.Option(
    None, "--audit-judge",
    help="With --judge oracle: also ask this model each verdict the exact judge gave and record its answers beside "
    "them (they decide nothing; compare with `trek judge audit`).",
)
AUDIT_LIMIT = typer.Option(
    None, "--audit-limit", min=1, help="--audit-judge: at most this many verdicts per role (in question order).",
)

#: Standard error, for the commands that print through rich. Lines are not folded (soft wrap): a
#: path or URL in a message stays whole, and a log file keeps whole lines (no wrap at 80).
err = Console(stderr=True, soft_wrap=True)


def fail(message: str, hint: str | None = None) -> NoReturn:
    """Print ``error: MESSAGE`` (and ``hint: HINT``) on standard error and stop with exit code 2."""
    typer.echo(f"error: {message}" + (f"\nhint: {hint}" if hint else ""), err=True)
    raise typer.Exit(2)


def resume_command() -> str:
    """The command line this process was started with, as a shell would take it again (``trek``
    when that is what ``PATH`` finds)."""
    import os
    import shlex
    import shutil

    prog = sys.argv[0] if sys.argv and sys.argv[0] else "trek"
    found = shutil.which("trek")
    if found and os.path.realpath(found) == os.path.realpath(prog):
        prog = "trek"
    return shlex.join([prog, *sys.argv[1:]])


def interrupted(kept: str) -> NoReturn:
    """Stop on Ctrl-C or SIGTERM (:mod:`trek.interrupts`): one line naming what was ``kept`` and
    the command that resumes (the same one), exit code 130."""
    import logging

    logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # the cancelled tasks' tracebacks add nothing
    typer.echo(f"interrupted: {kept}; resume with the same command: {resume_command()}", err=True)
    raise typer.Exit(130)


def say_roles(roles: Mapping[str, Any]) -> None:
    """Print once, before the first call, which model at which endpoint plays each role
    (``roles``: role name -> a client, or a ``(model, endpoint)`` pair)."""
    from trek.llm.client import endpoint_identity

    parts = []
    for role, who in roles.items():
        if who is None:
            continue
        if not isinstance(who, tuple) and hasattr(who, "role"):
            who.role = role  # the client names its role in its errors (an endpoint that never answers)
        model, url = who if isinstance(who, tuple) else (getattr(who, "model", None), getattr(who, "base_url", None))
        parts.append(f"{role} {model or '?'} @ {endpoint_identity(url)}")
    err.print("roles: " + "; ".join(parts), highlight=False, soft_wrap=True)


def or_role(role: Any, fallback: Any, model: bool = True) -> Any:
    """``role`` with what it leaves unset taken from ``fallback`` (``--judge`` for the diagnostic
    and analysis judges: model when ``model``, endpoint and parameters)."""
    import dataclasses as dc

    return dc.replace(role, model=role.model or (fallback.model if model else None),
                      base_url=role.base_url or fallback.base_url, params=dict(role.params) or dict(fallback.params))


def deprecated_base_url(command: str, base_url: str | None, judge_base_url: str | None) -> str | None:
    """The judges' endpoint of a command that used to take it as ``--base-url`` (kept as a
    deprecated alias with a warning; both at once is an error)."""
    if base_url is None:
        return judge_base_url
    if judge_base_url is not None:
        fail(f"in {command}, --base-url is the old name of --judge-base-url: give only --judge-base-url")
    err.print(f"warning: in {command}, --base-url is deprecated (it names the judge's endpoint, which every "
              "command now calls --judge-base-url); using it as --judge-base-url", highlight=False)
    return base_url


def always_clear() -> tuple[type[Exception], ...]:
    """Errors every command reports as ``error: ...`` (exit 2), whatever it lists: a bad record
    file (:class:`~trek.types.RecordError`), an output that must not or cannot be written
    (:class:`~trek.outputs.OutputError`), a run directory another process is writing
    (:class:`~trek.stage.RunLockedError`), an endpoint's refusal that no retry can fix
    (:class:`~trek.errors.FatalLLMError`: a rejected key, an unknown model) and errors that stop a
    run as a whole (:class:`~trek.errors.RunFatalError`: a full disk under a cache, a search
    backend without a key, a local model that cannot start)."""
    from trek.errors import FatalLLMError, RunFatalError
    from trek.outputs import OutputError
    from trek.stage import RunLockedError
    from trek.types import RecordError

    return (RecordError, OutputError, RunLockedError, RunFatalError, FatalLLMError)


def check_wild(bench: Any, allow_partial: bool) -> bool:
    """Stop on a TrekBench-Wild with fewer questions than the paper's (``IncompleteDataError``)
    unless ``allow_partial``, which warns instead; True when the set is partial
    (:func:`trek.answering.wild.check_partial`)."""
    from trek.answering.wild import check_partial

    return check_partial(bench, allow_partial, warn=lambda text: err.print(text, highlight=False))


@contextlib.contextmanager
def exit_on(*errors: type[Exception], hint: Callable[[str], str | None] = lambda message: None) -> Iterator[None]:
    """Turn any of ``errors`` (and of :func:`always_clear`) raised inside into :func:`fail`
    (with ``hint(message)``), not a traceback."""
    try:
        yield
    except Exception as e:
        if not isinstance(e, errors + always_clear()):
            raise
        fail(str(e), hint(str(e)))


def _group_fields(group: type) -> list[tuple[str, Any, Any]]:
    """(name, annotation, default) of every option of ``group``, a field that is itself a group
    standing for its options in its place."""
    hints = typing.get_type_hints(group)
    out: list[tuple[str, Any, Any]] = []
    for f in dataclasses.fields(group):
        if dataclasses.is_dataclass(hints[f.name]):
            out += _group_fields(hints[f.name])
        else:
            out.append((f.name, hints[f.name], f.default))
    return out


def _build_group(group: type, kwargs: dict[str, Any]) -> Any:
    """One ``group`` from (and popping) the options of ``kwargs``, its nested groups included."""
    hints = typing.get_type_hints(group)
    return group(**{f.name: _build_group(hints[f.name], kwargs) if dataclasses.is_dataclass(hints[f.name])
                    else kwargs.pop(f.name) for f in dataclasses.fields(group)})


def _dry_run(group: Any) -> bool:
    """``--dry-run`` was given: a ``dry_run`` field of ``group`` or of a group inside it is true."""
    if getattr(group, "dry_run", False) is True:
        return True
    return any(_dry_run(v) for v in (getattr(group, f.name) for f in dataclasses.fields(group))
               if dataclasses.is_dataclass(v))


def grouped(command: Callable[..., Any]) -> Callable[..., Any]:
    """Let ``command`` take groups of options: a parameter annotated with one of the dataclasses
    below stands, for typer, for the group's options in its place and order (a field of a group
    annotated with a group stands for that group's options in turn), and the command is called
    with one instance of the group built from them. With ``--dry-run`` (a group's ``dry_run``),
    the command runs inside :func:`trek.sqlite.read_only`: it leaves every file as it was."""
    params: list[inspect.Parameter] = []
    groups: dict[str, type] = {}
    for p in inspect.signature(command, eval_str=True).parameters.values():
        if not dataclasses.is_dataclass(p.annotation):
            params.append(p)
            continue
        groups[p.name] = p.annotation  # type: ignore[assignment]
        params += [p.replace(name=name, annotation=hint, default=default)
                   for name, hint, default in _group_fields(p.annotation)]  # type: ignore[arg-type]

    @functools.wraps(command)
    def run(**kwargs: Any) -> Any:
        from trek.sqlite import read_only

        for name, group in groups.items():
            kwargs[name] = _build_group(group, kwargs)
        # --dry-run writes nothing: every store the command opens is read-only (missing: in memory)
        with read_only(any(_dry_run(kwargs[name]) for name in groups)):
            return command(**kwargs)

    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params}
    return run


#: Default of a group parameter; :func:`grouped` replaces it.
GROUP: Any = None


@dataclasses.dataclass(frozen=True)
class Spending:
    """``--dry-run``, ``--confirm-above``, ``--yes`` and ``--assume-output``: the look before a
    command spends money on model calls. (Each field's default is its option, as in a command.)"""

    dry_run: bool = DRY_RUN
    confirm_above: float = CONFIRM_ABOVE
    yes: bool = YES
    assume_output: int = ASSUME_OUTPUT

    def _left(self, budget: float | None, ledger: Any) -> float | None:
        """What ``budget`` leaves after the earlier invocations of ``ledger`` (said in a note)."""
        from trek.llm.ledger import read_ledger

        before, left = read_ledger(ledger), budget
        if budget is not None:
            left = max(0.0, budget - before)
            note = f"budget ${budget:.4f}: ${before:.4f} spent by earlier invocations ({ledger}), ${left:.4f} left"
        else:
            note = f"spent by earlier invocations: ${before:.4f} ({ledger})" if before else ""
        if note:
            (typer.echo if self.dry_run else lambda t: err.print(t, highlight=False))(note)
        return left

    def proceed(self, estimate: Any, budget: float | None = None, ledger: Any = None) -> bool:
        """False after printing the estimate (``--dry-run``); otherwise True once the run may start.

        A run whose high estimate passes ``--confirm-above`` asks first (``--yes`` does not). A
        ``--budget`` is taken as the answer: the run cannot spend more than it, so there is no
        question (a note says when the high estimate passes the budget). Without a terminal to ask
        on, the command stops (exit 2) and says to pass ``--yes``; a "no" stops it with exit 1.
        ``ledger``: the command's spend ledger file; with a budget, what earlier invocations spent
        is said, and the estimate is compared with what is left.
        """
        left = budget if ledger is None else self._left(budget, ledger)
        if self.dry_run:
            typer.echo(estimate.describe())
            return False
        high = float(getattr(estimate, "usd_high", 0.0))
        if math.isnan(high):  # a model without a price: nothing to compare with --confirm-above
            err.print("note: no dollar estimate (a model has no price in the price table); not asking", highlight=False)
            return True
        if left is not None:
            if high > left:
                err.print(f"note: the estimate reaches ${high:.2f}, above the ${left:.2f} left of --budget: calls "
                          "stop at the budget and the rest stay pending", highlight=False)
            return True
        if self.yes or high <= self.confirm_above:
            return True
        err.print(estimate.describe(), highlight=False)
        question = f"this run may cost up to ${high:.2f} (above --confirm-above ${self.confirm_above:.2f}); start it?"
        if not sys.stdin.isatty():
            err.print(f"[red]error:[/red] {question} No terminal to ask on: pass --yes to start it, or "
                      "raise --confirm-above.", highlight=False)
            raise typer.Exit(2)
        if not typer.confirm(question, default=False, err=True):
            err.print("not started.", highlight=False)
            raise typer.Exit(1)
        return True


@dataclasses.dataclass(frozen=True)
class Batch:
    """``--batch``, ``--batch-poll`` and ``--batch-wait``: sending through OpenAI's Batch API."""

    enabled: bool = typer.Option(
        False, "--batch", help="Send through OpenAI's Batch API (half price, within 24 h); re-run to resume."
    )
    poll: float = typer.Option(30.0, "--batch-poll", callback=number(0.01), help="--batch: seconds between polls of a running batch.")
    wait: bool = typer.Option(
        True, "--batch-wait/--no-batch-wait", help="--batch: poll until the batches finish, or submit and return."
    )

    def settings(self) -> dict[str, Any]:
        """The keywords of the batch runners: wait for the batches or not, and how often to poll."""
        return {"wait": self.wait, "poll_seconds": self.poll}
