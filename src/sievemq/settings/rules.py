"""The rules a setting's value must follow (``Rule``, ``Format``), the ``setting(...)`` field specifier, and the
formats shared by every role's configuration (docs in ``config.py``)."""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sievemq.protocol.delay_levels import parse_levels
from sievemq.protocol.names import MAX_TOPIC_LENGTH, NAME_RE


# ------------------------------------------------------------------------------------------------ rules
@dataclass(frozen=True)
class Format:
    """A format a string setting must have: ``allowed`` says it in words, ``test`` checks a value."""

    allowed: str
    test: Callable[[str], bool]


@dataclass(frozen=True)
class Rule:
    """What a setting accepts beyond its type: an inclusive range ``lo..hi``, a strict bound ``> above``, a format."""

    lo: float | None = None
    hi: float | None = None
    above: float | None = None
    fmt: Format | None = None

    def accepts(self, value: Any) -> bool:
        """True when ``value`` (already of the field's type) is within the range and has the format."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            if not math.isfinite(value):
                return False
            if self.lo is not None and value < self.lo:
                return False
            if self.hi is not None and value > self.hi:
                return False
            if self.above is not None and value <= self.above:
                return False
        return self.fmt is None or self.fmt.test(str(value))

    def bounds(self) -> str:
        """The range in words (``"in 0..65535"``, ``">= 1"``, ``"> 0"``), or ``""``."""
        if self.lo is not None and self.hi is not None:
            return f"in {self.lo}..{self.hi}"
        if self.lo is not None:
            return f">= {self.lo}"
        if self.hi is not None:
            return f"<= {self.hi}"
        if self.above is not None:
            return f"> {self.above}"
        return ""


def setting(
    doc: str,
    default: Any,
    *,
    lo: float | None = None,
    hi: float | None = None,
    above: float | None = None,
    fmt: Format | None = None,
    secret: bool = False,
) -> Any:
    """A config field: its ``doc`` (reference and ``--help``), its default and what it accepts (see ``Rule``); a
    ``secret`` one is left out of the config's repr."""
    return field(default=default, repr=not secret, metadata={"doc": doc, "rule": Rule(lo, hi, above, fmt)})


def split_addrs(value: str) -> list[str]:
    """Items of a ``;``-separated (or ``,``-separated) address list, blanks dropped."""
    return [a.strip() for a in value.replace(",", ";").split(";") if a.strip()]


_HOSTNAME_RE = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*$"
)


def _is_ip(value: str, version: int | None = None) -> bool:
    try:
        ip = ipaddress.ip_address(value)
    except ValueError:
        return False
    return version is None or ip.version == version


def _is_host(value: str) -> bool:
    return _is_ip(value) or bool(_HOSTNAME_RE.match(value))


def _is_host_port(value: str) -> bool:
    host, sep, port = value.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
        return False
    if host.startswith("[") and host.endswith("]"):
        return _is_ip(host[1:-1], 6)
    return _is_host(host)


def _is_store_dir(value: str) -> bool:
    if not value.strip():
        return False
    path = Path(value)
    for candidate in (path, *path.parents):  # the nearest existing one must be a folder (mkdir makes the rest)
        if candidate.exists():
            return candidate.is_dir()
    return True


def _is_delay_levels(value: str) -> bool:
    try:
        parse_levels(value)
    except ValueError:
        return False
    return True


LISTEN_HOST = Format("a host name or IP address (empty: every interface)", lambda v: v == "" or _is_host(v))
ADVERTISED_IP = Format(
    "an IPv4 address others can reach (a.b.c.d, not 0.0.0.0)",
    lambda v: _is_ip(v, 4) and not ipaddress.IPv4Address(v).is_unspecified,
)
HOST_PORT = Format("host:port (port 1..65535)", _is_host_port)
OPTIONAL_HOST_PORT = Format("empty or host:port (port 1..65535)", lambda v: v == "" or _is_host_port(v))
HOST_PORT_LIST = Format(
    "host:port items separated by ';' (port 1..65535), or empty", lambda v: all(map(_is_host_port, split_addrs(v)))
)
NAME = Format(  # broker and cluster names are topics too (the broker creates them)
    f"1..{MAX_TOPIC_LENGTH} characters of a-z A-Z 0-9 _ - % | (RocketMQ's topic characters)",
    lambda v: len(v) <= MAX_TOPIC_LENGTH and bool(NAME_RE.match(v)),
)
STORE_DIR = Format("a folder path, not an existing file nor under one", _is_store_dir)
ETCD_ROOT = Format(
    "a key prefix starting with '/', of a-z A-Z 0-9 _ - . / (at most 100 characters, no '//')",
    lambda v: 1 < len(v) <= 100 and v.startswith("/") and "//" not in v and bool(re.fullmatch(r"[A-Za-z0-9_./-]+", v)),
)
EXISTING_FILE = Format("empty or the path of an existing file", lambda v: v == "" or Path(v).is_file())
def delete_hours(value: str) -> tuple[int, ...] | None:
    """The hours of RocketMQ's ``deleteWhen`` ("04", "04;16"; "-1": any hour, sievemq's, as ``()``), None when the
    text is not such a list."""
    parts = [p.strip() for p in value.split(";")]
    if parts == ["-1"]:
        return ()
    if not parts or not all(p.isdigit() and len(p) <= 2 and int(p) <= 23 for p in parts):
        return None
    return tuple(sorted({int(p) for p in parts}))


DELETE_WHEN = Format(
    "hours of day 0..23 separated by ';' (04;16), or -1 (any hour)", lambda v: delete_hours(v) is not None
)
DELAY_LEVELS = Format(
    "durations separated by spaces, each a whole number and s, m, h or d (1s 5m 2h)", _is_delay_levels
)
