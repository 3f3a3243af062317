"""One home for sievemq's errors. Each carries the RocketMQ response code a server answers with."""

from __future__ import annotations

from collections.abc import Mapping

from sievemq.remoting.codes import ResponseCode


class SieveError(Exception):
    """Base of every sievemq error."""


class FrameError(SieveError):
    """A frame on the wire is malformed (bad length, bad header). The connection that sent it is closed."""


class RemotingError(SieveError):
    """A request failed with a RocketMQ response code; ``remark`` says why in words a person can act on.

    ``reason`` (a ``sievemq.protocol.reasons.Reason`` value, or None) is the stable word programs branch on; a
    server puts it in the response's ``reason`` extField, a client reads it back from there.
    """

    def __init__(self, code: int, remark: str, reason: str | None = None) -> None:
        super().__init__(f"[{_code_name(code)}] {remark}")
        self.code = int(code)
        self.remark = remark
        self.reason = reason

    @classmethod
    def from_response(cls, code: int, remark: str | None, ext_fields: Mapping[str, str]) -> RemotingError:
        """The error a refused response stands for (its code, remark and ``reason`` field)."""
        return cls(code, remark or "", ext_fields.get("reason") or None)


class HeaderError(RemotingError):
    """A request field is missing, not of the expected type, or out of its range (reason ``INVALID_HEADER``)."""

    def __init__(self, remark: str, reason: str = "INVALID_HEADER") -> None:
        super().__init__(ResponseCode.SYSTEM_ERROR, remark, reason)


class ConnectionClosedError(SieveError):
    """The peer closed the connection before answering."""


class RequestTimeoutError(SieveError):
    """No response arrived within the request timeout."""


class RecoveryError(SieveError):
    """A master cannot be recovered from the slave it was given (``--recover-from-slave``); nothing was served."""


class ConfigError(SieveError):
    """A configuration is unusable: a bad value, an unknown key, an unreadable file.

    For a bad value, ``key`` (camelCase, as written in a TOML file), ``value`` and ``allowed`` (what the key
    accepts, in words) say which and why, and ``source`` where the value came from (a file, an environment
    variable, the command line); the message is one line built from them. Otherwise ``key`` is empty.
    """

    def __init__(
        self, message: str = "", *, key: str = "", value: object = None, allowed: str = "", source: str = ""
    ) -> None:
        if not message:
            where = f" (from {source})" if source else ""
            message = f"invalid {key} {value!r}{where}: expected {allowed}"
        super().__init__(message)
        self.key = key
        self.value = value
        self.allowed = allowed
        self.source = source


def _code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"code {code}"
