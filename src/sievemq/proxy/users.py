"""The brokers' ACL 2.0 users and ACLs, as the proxy knows them (docs/acl2.md §9).

Every ``authMetadataRefreshSeconds`` (5 s) the proxy asks the name servers for the brokers of
``rocketMQClusterName`` and one of them, signed with the proxy's own account (``aclAccessKey``, a Super user of the
brokers), for its whole ``auth.json`` document (GET_ALL_AUTH_METADATA, 30023): the brokers by name, each set's
master before its slaves (which hold a copy), the first that answers. So a user or ACL changed on the brokers
applies at the proxy within that time. A round that fails keeps what the proxy has (said once per change of
outcome); until the first round succeeds every call is refused (reason ``BROKER_UNREACHABLE``).

RocketMQ's proxy instead asks a random broker of the cluster for one user (getUser) or ACL (getAcl) at a time and
caches each (``userCacheRefreshSecond``, ``aclCacheRefreshSecond``: 60 s).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from types import MappingProxyType

from sievemq.auth.model import Acl, User
from sievemq.auth.store import parse_document
from sievemq.errors import ConfigError
from sievemq.protocol import mq_json
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import ConnectionPool
from sievemq.util.tasks import Background

__all__ = ["UserBook"]

log = logging.getLogger(__name__)


class UserBook:
    """The users and ACLs of the brokers of ``cluster``, fetched every ``refresh_s`` through ``pool``."""

    def __init__(
        self, pool: ConnectionPool, namesrv: list[str], cluster: str, refresh_s: float, timeout: float = 3.0
    ) -> None:
        self.pool = pool
        self.namesrv = namesrv
        self.cluster = cluster
        self.refresh_s = refresh_s
        self.timeout = timeout
        self._users: dict[str, User] = {}
        self._acls: dict[str, Acl] = {}
        self.loaded_at: float | None = None
        """``time.monotonic()`` of the last successful round (None: none yet)."""
        self.source: str | None = None
        """The broker the users came from last."""
        self.last_error: str | None = None
        self._task = Background("proxy-users")

    @property
    def users(self) -> Mapping[str, User]:
        return MappingProxyType(self._users)

    @property
    def acls(self) -> Mapping[str, Acl]:
        return MappingProxyType(self._acls)

    @property
    def loaded(self) -> bool:
        return self.loaded_at is not None

    async def start(self) -> None:
        """One round now (its failure is logged), then one every ``refresh_s`` in the background."""
        await self._round()
        self._task.start(self._loop())

    async def stop(self) -> None:
        await self._task.stop()

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_s)
            await self._round()

    async def _round(self) -> None:
        try:
            await self.refresh()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            why = f"{type(e).__name__}: {e}"
            if why != self.last_error:
                log.warning("ACL 2.0: cannot fetch the brokers' users and ACLs: %s (%s; retrying every %.0fs)", why,
                            "keeping the last ones" if self.loaded else "every call is refused until then",
                            self.refresh_s)  # fmt: skip
            self.last_error = why
        else:
            if self.last_error is not None:
                log.info("ACL 2.0: the brokers' users and ACLs are fetched again (from %s)", self.source)
            self.last_error = None

    async def _ask(self, addr: str, code: int) -> RemotingCommand:
        return await self.pool.request(addr, RemotingCommand.request(code), self.timeout)

    async def brokers(self) -> list[str]:
        """The addresses of ``cluster``'s brokers, by set name, each set's master first (the first name server that
        answers)."""
        problems: list[str] = []
        for ns in self.namesrv:
            try:
                resp = await self._ask(ns, RequestCode.GET_BROKER_CLUSTER_INFO)
            except (OSError, TimeoutError, ConnectionError) as e:
                problems.append(f"{ns}: {e}")
                continue
            info = mq_json.loads(resp.body) if resp.body else {}
            names = sorted((info.get("clusterAddrTable") or {}).get(self.cluster) or [])
            table = info.get("brokerAddrTable") or {}
            out = []
            for name in names:
                addrs = {int(k): v for k, v in ((table.get(name) or {}).get("brokerAddrs") or {}).items()}
                out += [addrs[i] for i in sorted(addrs)]
            if not out:
                raise LookupError(f"the name server {ns} knows no broker of cluster {self.cluster!r} "
                                  "(rocketMQClusterName)")  # fmt: skip
            return out
        raise ConnectionError("no name server answered: " + "; ".join(problems))

    async def refresh(self) -> None:
        """One round: the first broker that answers GET_ALL_AUTH_METADATA gives the users and ACLs."""
        problems: list[str] = []
        for addr in await self.brokers():
            try:
                resp = await self._ask(addr, RequestCode.GET_ALL_AUTH_METADATA)
            except (OSError, TimeoutError, ConnectionError) as e:
                problems.append(f"{addr}: {e}")
                continue
            if resp.code != ResponseCode.SUCCESS:
                hint = " (its ACL 2.0 is off)" if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED else ""
                problems.append(f"{addr} answered [{resp.code}] {resp.remark}{hint}")
                continue
            try:
                users, acls = parse_document(mq_json.loads(resp.body), f"of broker {addr}")
            except (ValueError, ConfigError) as e:
                problems.append(f"{addr} answered a document that is not valid: {e}")
                continue
            if self.source != addr:
                log.info("ACL 2.0: the proxy checks calls against the users and ACLs of broker %s", addr)
            self._users, self._acls = users, acls
            self.source, self.loaded_at = addr, time.monotonic()
            return
        raise ConnectionError("; ".join(problems))
