"""The proxy's ACL check in front of every call (docs/proxy.md §9): the plain ACL's (``access.py``, ``PlainChecker``) or
ACL 2.0's against the brokers' users and policies (``access2.py``, ``UserChecker``; docs/acl2.md §9).

A grpc.aio server interceptor wraps each method's handler: a unary call that may not be made is answered with its
response type carrying UNAUTHORIZED (40100: no, unknown or wrong credentials) or FORBIDDEN (40300: a permission
missing) and the reason in the status message; a receive answers one such response; a Telemetry stream checks its
opening and each settings command and ends with gRPC PERMISSION_DENIED (the clients retry it). Every refusal is
logged, each distinct one at most every 10 seconds. Before ACL 2.0's users are fetched, calls are refused with
INTERNAL_SERVER_ERROR (reason ``BROKER_UNREACHABLE``; a Telemetry stream: gRPC UNAVAILABLE).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import grpc

from sievemq.acl.decision import Refusal
from sievemq.acl.loader import AclFile
from sievemq.protocol.reasons import Reason
from sievemq.proxy import access2
from sievemq.proxy.access import check, needs_of, peer_ip, settings_needs
from sievemq.proxy.users import UserBook
from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.proxy.v2 import service_pb2 as svc
from sievemq.util.ratelimit import RateLimitedLog, suppressed_note

__all__ = ["AclInterceptor", "Checker", "PlainChecker", "UserChecker"]

log = logging.getLogger(__name__)


class Checker(Protocol):
    """Decides a call (its opening: ``call``) and each Telemetry settings command (``settings``)."""

    def call(self, peer: str, metadata: Mapping[str, str], method: str, request: Any) -> Refusal | None: ...

    def settings(self, peer: str, metadata: Mapping[str, str], settings: pb.Settings) -> Refusal | None: ...


@dataclass
class PlainChecker:
    """The plain ACL: the accounts and rules of ``file`` (reloaded when it changes)."""

    file: AclFile
    max_skew_s: int

    def call(self, peer: str, metadata: Mapping[str, str], method: str, request: Any) -> Refusal | None:
        return check(self.file.current(), peer, metadata, needs_of(method, request), datetime.now(UTC),
                     self.max_skew_s)  # fmt: skip

    def settings(self, peer: str, metadata: Mapping[str, str], settings: pb.Settings) -> Refusal | None:
        return check(self.file.current(), peer, metadata, settings_needs(settings), datetime.now(UTC),
                     self.max_skew_s)  # fmt: skip


@dataclass
class UserChecker:
    """ACL 2.0: the brokers' users and policies (``book``)."""

    book: UserBook
    switches: access2.Switches
    max_skew_s: int

    def _check(self, peer: str, metadata: Mapping[str, str], method: str, needs: list[access2.Need]) -> Refusal | None:
        if not self.book.loaded:
            return Refusal(Reason.BROKER_UNREACHABLE, "ACL 2.0: the proxy has not fetched the brokers' users yet "
                           f"({self.book.last_error or 'starting'})")  # fmt: skip
        return access2.check(self.book.users, self.book.acls, self.switches, peer, metadata, method, needs,
                             datetime.now(UTC), self.max_skew_s)  # fmt: skip

    def call(self, peer: str, metadata: Mapping[str, str], method: str, request: Any) -> Refusal | None:
        return self._check(peer, metadata, method, access2.needs_of(method, request))

    def settings(self, peer: str, metadata: Mapping[str, str], settings: pb.Settings) -> Refusal | None:
        return self._check(peer, metadata, "Telemetry settings", access2.settings_needs(settings))


class AclInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Checks every call with ``checker``."""

    def __init__(self, checker: Checker) -> None:
        self.checker = checker
        self.refused = 0
        self._log = RateLimitedLog(10.0)

    def _decide(self, context: Any, method: str, request: Any, settings: pb.Settings | None = None) -> Refusal | None:
        metadata = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
        peer = peer_ip(context.peer() or "")
        if settings is not None:
            refusal = self.checker.settings(peer, metadata, settings)
        else:
            refusal = self.checker.call(peer, metadata, method, request)
        if refusal is not None:
            self.refused += 1
            held = self._log.allow((peer, refusal.remark))
            if held is not None:
                log.warning("proxy refused %s from %s: [%s] %s%s", method, peer, refusal.reason, refusal.remark,
                            suppressed_note(held))  # fmt: skip
        return refusal

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return None
        method = details.method.rpartition("/")[2]
        answer = getattr(svc, f"{method}Response", None)
        if handler.unary_unary is not None and answer is not None:
            return self._unary(handler, method, answer)
        if handler.unary_stream is not None and answer is not None:
            return self._server_stream(handler, method, answer)
        if handler.stream_stream is not None:
            return self._telemetry(handler, method)
        return handler

    def _unary(self, handler: grpc.RpcMethodHandler, method: str, answer: Any) -> grpc.RpcMethodHandler:
        inner = handler.unary_unary

        async def call(request: Any, context: Any) -> Any:
            refusal = self._decide(context, method, request)
            if refusal is not None:
                return answer(status=_status(refusal))
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(
            call, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )

    def _server_stream(self, handler: grpc.RpcMethodHandler, method: str, answer: Any) -> grpc.RpcMethodHandler:
        inner = handler.unary_stream

        async def call(request: Any, context: Any) -> AsyncIterator[Any]:
            refusal = self._decide(context, method, request)
            if refusal is not None:
                yield answer(status=_status(refusal))
                return
            async for response in inner(request, context):
                yield response

        return grpc.unary_stream_rpc_method_handler(
            call, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )

    def _telemetry(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        inner = handler.stream_stream

        async def call(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
            refusal = self._decide(context, method, None)
            if refusal is not None:
                await context.abort(_grpc_code(refusal), f"[{refusal.reason}] {refusal.remark}")

            stopped: list[Refusal] = []

            async def checked() -> AsyncIterator[Any]:  # read by the service's own task: it ends the stream there
                async for cmd in requests:
                    if cmd.WhichOneof("command") == "settings":
                        refused = self._decide(context, method, None, cmd.settings)
                        if refused is not None:
                            stopped.append(refused)
                            return
                    yield cmd

            async for response in inner(checked(), context):
                yield response
            if stopped:
                await context.abort(_grpc_code(stopped[0]), f"[{stopped[0].reason}] {stopped[0].remark}")

        return grpc.stream_stream_rpc_method_handler(
            call, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )


def _grpc_code(refusal: Refusal) -> grpc.StatusCode:
    unavailable = refusal.reason == Reason.BROKER_UNREACHABLE
    return grpc.StatusCode.UNAVAILABLE if unavailable else grpc.StatusCode.PERMISSION_DENIED


def _status(refusal: Refusal) -> pb.Status:
    code = pb.FORBIDDEN if refusal.reason == Reason.NO_PERMISSION else pb.UNAUTHORIZED
    if refusal.reason == Reason.BROKER_UNREACHABLE:
        code = pb.INTERNAL_SERVER_ERROR
    return pb.Status(code=code, message=f"[{refusal.reason}] {refusal.remark}")  # type: ignore[arg-type]
