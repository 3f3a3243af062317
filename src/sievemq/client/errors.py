"""Errors raised by the client API (on top of sievemq.errors: RemotingError carries broker codes)."""

from __future__ import annotations

from sievemq.errors import ConnectionClosedError, RemotingError, SieveError
from sievemq.remoting.codes import ResponseCode


class ClientError(SieveError):
    """Base of errors the client raises by itself (misuse, state)."""


class MessageValidationError(ClientError, ValueError):
    """A message, topic, group or property is not acceptable; nothing was sent."""


class ClientStateError(ClientError, RuntimeError):
    """The producer or consumer is not in a state for this call (not started, already closed...)."""


class NoRouteError(RemotingError):
    """No name server knows a route for the topic (and auto-creation through TBW102 was not possible); ``reason``
    is the name server's (``BROKER_GONE``: the brokers that served it left, and the message names them)."""

    def __init__(self, topic: str, detail: str = "", reason: str | None = None) -> None:
        text = f"no route info of topic {topic!r}"
        super().__init__(ResponseCode.TOPIC_NOT_EXIST, f"{text}: {detail}" if detail else text, reason)
        self.topic = topic
        self.detail = detail


class NameServerUnreachableError(ConnectionClosedError):
    """No name server of the client's list answered (the message says what each one did)."""


class SubscriptionError(RemotingError):
    """A broker refused a subscription (CHECK_CLIENT_CONFIG answered non-zero, e.g. SQL92 that does not compile),
    or a filter server refused a filter function (module not allowed, uploads off, signature that does not verify)."""


class FilterFunctionError(ClientError, ConnectionError):
    """No filter server could run a consumer's filter function for a pull (none is listed in the route for the
    broker, or every listed one was unreachable or refused the function). The pull is retried later from the same
    offset: nothing is skipped."""
