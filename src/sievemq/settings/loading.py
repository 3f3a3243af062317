"""Checking and loading settings: one ``Spec`` per field, ``check_fields`` (from each config's ``__post_init__``),
``load_config`` (defaults < TOML file < environment < flags) and ``describe`` (the reference; docs in ``config.py``).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from sievemq.errors import ConfigError
from sievemq.settings.rules import Rule

T = TypeVar("T")


# ------------------------------------------------------------------------------------------------ checking
@dataclass(frozen=True)
class Spec:
    """One setting as declared: field name, camelCase key, value type, accepted words, rule, doc and default."""

    name: str
    key: str
    kind: type
    choices: tuple[str, ...]
    rule: Rule
    doc: str
    default: Any

    @property
    def allowed(self) -> str:
        """What the setting accepts, in words (for errors, the reference and ``--help``)."""
        if self.choices:
            words = " or ".join(self.choices)
            return f"{words} (any letter case)"
        if self.kind is bool:
            return "true or false"
        bounds = self.rule.bounds()
        if self.kind is int:
            return f"an integer {bounds}".rstrip()
        if self.kind is float:
            return f"a number {bounds}".rstrip()
        return self.rule.fmt.allowed if self.rule.fmt is not None else "any text"

    def check(self, value: Any) -> Any:
        """``value`` as stored (an accepted word in its listed spelling); ``ConfigError`` when not allowed."""
        if self.choices:
            for choice in self.choices:
                if isinstance(value, str) and value.lower() == choice.lower():
                    return choice
        elif _has_type(value, self.kind) and self.rule.accepts(value):
            return value
        raise ConfigError(key=self.key, value=value, allowed=self.allowed)


def _has_type(value: Any, kind: type) -> bool:
    if kind is bool or isinstance(value, bool):  # a bool is an int to isinstance, not to a setting
        return kind is bool and isinstance(value, bool)
    return isinstance(value, int | float) if kind is float else isinstance(value, kind)


def camel(name: str) -> str:
    """``flush_disk_type`` -> ``flushDiskType``."""
    first, *rest = name.split("_")
    return first + "".join(p.title() for p in rest)


_SPECS: dict[type[Any], tuple[Spec, ...]] = {}


def specs(cls: type[Any]) -> tuple[Spec, ...]:
    """Every setting of a config dataclass, in declaration order."""
    done = _SPECS.get(cls)
    if done is not None:
        return done
    hints = get_type_hints(cls)
    out = []
    for f in fields(cls):
        hint = hints[f.name]
        choices: tuple[str, ...] = get_args(hint) if get_origin(hint) is Literal else ()
        kind = str if choices else hint
        default = f.default if f.default is not dataclasses.MISSING else None
        rule = f.metadata.get("rule", Rule())
        out.append(Spec(f.name, camel(f.name), kind, choices, rule, str(f.metadata.get("doc", "")), default))
    done = _SPECS[cls] = tuple(out)
    return done


def check_fields(cfg: Any) -> None:
    """Check every field of a config dataclass instance (``ConfigError`` on the first bad one).

    Accepted words of a ``Literal`` field are stored in their listed spelling (``sync_flush`` -> ``SYNC_FLUSH``).
    """
    for spec in specs(type(cfg)):
        value = getattr(cfg, spec.name)
        checked = spec.check(value)
        if checked is not value:
            object.__setattr__(cfg, spec.name, checked)


# ------------------------------------------------------------------------------------------------ loading
def _norm(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


_TRUE = frozenset(("true", "1", "yes", "on", "t", "y"))
_FALSE = frozenset(("false", "0", "no", "off", "f", "n"))


def _coerce(value: Any, spec: Spec, source: str) -> Any:
    """A raw value (TOML, environment text, flag text) as the field's type; ``ConfigError`` when it is not one."""
    typ = spec.kind
    if isinstance(value, list | tuple) and typ is str:
        value = ",".join(str(v) for v in value)
    try:
        if typ is bool:
            if isinstance(value, bool):
                return value
            s = str(value).strip().lower()
            if s in _TRUE or s in _FALSE:
                return s in _TRUE
            raise ValueError(value)
        if typ is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(value)
        if typ is float:
            if isinstance(value, bool):
                raise ValueError(value)
            return float(value)
        return str(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(key=spec.key, value=value, allowed=spec.allowed, source=source) from None


def load_config(
    cls: type[T],
    toml_path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    env_prefix: str = "SIEVEMQ_",
) -> T:
    """Build ``cls`` from defaults, a TOML file, ``<env_prefix><NAME>`` environment variables and flag overrides.

    A TOML array given for a string setting becomes its comma-separated form. Every value is checked; a bad one
    raises ``ConfigError`` saying where it came from (the file, the variable, the command line).
    """
    by_name = {s.name: s for s in specs(cls)}
    known = {_norm(name): name for name in by_name}
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}

    def put(name: str, raw: Any, source: str) -> None:
        values[name] = _coerce(raw, by_name[name], source)
        sources[name] = source

    if toml_path:
        try:
            with open(toml_path, "rb") as fh:
                raw = tomllib.load(fh)
        except FileNotFoundError:
            raise ConfigError(f"config file {toml_path} does not exist") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {toml_path}: {e}") from None
        for k, v in raw.items():
            name = known.get(_norm(k), "")
            if not name:
                raise ConfigError(f"config file {toml_path}: unknown key '{k}' (see `sievemq config-reference`)")
            put(name, v, str(toml_path))
    env = os.environ if env is None else env
    for name in by_name:
        var = env_prefix + name.upper()
        if var in env:
            put(name, env[var], var)
    for k, v in (overrides or {}).items():
        if v is not None:
            name = known.get(_norm(k), "")
            if not name:
                raise ConfigError(f"unknown setting '{k}'")
            put(name, v, "the command line")
    try:
        return cls(**values)
    except ConfigError as e:
        name = next((s.name for s in by_name.values() if s.key == e.key), "")
        if not name or e.source:
            raise
        source = sources.get(name, "the default")
        raise ConfigError(key=e.key, value=e.value, allowed=e.allowed, source=source) from None


def describe(cls: type[Any]) -> list[tuple[str, str, Any, str, str]]:
    """(camelCase key, type, default, doc, allowed values) for every field: the config reference."""
    return [(s.key, type(s.default).__name__, s.default, s.doc, s.allowed) for s in specs(cls)]
