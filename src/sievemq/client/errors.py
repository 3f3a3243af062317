"""Errors raised by the client API (on top of sievemq.errors: RemotingError carries broker codes)."""

from __future__ import annotations

from sievemq.errors import ConnectionClosedError, RemotingError, SieveError
from sievemq.remoting.codes import RequestCode, ResponseCode


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


NAMESRV_DEFAULT_PORT = 9876
"""The port name servers listen on unless told otherwise (RocketMQ's and sievemq's)."""


class NotANameServerError(NameServerUnreachableError):
    """An address given as a name server (``addr``) is something else: ``peer`` is ``"broker"`` when it answered a
    name server request (GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO...) with REQUEST_CODE_NOT_SUPPORTED (a
    RocketMQ server, but not a name server: a broker, in practice), ``"HTTP"`` when it answered HTTP (a dashboard or
    metrics port). Programs branch on the class and ``peer``; the text is for people."""

    def __init__(self, addr: str, peer: str, detail: str = "") -> None:
        what = "is a broker, not a name server" if peer == "broker" else f"speaks {peer}, not RocketMQ's protocol"
        super().__init__(f"{addr} {what}{f' ({detail})' if detail else ''}: give the name server's address "
                         f"({NAMESRV_DEFAULT_PORT} by default)")  # fmt: skip
        self.addr = addr
        self.peer = peer


def namesrv_refused(addr: str, request_code: int, answer_code: int) -> NotANameServerError | None:
    """What a name server request's refusal by ``addr`` means: REQUEST_CODE_NOT_SUPPORTED to a request every name
    server answers comes from another kind of RocketMQ server (a broker). None for any other answer."""
    if answer_code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        return None
    try:
        name = RequestCode(request_code).name
    except ValueError:
        name = str(request_code)
    return NotANameServerError(addr, "broker", f"it refuses the name server request {request_code} {name} with "
                               "REQUEST_CODE_NOT_SUPPORTED")  # fmt: skip


class SubscriptionError(RemotingError):
    """A broker refused a subscription (CHECK_CLIENT_CONFIG answered non-zero, e.g. SQL92 that does not compile),
    or a filter server refused a filter function (module not allowed, uploads off, signature that does not verify)."""


class FilterFunctionError(ClientError, ConnectionError):
    """No filter server could run a consumer's filter function for a pull (none is listed in the route for the
    broker, or every listed one was unreachable or refused the function). The pull is retried later from the same
    offset: nothing is skipped."""
