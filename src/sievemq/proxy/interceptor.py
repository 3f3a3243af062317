"""The proxy's ACL check in front of every call (docs/proxy.md §9; the decision is ``access.py``'s).

A grpc.aio server interceptor wraps each method's handler: a unary call that may not be made is answered with its
response type carrying UNAUTHORIZED (40100: no, unknown or wrong credentials) or FORBIDDEN (40300: a permission
missing) and the reason in the status message; a receive answers one such response; a Telemetry stream checks its
opening and each settings command and ends with gRPC PERMISSION_DENIED (the clients retry it). Every refusal is
logged, each distinct one at most every 10 seconds.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import grpc

from sievemq.acl.decision import Refusal
from sievemq.acl.loader import AclFile
from sievemq.protocol.reasons import Reason
from sievemq.proxy.access import check, needs_of, peer_ip, settings_needs
from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.proxy.v2 import service_pb2 as svc
from sievemq.util.ratelimit import RateLimitedLog, suppressed_note

__all__ = ["AclInterceptor"]

log = logging.getLogger(__name__)


class AclInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Checks every call against the rules of ``acl_file`` (reloaded when it changes)."""

    def __init__(self, acl_file: AclFile, max_skew_s: int) -> None:
        self.file = acl_file
        self.max_skew_s = max_skew_s
        self.refused = 0
        self._log = RateLimitedLog(10.0)

    def _decide(self, context: Any, method: str, needs: list[tuple[int, dict[str, str]]]) -> Refusal | None:
        metadata = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
        peer = peer_ip(context.peer() or "")
        refusal = check(self.file.current(), peer, metadata, needs, datetime.now(UTC), self.max_skew_s)
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
            refusal = self._decide(context, method, needs_of(method, request))
            if refusal is not None:
                return answer(status=_status(refusal))
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(
            call, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )

    def _server_stream(self, handler: grpc.RpcMethodHandler, method: str, answer: Any) -> grpc.RpcMethodHandler:
        inner = handler.unary_stream

        async def call(request: Any, context: Any) -> AsyncIterator[Any]:
            refusal = self._decide(context, method, needs_of(method, request))
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
            refusal = self._decide(context, method, [])
            if refusal is not None:
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, f"[{refusal.reason}] {refusal.remark}")

            stopped: list[Refusal] = []

            async def checked() -> AsyncIterator[Any]:  # read by the service's own task: it ends the stream there
                async for cmd in requests:
                    if cmd.WhichOneof("command") == "settings":
                        refused = self._decide(context, method, settings_needs(cmd.settings))
                        if refused is not None:
                            stopped.append(refused)
                            return
                    yield cmd

            async for response in inner(checked(), context):
                yield response
            if stopped:
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, f"[{stopped[0].reason}] {stopped[0].remark}")

        return grpc.stream_stream_rpc_method_handler(
            call, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )


def _status(refusal: Refusal) -> pb.Status:
    code = pb.FORBIDDEN if refusal.reason == Reason.NO_PERMISSION else pb.UNAUTHORIZED
    return pb.Status(code=code, message=f"[{refusal.reason}] {refusal.remark}")  # type: ignore[arg-type]
