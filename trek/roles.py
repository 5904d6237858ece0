"""Roles: who plays each part of a run (the evaluated model, the judges, the Ctrl discovery model
and fabricator, the embedder, the reranker, the search proxy), and how a command names them.

A :class:`Role` is one record: the model, its endpoint, its request parameters, its connection
limit and the price table it is charged by. Every command builds its roles with one option
factory (:func:`role_options`), so a role's flags are spelled the same everywhere:

* ``--model`` / ``--base-url`` / ``--param`` always mean the **evaluated model** and exist only
  on commands that call it;
* every other role ``R`` of :data:`ROLE_NAMES` is ``--R`` / ``--R-base-url`` / ``--R-param``
  (``--judge``, ``--judge-base-url``, ``--judge-param``; ``--fabricator-base-url``; ...).

An old spelling of a flag keeps working for one release, hidden from ``--help``, with a one-line
notice naming the new one (:func:`role_options` takes them as ``old=``).

An endpoint is never taken from a default nobody chose: :meth:`Role.require_endpoint` takes the
given one, else the recorded one, else ``$OPENAI_BASE_URL`` (as the openai SDK does, announced in one
line naming the variable and the URL), and refuses a role with none of them before any call,
naming the flag. Clients are
built by :func:`build_client` (``RunDir.client(role)`` gives it the run's cache, limits, prices
and ledger); no command builds one itself.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from trek.judges import judge_kind, make_judge

__all__ = [
    "EVALUATED",
    "ROLE_NAMES",
    "Role",
    "RoleError",
    "JUDGE_PARAM_FLAG",
    "parse_params",
    "parse_judge_params",
    "role_options",
    "build_client",
    "flag_of",
    "judge_kind",
    "make_judge",
]

#: The evaluated model's role name (its flags are --model, --base-url, --param).
EVALUATED = "model"

#: Every other role, by its flag name.
ROLE_NAMES = ("judge", "diagnostic-judge", "analysis-judge", "audit-judge", "discovery", "fabricator", "embedder",
              "reranker", "search-proxy")


class RoleError(ValueError):
    """A role that cannot be played as given (no endpoint, a bad parameter); names the flag."""


def flag_of(role: str, what: str = "") -> str:
    """The flag of ``role``'s model (``what=""``), endpoint (``"base-url"``) or parameters
    (``"param"``): ``--model``/``--base-url``/``--param`` for the evaluated model, else
    ``--ROLE``/``--ROLE-base-url``/``--ROLE-param``."""
    if role != EVALUATED and role not in ROLE_NAMES:
        raise KeyError(f"no role named {role!r}; roles: {EVALUATED}, {', '.join(ROLE_NAMES)}")
    if role == EVALUATED:
        return f"--{what}" if what else "--model"
    return f"--{role}-{what}" if what else f"--{role}"


#: The environment variable an endpoint falls back to, as in the openai SDK.
ENDPOINT_VARIABLE = "OPENAI_BASE_URL"


@dataclasses.dataclass(frozen=True)
class Role:
    """One role of a run: ``name`` (:data:`EVALUATED` or one of :data:`ROLE_NAMES`), the
    ``model`` that plays it, its endpoint ``base_url`` (``None``: the provider's default, see
    :meth:`require_endpoint`), request ``params`` sent with every call, ``max_connections``
    (``None``: the client's default) and ``prices`` (a price table file merged over the bundled one)."""

    name: str
    model: str | None
    base_url: str | None = None
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    max_connections: int | None = None
    prices: str | os.PathLike[str] | None = None

    @property
    def flag(self) -> str:
        return flag_of(self.name)

    @property
    def base_url_flag(self) -> str:
        return flag_of(self.name, "base-url")

    @property
    def param_flag(self) -> str:
        return flag_of(self.name, "param")

    @property
    def label(self) -> str:
        """How progress lines and errors name the role (``diagnostic judge``, ``evaluated model``)."""
        return "evaluated model" if self.name == EVALUATED else self.name.replace("-", " ")

    def with_model(self, model: str | None, base_url: str | None = None) -> Role:
        """This role played by ``model`` (and ``base_url`` when given)."""
        return dataclasses.replace(self, model=model, base_url=base_url or self.base_url)

    def require_endpoint(self, recorded: str | None = None, where: str = "the run") -> Role:
        """This role with an endpoint: the one given, else ``recorded`` (e.g. the run's
        ``run.json``), else ``$OPENAI_BASE_URL`` (announced on stderr); none of them is a
        :class:`RoleError` naming the flag, raised before any call."""
        if self.base_url:
            return self
        if recorded:
            return dataclasses.replace(self, base_url=recorded)
        env = os.environ.get(ENDPOINT_VARIABLE, "").strip()
        if env:
            # as the openai SDK does, but said aloud: a run that records no endpoint is sent where
            # the environment points, and the user sees which variable chose it
            print(f"{self.label}: no {self.base_url_flag} and {where} records no endpoint: using "
                  f"${ENDPOINT_VARIABLE} = {env}", file=sys.stderr)
            return dataclasses.replace(self, base_url=env)
        model = f" {self.model}" if self.model else ""
        raise RoleError(f"the {self.label}{model} has no endpoint: {where} records none, {self.base_url_flag} "
                        f"was not given and ${ENDPOINT_VARIABLE} is not set; pass {self.base_url_flag} URL "
                        "(e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1)")


#: The command-line flag that sets one judge request parameter.
JUDGE_PARAM_FLAG = "--judge-param"


# Fields of the request that a parameter flag must not replace (they have their own options
# or are built by the grader).
_RESERVED_PARAMS = {
    "model": "use --judge to choose the judge model",
    "messages": "the grader builds the messages",
    "input": "the grader builds the messages",
    "tools": "the judge is called without tools",
    "stream": "streaming is not supported",
}
_INT_PARAMS = {"seed", "max_tokens", "max_completion_tokens", "max_output_tokens", "n", "top_logprobs", "max_reasks"}
_NUMBER_PARAMS = {"temperature", "top_p", "frequency_penalty", "presence_penalty"}
_KEY_SYNTAX = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_params(values: Iterable[str] | None, flag: str = JUDGE_PARAM_FLAG) -> dict[str, Any]:
    """Request parameters of a role from repeated ``KEY=VALUE`` flags (``--judge-param``, ``--param``).

    The value is read as JSON when it parses (``0`` -> ``0``, ``0.7`` -> ``0.7``, ``true``,
    ``null``, ``[1, 2]``, ``{"effort": "high"}``, ``"0"`` -> the string ``0``) and as a plain
    string otherwise (``reasoning_effort=high``). ``null`` leaves the parameter out of the
    request. Hyphens in the key become underscores (``reasoning-effort`` = ``reasoning_effort``).
    Known numeric parameters are checked (``temperature`` and ``top_p`` take a number;
    ``seed``, ``max_tokens``, ``max_completion_tokens`` an integer).

    Raises ``ValueError`` naming ``flag`` and the offending item for a missing ``=``, an empty
    or malformed key, a key given twice, a reserved key (``model``, ``messages``, ...), a
    non-finite number or a value of the wrong type.
    """
    out: dict[str, Any] = {}
    for item in values or ():
        raw = str(item)
        key, sep, text = raw.partition("=")
        key = key.strip().replace("-", "_")
        example = f"e.g. {flag} temperature=0 or {flag} reasoning_effort=high"
        if not sep:
            raise ValueError(f"{flag} {raw!r}: expected KEY=VALUE ({example})")
        if not _KEY_SYNTAX.fullmatch(key):
            raise ValueError(f"{flag} {raw!r}: the key must be a parameter name such as temperature ({example})")
        if key in _RESERVED_PARAMS:
            raise ValueError(f"{flag} {raw!r}: {key!r} cannot be set this way ({_RESERVED_PARAMS[key]})")
        if key in out:
            raise ValueError(f"{flag} {raw!r}: {key!r} is given more than once")
        text = text.strip()
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{flag} {raw!r}: the value must be a finite number")
        if value is not None and key in _INT_PARAMS and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f"{flag} {raw!r}: {key} takes an integer")
        if value is not None and key in _NUMBER_PARAMS and (
            isinstance(value, bool) or not isinstance(value, (int, float))
        ):
            raise ValueError(f"{flag} {raw!r}: {key} takes a number")
        if value == "" and key not in _NUMBER_PARAMS:
            raise ValueError(f"{flag} {raw!r}: the value is empty (use {key}=null to leave it out)")
        out[key] = value
    return out



#: The judges' parameters (the name the graders have always used).
parse_judge_params = parse_params


# -- the option factory ------------------------------------------------------------------------
def _notice(old: str, new: str) -> None:
    print(f"notice: {old} is the old spelling of {new}; it still works in this release", file=sys.stderr)


#: The sampling flags of :func:`role_options` (``sampling=True``): flag suffix -> (request
#: parameter, type, metavar, help). For the evaluated model the flag is bare (``--temperature``).
SAMPLING_FLAGS = {
    "temperature": ("temperature", float, "T", "Sampling temperature, 0 to 2 (not sent when unset)."),
    "max-tokens": ("max_completion_tokens", int, "N", "Output token cap, sent as max_completion_tokens (not sent "
                   "when unset)."),
    "seed": ("seed", int, "N", "Sampling seed, where the endpoint supports one (not sent when unset)."),
}


def _sampling_params(got: Mapping[str, Any], given: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The request parameters of the sampling flags in ``got`` (suffix -> value or None), each
    checked; one also given as ``--param`` is a :class:`RoleError` naming both flags."""
    out: dict[str, Any] = {}
    for suffix, value in got.items():
        if value is None:
            continue
        param, _, _, _ = SAMPLING_FLAGS[suffix]
        flag = flag_of(name, suffix)
        if isinstance(value, float) and not (math.isfinite(value) and 0 <= value <= 2):
            raise RoleError(f"{flag} must be a number from 0 to 2, not {value!r}")
        if suffix == "max-tokens" and value < 1:
            raise RoleError(f"{flag} must be 1 or more, not {value!r}")
        if param in given:
            raise RoleError(f"{flag} and {flag_of(name, 'param')} {param}=... both set {param}: give one of them")
        out[param] = value
    return out


def role_options(name: str, *, model_help: str, required: bool = False, default: str | None = None,
                 base_url_help: str | None = None, params: bool = True, base_url_env: str | None = None,
                 old: Mapping[str, str] | None = None, model_flags: Iterable[str] = (),
                 sampling: bool = False) -> type:
    """The option group of role ``name`` for :func:`trek.cli.options.grouped`: a dataclass whose
    fields are typer options ``--ROLE`` (``model_help``), ``--ROLE-base-url`` and, with
    ``params``, ``--ROLE-param`` (repeatable ``KEY=VALUE``), spelled by :func:`flag_of`.

    ``old``: hidden old spellings, ``{old flag: "model" | "base-url" | "param"}``; using one
    prints a one-line notice and counts as the new flag. ``model_flags``: extra short names
    (``-m``). ``base_url_env``: an environment variable the endpoint may come from (a choice the
    user made, e.g. ``TREK_JUDGE_BASE_URL``). ``sampling``: also the common request parameters
    as flags of their own (:data:`SAMPLING_FLAGS`: ``--temperature``, ``--max-tokens``,
    ``--seed`` for the evaluated model, ``--ROLE-temperature``... for another role), merged into
    the role's parameters. The group's :meth:`role` returns the :class:`Role`.
    """
    import typer

    key = name.replace("-", "_")
    flag, url_flag, param_flag = flag_of(name), flag_of(name, "base-url"), flag_of(name, "param")
    fields: list[tuple[str, Any, Any]] = [
        (key, str, typer.Option(default if not required else ..., flag, *model_flags, metavar="MODEL", help=model_help)),
        (f"{key}_base_url", str, typer.Option(None, url_flag, envvar=base_url_env, show_envvar=False, metavar="URL",
                                              help=base_url_help or f"Endpoint of the {name.replace('-', ' ')} "
                                              "(OpenAI-compatible).")),
    ]
    if params:
        fields.append((f"{key}_param", list[str], typer.Option(
            None, param_flag, metavar="KEY=VALUE", help=f"Request parameter KEY=VALUE of the {name.replace('-', ' ')}, repeatable "
            "(temperature=0, reasoning_effort=high); none is sent unless given.")))
    suffixes = list(SAMPLING_FLAGS) if sampling else []
    for suffix in suffixes:
        _, typ, metavar, text = SAMPLING_FLAGS[suffix]
        fields.append((f"{key}_{suffix.replace('-', '_')}", typ,
                       typer.Option(None, flag_of(name, suffix), metavar=metavar, help=text)))
    olds = dict(old or {})
    for i, (old_flag, what) in enumerate(olds.items()):
        typ = list[str] if what == "param" else str
        fields.append((f"{key}_old_{i}", typ, typer.Option(None, old_flag, hidden=True, help=f"Old spelling of "
                                                              f"{flag_of(name, '' if what == 'model' else what)}.")))

    def role(self: Any, prices: Any = None, max_connections: int | None = None) -> Role:
        got = {"model": getattr(self, key), "base-url": getattr(self, f"{key}_base_url"),
               "param": list(getattr(self, f"{key}_param", None) or [])}
        for i, (old_flag, what) in enumerate(olds.items()):
            value = getattr(self, f"{key}_old_{i}")
            if value in (None, []):
                continue
            new = flag_of(name, "" if what == "model" else what)
            _notice(old_flag, new)
            if what == "param":
                got["param"] += list(value)
            elif got[what] not in (None, default):
                raise RoleError(f"{old_flag} is the old spelling of {new}: give only {new}")
            else:
                got[what] = value
        try:
            parsed = parse_params(got["param"], flag=param_flag) if params else {}
        except ValueError as e:
            raise RoleError(str(e)) from None
        parsed.update(_sampling_params({s: getattr(self, f"{key}_{s.replace('-', '_')}") for s in suffixes},
                                       parsed, name))
        return Role(name, got["model"], got["base-url"], parsed, max_connections, prices)

    cls = dataclasses.make_dataclass(f"{key.title().replace('_', '')}Role",
                                     [(f, t, dataclasses.field(default=o)) for f, t, o in fields], frozen=True)
    cls.role = role  # type: ignore[attr-defined]
    return cls


# -- clients -----------------------------------------------------------------------------------
def build_client(role: Role, *, cache: Any = None, limits: Any = None, ledger: Any = None, budget_usd: float | None = None,
                 progress: bool = False, **settings: Any) -> Any:
    """The :class:`~trek.llm.client.LLMClient` that plays ``role``: its model, endpoint,
    connection limit and price table, with the response ``cache`` (a path or cache), shared
    endpoint ``limits``, spend ``ledger`` and ``budget_usd`` given; ``settings``: the client's
    other keywords (``max_retries``, ``timeout``, ``assume_output``...). ``--model local`` is the
    embedded model."""
    from trek.llm.cache import LLMCache
    from trek.llm.client import LLMClient
    from trek.llm.usage import PriceTable

    if isinstance(cache, str | os.PathLike):
        cache = LLMCache(Path(cache))
    extra = {k: v for k, v in (("max_connections", role.max_connections), ("limits", limits), ("ledger", ledger),
                               ("budget_usd", budget_usd)) if v is not None}
    return LLMClient(role.model, base_url=role.base_url, cache=cache, progress=progress,
                     prices=PriceTable.load(role.prices), role=role.label, **extra, **settings)
