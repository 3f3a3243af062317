"""Checking the dashboard API's query parameters before anything is asked of a broker (docs/dashboard.md §2). Pure.

``Query`` wraps a request's parameters: each ``take_*`` returns a checked value or raises ``ApiError`` 400 naming
the parameter; ``done()`` refuses any parameter nobody took (a typo is an error, not a silent default). Names
follow RocketMQ's rules (``sievemq.protocol.names``), numbers have ranges, lists have capped sizes, texts have
lengths and no control characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from sievemq.admin.timespec import parse_time
from sievemq.dashboard.errors import ApiError, ApiReason, bad_parameter
from sievemq.filter.sql92 import SqlError, compile_selector
from sievemq.filter.tags import TagExpression
from sievemq.protocol.names import group_problem, topic_problem

__all__ = ["EXPRESSION_MAX", "KEY_MAX", "Query", "check_expression"]

EXPRESSION_MAX = 4096
"""Longest selector ``explain`` takes (characters)."""
KEY_MAX = 255
"""Longest message key searched for."""
_MSG_ID = re.compile(r"[0-9A-Fa-f]{16,64}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_expression(kind: str, expression: str) -> None:
    """Raise 400 INVALID_EXPRESSION when ``expression`` (TAG or SQL92) does not parse."""
    try:
        if kind == "SQL92":
            compile_selector(expression)
        else:
            TagExpression.parse(expression)
    except SqlError as e:
        raise ApiError(400, ApiReason.INVALID_EXPRESSION, f"SQL92 expression: {e.with_caret()}") from None
    except ValueError as e:
        raise ApiError(400, ApiReason.INVALID_EXPRESSION, f"TAG expression: {e}") from None


class Query:
    """A request's query parameters, taken and checked one by one."""

    def __init__(self, items: Iterable[tuple[str, str]]) -> None:
        self._values: dict[str, str] = {}
        for name, value in items:
            if name in self._values:
                raise bad_parameter(name, "given more than once")
            self._values[name] = value
        self._taken: set[str] = set()

    def _raw(self, name: str, required: bool) -> str | None:
        self._taken.add(name)
        value = self._values.get(name)
        if value is None or value == "":
            if required:
                raise bad_parameter(name, "missing")
            return None
        return value

    def done(self) -> None:
        """Refuse parameters no ``take_*`` asked for."""
        extra = sorted(set(self._values) - self._taken)
        if extra:
            raise bad_parameter(extra[0][:64], "not a parameter of this endpoint")

    def take_topic(self, name: str = "topic") -> str:
        """A topic name (required)."""
        value = self._raw(name, True) or ""
        problem = topic_problem(value)
        if problem is not None:
            raise ApiError(400, ApiReason.INVALID_NAME, f"parameter {name}: {problem}", parameter=name)
        return value

    def take_optional_topic(self, name: str = "topic") -> str | None:
        """A topic name, or None when absent."""
        return self.take_topic(name) if self._raw(name, False) is not None else None

    def take_group(self, name: str = "group") -> str:
        """A consumer group name (required)."""
        value = self._raw(name, True) or ""
        problem = group_problem(value)
        if problem is not None:
            raise ApiError(400, ApiReason.INVALID_NAME, f"parameter {name}: {problem}", parameter=name)
        return value

    def take_optional_group(self, name: str = "group") -> str | None:
        """A consumer group name, or None when absent."""
        return self.take_group(name) if self._raw(name, False) is not None else None

    def take_int(self, name: str, default: int, lo: int, hi: int) -> int:
        """A whole number in ``lo..hi`` (``default`` when absent)."""
        raw = self._raw(name, False)
        if raw is None:
            return default
        if not re.fullmatch(r"-?[0-9]{1,19}", raw):
            raise bad_parameter(name, f"not a whole number (give {lo}..{hi})")
        value = int(raw)
        if not lo <= value <= hi:
            raise bad_parameter(name, f"{value} is outside {lo}..{hi}")
        return value

    def take_bool(self, name: str) -> bool:
        """``true``/``false`` (``1``/``0``); false when absent."""
        raw = self._raw(name, False)
        if raw is None:
            return False
        if raw.lower() in ("true", "1"):
            return True
        if raw.lower() in ("false", "0"):
            return False
        raise bad_parameter(name, "give true or false")

    def take_time(self, name: str, default: int | None = None) -> int:
        """A time: epoch milliseconds or ISO-8601 (``admin.timespec.parse_time``); required without ``default``."""
        raw = self._raw(name, default is None)
        if raw is None:
            assert default is not None
            return default
        if len(raw) > 64:
            raise bad_parameter(name, "too long for a time")
        try:
            return parse_time(raw)
        except ValueError as e:
            raise bad_parameter(name, str(e)) from None

    def take_msg_id(self, name: str = "id") -> str:
        """A message id: a UNIQ_KEY or an offsetMsgId, 16 to 64 hexadecimal digits (upper-cased)."""
        raw = self._raw(name, True) or ""
        if not _MSG_ID.fullmatch(raw):
            raise bad_parameter(name, "a message id is 16 to 64 hexadecimal digits (the msgId a send returns, or an "
                                "offsetMsgId)")  # fmt: skip
        return raw.upper()

    def take_text(self, name: str, limit: int) -> str:
        """A required text of at most ``limit`` characters without control characters."""
        raw = self._raw(name, True) or ""
        if len(raw) > limit:
            raise bad_parameter(name, f"longer than {limit} characters")
        if _CONTROL.search(raw):
            raise bad_parameter(name, "contains control characters")
        return raw

    def take_after(self, name: str = "after") -> str | None:
        """Where a list's page starts (the name after which it goes on: any topic or group name, system ones
        included, so only its length and characters are checked), or None when absent."""
        return self.take_text(name, 255) if self._raw(name, False) is not None else None

    def take_key(self, name: str = "key") -> str:
        """A message key (KEYS holds keys separated by spaces: a key has none)."""
        value = self.take_text(name, KEY_MAX)
        if " " in value:
            raise bad_parameter(name, "a key has no spaces (KEYS separates keys with them)")
        return value

    def take_choice(self, name: str, choices: tuple[str, ...], default: str) -> str:
        """One of ``choices`` (any letter case; returned as listed), ``default`` when absent."""
        raw = self._raw(name, False)
        if raw is None:
            return default
        for c in choices:
            if raw.upper() == c.upper():
                return c
        raise bad_parameter(name, f"give one of {', '.join(choices)}")
