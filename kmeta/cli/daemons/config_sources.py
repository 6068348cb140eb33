"""Where a daemon's settings come from: flags, KMETA_* environment variables, a TOML file.

Precedence (click's own): a flag on the command line, then the environment, then the
``--config`` file, then the built-in default.

* Environment: ``KMETA_<COMMAND>_<OPTION>``, e.g. ``KMETA_BROKER_BROKER_ID=1``,
  ``KMETA_CONTROLLER_DATA_DIR=/var/lib/kmeta``, ``KMETA_BROKER_METRICS_PORT=9300``
  (click's ``auto_envvar_prefix``); boolean flags take 1/0, true/false.
* File: ``--config FILE`` (TOML). Keys are option names (``broker-id`` or ``broker_id``). A
  ``[broker]`` / ``[controller]`` table holds one daemon's settings, so one file can serve
  both; top-level keys apply to every daemon. A list value (``listeners = ["A://h:1",
  "B://h:2"]``) is joined with commas. An unknown key is an error (a typo must not be
  silently ignored).

``kmeta config show`` (:func:`effective_config`) reports each value with its source.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from typing import Any

import click
from click.core import ParameterSource

_META_FILE = "kmeta.config_file"


def daemon_settings(command: str) -> dict[str, Any]:
    """``context_settings`` for a daemon command: its KMETA_<COMMAND>_* variables."""
    return {"auto_envvar_prefix": f"KMETA_{command.upper()}"}


def load_toml(path: str, command: str, known: set[str]) -> dict[str, Any]:
    """The settings in ``path`` for ``command``, keyed by parameter name."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    section = data.get(command, {})
    if not isinstance(section, dict):
        raise click.BadParameter(f"[{command}] must be a table", param_hint="--config")
    merged = {k: v for k, v in data.items() if not isinstance(v, dict)} | section
    out: dict[str, Any] = {}
    for key, value in merged.items():
        name = key.replace("-", "_")
        if name not in known:
            raise click.BadParameter(
                f"{path}: unknown setting {key!r} for {command}", param_hint="--config"
            )
        out[name] = ",".join(map(str, value)) if isinstance(value, list) else value
    return out


def _load_file(command: click.Command, path: str) -> dict[str, Any]:
    known = {p.name for p in command.params if p.name and p.name != "config"}
    try:
        return load_toml(path, command.name or "", known)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="--config") from exc


def _load(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if not value:
        return
    command = ctx.info_name or ""
    known = {p.name for p in ctx.command.params if p.name and p.name != "config"}
    try:
        settings = load_toml(value, command, known)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise click.BadParameter(f"{value}: {exc}", param_hint="--config") from exc
    ctx.default_map = {**(ctx.default_map or {}), **settings}
    ctx.meta[_META_FILE] = value


def config_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--config FILE``: read before every other option (eager), so flags and env win."""
    return click.option(
        "--config",
        type=click.Path(dir_okay=False),
        is_eager=True,
        expose_value=False,
        callback=_load,
        help="TOML file with defaults for these options (flags and KMETA_* env win).",
    )(f)


def _env_name(ctx: click.Context, param: click.Parameter) -> str:
    if isinstance(param, click.Option) and param.envvar:
        return str(param.envvar)
    return f"{ctx.auto_envvar_prefix}_{(param.name or '').upper()}"


def effective_config(command: click.Command, argv: list[str]) -> list[dict[str, Any]]:
    """Parse ``argv`` as ``command`` would (without running it): every option's value and source.

    A ``--config`` file that cannot be read or holds an unknown setting is the error the
    daemon would stop with (parsing here is resilient: it would show defaults instead)."""
    for i, arg in enumerate(argv):
        path = argv[i + 1] if arg == "--config" and i + 1 < len(argv) else None
        if arg.startswith("--config="):
            path = arg.partition("=")[2]
        if path is not None:
            _load_file(command, path)
    ctx = command.make_context(command.name, list(argv), resilient_parsing=True)
    rows = []
    for param in command.params:
        name = param.name
        if not name or name in ("config", "help") or not param.expose_value:
            continue
        source = ctx.get_parameter_source(name)
        value = ctx.params.get(name)
        if source == ParameterSource.COMMANDLINE:
            where = "flag"
        elif source == ParameterSource.ENVIRONMENT:
            where = f"env {_env_name(ctx, param)}"
        elif source == ParameterSource.DEFAULT_MAP:
            where = f"file {ctx.meta.get(_META_FILE, '?')}"
        else:
            where = "default"
        if value is None and getattr(param, "required", False):
            where = "missing (required)"
        rows.append({"name": name, "value": value, "source": where})
    return rows
