"""The filter server's registration with its one broker: REGISTER_FILTER_SERVER (301) at start and every
``registerIntervalSeconds``, its body the functions' counts (docs/metrics.md §4)."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable

import orjson

from sievemq.filtersrv.registry import FilterRegistry
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import ConnectionPool
from sievemq.util.tasks import Background

log = logging.getLogger(__name__)


class BrokerRegistration:
    """Registers ``addr`` (this server's advertised ``ip:port``, known once it listens) with the broker at
    ``broker_addr`` through ``conns``, and remembers what the broker answered."""

    def __init__(
        self,
        conns: ConnectionPool,
        broker_addr: str,
        addr: Callable[[], str],
        registry: FilterRegistry,
        interval: float,
    ) -> None:
        self._conns = conns
        self.broker_addr = broker_addr
        self._addr = addr
        self._registry = registry
        self._interval = interval
        self.broker_name = ""
        self.broker_id = -1
        self.last_registered = 0.0
        self.instance = secrets.token_hex(8)
        """This process's token in its 301 counts (the broker keeps counting per instance: docs/metrics.md §4)."""
        self._failing = False
        self._task = Background("filtersrv-registration")

    async def register_once(self) -> bool:
        """REGISTER_FILTER_SERVER (301) to the broker, its body this server's function counts (``counts_body``);
        True when it answered SUCCESS."""
        addr = self._addr()
        cmd = RemotingCommand.request(RequestCode.REGISTER_FILTER_SERVER, {"filterServerAddr": addr},
                                      self.counts_body())  # fmt: skip
        try:
            resp = await self._conns.request(self.broker_addr, cmd, 3.0)
        except Exception as e:
            self._failed(f"cannot reach it: {e}")
            return False
        if resp.code != ResponseCode.SUCCESS:
            self._failed(f"it answered [{resp.code}] {resp.remark}")
            return False
        f = resp.ext_fields
        name, bid = f.get("brokerName", ""), int(f.get("brokerId", "-1") or -1)
        if self._failing or (name, bid) != (self.broker_name, self.broker_id):
            log.info("registered with broker %s (%s, id %d) as %s", self.broker_addr, name, bid, addr)
        self.broker_name, self.broker_id = name, bid
        self.last_registered = time.time()
        self._failing = False
        return True

    def counts_body(self) -> bytes:
        """What every 301 carries: ``{"instance": token, "functions": [...]}`` (``FilterRegistry.counts_report``),
        from which the broker's /metrics shows the functions' decisions (docs/metrics.md §4). A RocketMQ broker
        ignores a 301's body."""
        return orjson.dumps({"instance": self.instance, "functions": self._registry.counts_report()})

    def _failed(self, why: str) -> None:
        if not self._failing:
            log.warning("registration with broker %s failed: %s (retrying)", self.broker_addr, why)
        self._failing = True

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.register_once()
            except Exception:
                log.exception("registration with the broker failed")

    def start(self) -> None:
        """Register again every ``interval`` seconds (the first registration is ``register_once``)."""
        self._task.start(self._loop())

    async def stop(self) -> None:
        """Stop registering."""
        await self._task.stop()
