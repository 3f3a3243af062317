"""Every option with a fixed set of values refuses anything else, before the command does anything (real processes).

Two kinds: settings of a role whose type lists its words (``Literal``: ``flushDiskType``, ``brokerRole``,
``tlsMode`` ...), or whose format is a list of known words (``sandboxSkip``), checked by the config loader with one
line naming the key and what is allowed; and click options of a fixed choice (``--log-level``, ``dev --flush``,
``consume --from`` ...), found by walking every command, so a new one is covered as soon as it is added.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from sievemq.broker.config import BrokerConfig
from sievemq.cli.app import main
from sievemq.filtersrv.config import FiltersrvConfig
from sievemq.namesrv.config import NamesrvConfig
from sievemq.proxy.config import ProxyConfig
from sievemq.settings import specs

ROLES: list[tuple[str, type[Any]]] = [
    ("namesrv", NamesrvConfig),
    ("broker", BrokerConfig),
    ("filtersrv", FiltersrvConfig),
    ("proxy", ProxyConfig),
]
WORD_LISTS = [("filtersrv", "sandbox_skip")]
"""Settings whose format is a list of known words (no ``Literal`` type to find them by)."""


def run_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIEVEMQ_")}
    return subprocess.run([sys.executable, "-m", "sievemq.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip


def _enumerated_settings() -> list[tuple[str, str, str]]:
    out = []
    for role, cls in ROLES:
        for spec in specs(cls):
            if spec.choices or (role, spec.name) in WORD_LISTS:
                out.append((role, "--" + spec.name.replace("_", "-"), spec.key))
    return out


def _choice_options() -> list[tuple[list[str], str, list[str]]]:
    """(command path with placeholder arguments, option, its choices) for every click.Choice option of every
    command, ``sievemq``'s own included."""
    out: list[tuple[list[str], str, list[str]]] = []

    def walk(cmd: click.Command, path: list[str]) -> None:
        needed = _placeholders(cmd)
        for p in cmd.params:
            if isinstance(p, click.Option) and isinstance(p.type, click.Choice):
                out.append(([*path, *needed], p.opts[-1], [str(c) for c in p.type.choices]))
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])

    walk(main, [])
    return out


def _placeholders(cmd: click.Command) -> list[str]:
    """Placeholders for ``cmd``'s required arguments and options: the choice is checked before they are used."""
    needed: list[str] = []
    for p in cmd.params:
        if isinstance(p, click.Argument):
            needed.append("X")
        elif p.required and isinstance(p, click.Option):
            needed += [p.opts[0], "X"]
    return needed


def parse_only(args: list[str]) -> click.Context:
    """``sievemq ARGS`` parsed and converted by click as the command line would be, without running anything: the
    context of the command they name (click checks every option's value while making it)."""
    if not args or args[0].startswith("-"):  # an option of ``sievemq`` itself, then a command
        return main.make_context("sievemq", list(args))
    ctx = click.Context(main, info_name="sievemq")
    cmd: click.Command = main
    words = list(args)
    while isinstance(cmd, click.Group) and words and words[0] in cmd.commands:
        name = words.pop(0)
        cmd = cmd.commands[name]
        if isinstance(cmd, click.Group) and words and words[0] in cmd.commands:
            ctx = click.Context(cmd, info_name=name, parent=ctx)
            continue
        return cmd.make_context(name, words, parent=ctx)
    raise AssertionError(f"no command in {args}")


def test_the_lists_are_not_empty() -> None:
    settings = {(role, key) for role, _, key in _enumerated_settings()}
    assert {("broker", "flushDiskType"), ("broker", "brokerRole"), ("namesrv", "tlsMode"),
            ("proxy", "tlsMode"), ("filtersrv", "sandboxRequire")} <= settings, settings  # fmt: skip
    options = {opt for _, opt, _ in _choice_options()}
    assert {"--log-level", "--flush", "--tls-mode", "--from"} <= options, options


@pytest.mark.parametrize(("role", "flag", "key"), _enumerated_settings())
def test_a_setting_refuses_an_unknown_word(tmp_path: Path, role: str, flag: str, key: str) -> None:
    res = run_cli(tmp_path, role, flag, "BOGUS")
    assert res.returncode == 1 and not res.stdout, (res.returncode, res.stdout, res.stderr)
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"Error: invalid {key} 'BOGUS' (from the command line): expected "), line
    assert list(tmp_path.iterdir()) == [], "a refused role creates nothing"


@pytest.mark.parametrize(("path", "option", "choices"), _choice_options(), ids=lambda v: str(v))
def test_a_choice_option_refuses_an_unknown_value(
    tmp_path: Path, path: list[str], option: str, choices: list[str]
) -> None:
    # an option of `sievemq` itself goes before a command (one that needs nothing)
    args = [*path, option, "BOGUS"] if path else [option, "BOGUS", "config-reference"]
    res = run_cli(tmp_path, *args)
    assert res.returncode == 2 and not res.stdout, (args, res.returncode, res.stdout, res.stderr)
    assert f"Invalid value for '{option}'" in res.stderr and "BOGUS" in res.stderr, res.stderr
    assert list(tmp_path.iterdir()) == []
    # Any letter case of a valid value is accepted: click's own parsing of the same command line (nothing runs).
    value = choices[0].swapcase()
    assert value != choices[0]
    ctx = parse_only([a if a != "BOGUS" else value for a in args])
    (param,) = [p for p in ctx.command.params if isinstance(p, click.Option) and option in p.opts]
    assert param.name is not None and ctx.params[param.name] == choices[0], (
        f"{option} {value} is taken as {choices[0]}: {ctx.params.get(param.name or '')!r}"
    )
    with pytest.raises(click.BadParameter, match="BOGUS"):
        parse_only(args)  # the same parse refuses what the command refused above
