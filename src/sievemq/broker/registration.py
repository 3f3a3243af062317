"""Registration with every name server: at start, every ``registerBrokerInterval`` and when topics change."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import orjson

from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import ConnectionPool, RpcHook
from sievemq.remoting.tls import ClientTls
from sievemq.util.tasks import Background

log = logging.getLogger(__name__)


SOON_S = 1.0
"""Seconds between registrations while ``soon()`` says a quick answer is wanted."""


class NamesrvRegistrar:
    """Sends REGISTER_BROKER to each configured name server (signed by ``rpc_hook`` when the broker has an account)."""

    def __init__(
        self,
        namesrv_addrs: list[str],
        header: dict[str, Any],
        body: Callable[[], dict[str, Any]],
        interval: float,
        rpc_hook: RpcHook | None = None,
        tls: ClientTls | None = None,
        on_answer: Callable[[str | None, str | None], None] | None = None,
        soon: Callable[[], bool] | None = None,
    ) -> None:
        """``on_answer(masterAddr, haServerAddr)`` gets what a name server answers (a slave learns its master);
        while ``soon()`` is true, rounds come every ``SOON_S`` instead of every ``interval`` (a slave that has not
        learnt its master yet)."""
        self.addrs = namesrv_addrs
        self._header = header
        self._body = body
        self._interval = interval
        self._pool = ConnectionPool(rpc_hook=rpc_hook, tls=tls.context() if tls is not None else None)
        self._on_answer = on_answer
        self._soon = soon
        self._task = Background("broker-registration")
        self._kick = asyncio.Event()
        self.failures = 0
        """Rounds that failed before a request could be sent (logged; the next round comes anyway)."""

    async def register_all(self) -> dict[str, bool]:
        """Register with every name server now; returns which succeeded."""
        body = orjson.dumps(self._body())
        results = await asyncio.gather(*(self._register_one(a, body) for a in self.addrs))
        return dict(zip(self.addrs, results, strict=True))

    async def _register_one(self, addr: str, body: bytes) -> bool:
        cmd = RemotingCommand.request(RequestCode.REGISTER_BROKER, {**self._header, "compressed": False}, body)
        try:
            resp = await self._pool.request(addr, cmd, timeout=6.0)
        except Exception as e:
            log.warning("register with name server %s failed: %s", addr, e)
            return False
        if resp.code != ResponseCode.SUCCESS:
            log.warning("name server %s refused registration: [%d] %s", addr, resp.code, resp.remark)
            return False
        if self._on_answer is not None:
            f = resp.ext_fields
            self._on_answer(f.get("masterAddr") or None, f.get("haServerAddr") or None)
        return True

    def kick(self) -> None:
        """Register again soon (topics changed)."""
        self._kick.set()

    async def _loop(self) -> None:
        while True:
            try:
                wait = min(SOON_S, self._interval) if self._soon is not None and self._soon() else self._interval
                await asyncio.wait_for(self._kick.wait(), wait)
            except TimeoutError:
                pass
            self._kick.clear()
            try:
                await self.register_all()
            except Exception:  # e.g. a body that does not serialise: log, count, and keep registering
                self.failures += 1
                log.exception("registration round failed (%d so far); retrying in %.0fs", self.failures, self._interval)

    def start(self) -> None:
        """Start periodic registration."""
        self._task.start(self._loop())

    async def stop(self) -> None:
        """Unregister from every name server and close connections."""
        await self._task.stop()
        hdr = {k: self._header[k] for k in ("brokerName", "brokerAddr", "clusterName", "brokerId")}
        for addr in self.addrs:
            try:
                await self._pool.request(addr, RemotingCommand.request(RequestCode.UNREGISTER_BROKER, hdr), 2.0)
            except Exception as e:
                log.debug("unregister from %s failed: %s", addr, e)
        await self._pool.close()
