"""The dashboard API's refusals: an HTTP status and a stable ``reason`` a program branches on (docs/dashboard.md
§2), and how a failure of the admin API becomes one. Pure.

Every error answer is ``{"error": {"status", "reason", "message"}}``; ``message`` is for people and may change,
``reason`` never changes meaning. A broker's own refusal keeps the reason it carried (``NO_PERMISSION``,
``SQL92_DISABLED``, ...: ``sievemq.protocol.reasons``) and adds its response ``code``.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from sievemq.admin.api import NamesrvUnreachable, describe_failure
from sievemq.admin.auth_ops import Acl2Off, AuthInvalid
from sievemq.admin.errors import GroupNotFound, MessageNotFound, TopicNotFound
from sievemq.errors import RemotingError, SieveError
from sievemq.remoting.codes import ResponseCode

__all__ = ["ApiError", "ApiReason", "bad_parameter", "error_of"]


class ApiReason(StrEnum):
    """Why the dashboard API refused (the value is what the JSON carries)."""

    INVALID_PARAMETER = "INVALID_PARAMETER"
    """A query parameter is missing, malformed, or out of its range (400); the message names it."""
    INVALID_NAME = "INVALID_NAME"
    """A topic or group name breaks RocketMQ's name rules (400), checked before anything is asked."""
    INVALID_EXPRESSION = "INVALID_EXPRESSION"
    """A TAG or SQL92 expression does not parse (400); the message shows where."""
    AUTH_REQUIRED = "AUTH_REQUIRED"
    """The dashboard has logins and the request carries no ``Authorization: Bearer <token>`` (401)."""
    AUTH_FAILED = "AUTH_FAILED"
    """The request's token is malformed or no user's (401); counted against the client's address."""
    AUTH_RATE_LIMITED = "AUTH_RATE_LIMITED"
    """Too many failed logins from the client's address (429): ``Retry-After`` says when to try again."""
    BODY_NOT_ALLOWED = "BODY_NOT_ALLOWED"
    """The user may not read message bodies and property values (a viewer without ``readBodies``), which the
    endpoint shows or reveals (403)."""
    NOT_FOUND = "NOT_FOUND"
    """No such API path (404)."""
    TOPIC_NOT_FOUND = "TOPIC_NOT_FOUND"
    """The name servers know no such topic (404)."""
    GROUP_NOT_FOUND = "GROUP_NOT_FOUND"
    """No broker knows the consumer group (404)."""
    MESSAGE_NOT_FOUND = "MESSAGE_NOT_FOUND"
    """No broker holds a message with that id (404)."""
    NAMESRV_UNREACHABLE = "NAMESRV_UNREACHABLE"
    """No name server answered (502): check namesrvAddr and that they run."""
    BROKER_ERROR = "BROKER_ERROR"
    """A broker or name server refused or failed (502); ``code`` is its response code when it answered."""
    ADMIN_REQUIRED = "ADMIN_REQUIRED"
    """A write (``POST /api/access``) by a user who is not a dashboard admin (403)."""
    WRITES_NEED_LOGINS = "WRITES_NEED_LOGINS"
    """A write to a dashboard without logins that listens beyond loopback (403): anyone could make it."""
    CROSS_SITE_REQUEST = "CROSS_SITE_REQUEST"
    """A write whose ``Origin`` or ``Sec-Fetch-Site`` says another site's page sent it (403)."""
    UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
    """A write whose body is not sent as ``application/json`` (415)."""
    ACL_INVALID = "ACL_INVALID"
    """A broker refused a user or a policy entry as not valid (400; the message is its remark, naming the
    field)."""
    ACL2_OFF = "ACL2_OFF"
    """The brokers run without ACL 2.0 (409): there are no users nor policies to show or change."""


class ApiError(Exception):
    """A refusal to answer with ``status`` and ``reason``; ``extra`` goes into the error object too, ``headers``
    into the HTTP answer (``WWW-Authenticate``, ``Retry-After``)."""

    def __init__(
        self, status: int, reason: str, message: str, *, headers: Mapping[str, str] | None = None, **extra: Any
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.headers = dict(headers or {})
        self.extra = extra

    def to_json(self) -> dict[str, Any]:
        """``{"error": {"status", "reason", "message", ...extra}}``."""
        return {"error": {"status": self.status, "reason": self.reason, "message": self.message, **self.extra}}


def bad_parameter(name: str, problem: str) -> ApiError:
    """400 INVALID_PARAMETER naming the parameter."""
    return ApiError(400, ApiReason.INVALID_PARAMETER, f"parameter {name}: {problem}", parameter=name)


def error_of(e: BaseException) -> ApiError | None:
    """The API error an admin API failure is answered with; None for anything unexpected (a bug: the caller logs
    it and answers 500 without its details)."""
    if isinstance(e, ApiError):
        return e
    if isinstance(e, TopicNotFound):
        return ApiError(404, ApiReason.TOPIC_NOT_FOUND, str(e), topic=e.topic)
    if isinstance(e, GroupNotFound):
        return ApiError(404, ApiReason.GROUP_NOT_FOUND, str(e), group=e.group)
    if isinstance(e, MessageNotFound):
        return ApiError(404, ApiReason.MESSAGE_NOT_FOUND, str(e))
    if isinstance(e, AuthInvalid):
        return ApiError(400, ApiReason.ACL_INVALID, e.remark, broker=e.addr)
    if isinstance(e, Acl2Off):
        return ApiError(409, ApiReason.ACL2_OFF, str(e), broker=e.addr)
    if isinstance(e, NamesrvUnreachable):
        return ApiError(502, ApiReason.NAMESRV_UNREACHABLE, str(e))
    if isinstance(e, RemotingError):
        if e.code == ResponseCode.TOPIC_NOT_EXIST:
            return ApiError(404, ApiReason.TOPIC_NOT_FOUND, e.remark, code=e.code)
        if e.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED:
            return ApiError(400, ApiReason.INVALID_EXPRESSION, e.remark, code=e.code)
        return ApiError(502, e.reason or ApiReason.BROKER_ERROR, str(e), code=e.code)
    if isinstance(e, SieveError | OSError | ValueError):
        return ApiError(502, ApiReason.BROKER_ERROR, describe_failure(e))
    return None
