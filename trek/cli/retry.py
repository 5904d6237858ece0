"""``trek retry RUN``: run a Wild run again with the settings its ``run.json`` recorded, like
``inspect eval-retry``: finished answers are kept, pending and failed questions are asked again
(every epoch of a ``--epochs`` run)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import typer

from trek.cli import options

__all__ = ["retry_command", "recorded_options"]


def _default(f: dataclasses.Field) -> Any:  # type: ignore[type-arg]
    """A group field's default: the default of the typer option it holds."""
    return getattr(f.default, "default", f.default)


def recorded_options(meta: Any, overrides: dict[str, Any]) -> Any:
    """The :class:`~trek.cli.run.WildOptions` a Wild run's ``meta`` (run.json) recorded, with
    ``overrides`` (the retry's own flags) on top; options it does not record take their defaults."""
    from trek.cli.run import WildOptions

    given = dict(meta.config["invocation"].get("options") or {})
    values = {}
    for f in dataclasses.fields(WildOptions):
        if f.name in overrides:
            value = overrides[f.name]
        elif f.name in given:
            value = _checked(f, given[f.name])
        else:
            value = _default(f)
        values[f.name] = Path(value) if f.type == "Path" and value is not None else value
    return WildOptions(**values)


_TYPES: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,),
                                       "Path": (str,)}


def _checked(f: dataclasses.Field, value: Any) -> Any:  # type: ignore[type-arg]
    """A recorded option's value when it fits the option (its type, its bounds), else a
    ``ValueError`` naming the field: run.json is read, not trusted (a damaged one must not run
    31 of 36 questions on ``limit: -5``)."""
    import math

    from trek import runs

    where = f"{runs.META}: field 'invocation.options.{f.name}'"
    info = f.default
    if value is None:
        if _default(f) is None:
            return None
        raise ValueError(f"{where}: missing (null); the option --{f.name.replace('_', '-')} needs a value")
    kinds = _TYPES.get(str(f.type))
    if kinds is None:
        return value
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        raise ValueError(f"{where}: {value!r} is not {'a' if f.type != 'int' else 'an'} {f.type}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: {value!r} is not a finite number")
    low, high = getattr(info, "min", None), getattr(info, "max", None)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if low is not None and value < low:
            raise ValueError(f"{where}: {value!r} is below the option's least value {low}")
        if high is not None and value > high:
            raise ValueError(f"{where}: {value!r} is above the option's greatest value {high}")
    return value


def _check(run_dir: Path) -> Any:
    """``run_dir``'s run.json, refused (exit 2) when it is not a Wild run that records its command."""
    from trek import runs

    meta = runs.read_meta(run_dir)
    if meta is None:
        options.fail(f"{run_dir / runs.META} does not exist: {run_dir} is not a run folder")
    if meta.kind != "wild":
        options.fail(f"{run_dir} is a {meta.kind} run: trek retry re-runs Wild runs (trek wild run); run the command "
                     "that made this one again to resume it")
    epoch = meta.config.get("epoch", 1)
    if epoch != 1:
        options.fail(f"{run_dir} is epoch {epoch} of the run {run_dir.parent}: trek retry {run_dir.parent}")
    invocation = meta.config.get("invocation")
    if not isinstance(invocation, dict):
        options.fail(f"{run_dir / runs.META} records no invocation (the run was made by an older Trek): run the "
                     "command that made it again to resume it")
    if not isinstance(invocation.get("model"), str) or not invocation["model"].strip():
        options.fail(f"{run_dir / runs.META}: field 'invocation.model': missing or not a model name")
    if not isinstance(invocation.get("params") or {}, dict):
        options.fail(f"{run_dir / runs.META}: field 'invocation.params': not an object of request parameters")
    if not isinstance(invocation.get("options") or {}, dict):
        options.fail(f"{run_dir / runs.META}: field 'invocation.options': not an object of options")
    return meta


def _todo(run_dir: Path, epochs: int) -> tuple[int | None, int]:
    """(questions to answer again over every epoch, answers kept) of a run and its epochs
    (``None`` to answer: the run never wrote its question set)."""
    from trek import runs
    from trek.answering.runner import FINAL_STATUSES
    from trek.epochs import epoch_dir

    if not (run_dir / runs.QUESTIONS).exists():
        return None, 0
    todo = kept = 0
    for k in range(1, epochs + 1):
        d = epoch_dir(run_dir, k)
        status = runs.frame(d if (d / runs.QUESTIONS).exists() else run_dir, ["answer_status"])["answer_status"]
        done = int(status.isin(FINAL_STATUSES).sum()) if (d / runs.ANSWERS).exists() else 0
        todo, kept = todo + len(status) - done, kept + done
    return todo, kept


@options.grouped
def retry_command(
    run_dir: Path = typer.Argument(..., metavar="RUN", help="A run folder made by trek wild run."),
    base_url: str = typer.Option(None, "--base-url", metavar="URL", help="Endpoint of the model (default: the one "
                                 "run.json records; give it when that one carried credentials, which are never "
                                 "recorded)."),
    budget: float = options.BUDGET,
    progress: bool = options.PROGRESS,
    spending: options.Spending = options.GROUP,
) -> None:
    """Run a Wild run's pending and failed questions again, with the settings run.json recorded.

    The model, its request parameters, the search backend, the system and its settings, the
    question set and the epochs come from RUN/run.json (what trek wild run recorded there);
    finished answers are kept. Exit codes as for trek wild run: 0 when every question has a final
    outcome, 3 while some are pending, 4 when some failed, 2 on errors.
    """
    from trek.cli.run import run_epochs
    from trek.roles import EVALUATED, Role
    from trek.types import RecordError

    with options.exit_on(RecordError, ValueError, KeyError):
        meta = _check(run_dir)
        o = recorded_options(meta, {"budget": budget, "progress": progress, "dry_run": spending.dry_run,
                                    "yes": spending.yes, "confirm_above": spending.confirm_above})
        todo, kept = _todo(run_dir, o.epochs)
    invocation = meta.config["invocation"]
    endpoint = base_url or (meta.endpoint if meta.endpoint and not meta.endpoint.startswith("local://") else None)
    role = Role(EVALUATED, invocation["model"], endpoint, dict(invocation.get("params") or {}), o.max_connections,
                o.prices)
    if todo == 0:
        typer.echo(f"nothing to retry: every question of {run_dir} has a final answer ({kept} kept)", err=True)
        return
    typer.echo(f"retrying {'the' if todo is None else todo} question(s) of {run_dir} ({kept} answer(s) kept) with the recorded settings: "
               f"{role.model} @ {endpoint or 'the default endpoint'}", err=True)
    run_epochs(run_dir, role, o)
