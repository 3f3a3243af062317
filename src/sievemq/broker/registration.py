"""Registration with every name server: at start, every ``registerBrokerIntervalSeconds`` and when topics change
(docs/registration.md).

A round sends the topic table only where it is needed: unless ``forceRegister``, a periodic round first asks each
name server for the data version it holds (QUERY_DATA_VERSION, which is a sign of life as well) and registers
only where that differs or the last registration did not complete. The body is built once per data version
(beside the event loop when the table is large), compressed in RocketMQ's binary form once the table holds
``RegisterSettings.compress_from`` topics (``compressedRegister``), and split into parts of ``splitRegistrationSize``
topics (``enableSplitRegistration``), each part marked ``topicTablePart: i/n``. A topic created or changed is sent
alone at once (an increment, as RocketMQ's ``registerIncrementBrokerData``); the next periodic round sends the whole
table once more to each name server that got increments.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from sievemq.protocol.register_body import PART_FIELD, encode_compressed, encode_json, version_key
from sievemq.protocol.route import TopicConfig
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import ConnectionPool, RpcHook
from sievemq.remoting.headers import get_bool
from sievemq.remoting.tls import ClientTls
from sievemq.util.tasks import Background

log = logging.getLogger(__name__)


SOON_S = 1.0
"""Seconds between registrations while ``soon()`` says a quick answer is wanted."""
COMPRESS_FROM_TOPICS = 1000
"""With ``compressedRegister``, tables of at least this many topics go compressed (smaller ones stay JSON, which
carries ``topicSysFlag`` and ``order`` too)."""
OFF_LOOP_TOPICS = 2000
"""Bodies of tables this large are encoded, and their increments found, in a worker thread."""
TIMEOUT_S = 6.0
INCREMENT_MAX_TOPICS = 1000
"""A change of more topics than this is sent as the whole table."""


@dataclass(frozen=True, slots=True)
class RegisterSettings:
    """How the table is sent (the broker settings of the same RocketMQ names)."""

    compressed: bool = True
    force: bool = False
    split: bool = False
    split_size: int = 800
    compress_from: int = COMPRESS_FROM_TOPICS


@dataclass(frozen=True, slots=True)
class TableSnapshot:
    """What a registration carries, taken on the event loop (cheap: references, no encoding)."""

    data_version: dict[str, int]
    topics: list[TopicConfig]
    filter_servers: list[str] = field(default_factory=list)

    @property
    def version(self) -> tuple[int, int, int]:
        """The data version as compared (``version_key``)."""
        return version_key(self.data_version)


@dataclass(frozen=True, slots=True)
class Encoded:
    """A table's REGISTER_BROKER bodies (one per part) and whether they are compressed."""

    parts: list[bytes]
    compressed: bool

    @property
    def size(self) -> int:
        """Bytes of all parts."""
        return sum(len(p) for p in self.parts)


def encode_table(snap: TableSnapshot, settings: RegisterSettings, plain: bool = False) -> Encoded:
    """The bodies of ``snap`` under ``settings`` (``plain``: JSON even if compression is on)."""
    compressed = settings.compressed and not plain and len(snap.topics) >= settings.compress_from
    size = settings.split_size if settings.split else max(1, len(snap.topics))
    chunks = [snap.topics[i : i + size] for i in range(0, len(snap.topics), size)] or [[]]
    if compressed:
        parts = [encode_compressed(snap.data_version, c, snap.filter_servers) for c in chunks]
    else:
        parts = [encode_json(snap.data_version, c, snap.filter_servers) for c in chunks]
    return Encoded(parts, compressed)


class NamesrvRegistrar:
    """Sends REGISTER_BROKER to each configured name server (signed by ``rpc_hook`` when the broker has an account)."""

    def __init__(
        self,
        namesrv_addrs: list[str],
        header: dict[str, Any],
        body: Callable[[], TableSnapshot | dict[str, Any]],
        interval: float,
        rpc_hook: RpcHook | None = None,
        tls: ClientTls | None = None,
        on_answer: Callable[[str | None, str | None], None] | None = None,
        soon: Callable[[], bool] | None = None,
        *,
        settings: RegisterSettings | None = None,
        force: Callable[[], bool] | None = None,
    ) -> None:
        """``body()``: the table now (a ``TableSnapshot``; a dict is sent as that JSON document, as is).
        ``on_answer(masterAddr, haServerAddr)`` gets what a name server answers (a slave learns its master); while
        ``soon()`` is true, rounds come every ``SOON_S`` instead of every ``interval`` (a slave that has not learnt
        its master yet) and send the table; so do they while ``force()`` is true."""
        self.addrs = namesrv_addrs
        self._header = header
        self._body = body
        self._interval = interval
        self.settings = settings or RegisterSettings()
        self._pool = ConnectionPool(rpc_hook=rpc_hook, tls=tls.context() if tls is not None else None)
        self._on_answer = on_answer
        self._soon = soon
        self._force = force
        self._task = Background("broker-registration")
        self._kick = asyncio.Event()
        self._lock = asyncio.Lock()
        self._acked: dict[str, tuple[int, int, int]] = {}
        """Name server -> the data version whose every part it acknowledged."""
        self._held: dict[str, tuple[dict[str, TopicConfig], tuple[str, ...]]] = {}
        """Name server -> the topics (name -> the config object sent) and filter servers it acknowledged."""
        self._increments: set[str] = set()
        """Name servers that got increments since their last whole table (the next round sends it)."""
        self._rounds = 0
        """Forced rounds started (a caller is served by any forced round that started after it asked)."""
        self._last: dict[str, bool] = {}
        self._plain: set[str] = set()
        """Name servers that refused a compressed body: they get JSON."""
        self._cache: dict[tuple[Any, ...], Encoded] = {}
        self.failures = 0
        """Rounds that failed before a request could be sent (logged; the next round comes anyway)."""
        self.sent_bodies = 0
        """REGISTER_BROKER requests sent (a split table counts each part)."""
        self.sent_bytes = 0
        """Their bodies' bytes."""
        self.unchanged = 0
        """Name-server rounds QUERY_DATA_VERSION answered unchanged (no table sent)."""
        self.increments = 0
        """Increments sent (a change sent alone)."""

    # ------------------------------------------------------------------ bodies
    def _snapshot(self) -> TableSnapshot | dict[str, Any]:
        return self._body()

    async def _encoded(self, snap: TableSnapshot | dict[str, Any], plain: bool) -> Encoded:
        if isinstance(snap, dict):  # a ready JSON document
            return Encoded([orjson.dumps(snap)], False)
        s = self.settings
        key = (snap.version, len(snap.topics), tuple(snap.filter_servers), plain)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if len(snap.topics) >= OFF_LOOP_TOPICS:
            encoded = await asyncio.to_thread(encode_table, snap, s, plain)
        else:
            encoded = encode_table(snap, s, plain)
        self._cache = {k: v for k, v in self._cache.items() if k[0] == snap.version}  # older versions go
        self._cache[key] = encoded
        return encoded

    @staticmethod
    def _version(snap: TableSnapshot | dict[str, Any]) -> tuple[int, int, int]:
        if isinstance(snap, dict):
            return version_key((snap.get("topicConfigSerializeWrapper") or {}).get("dataVersion"))
        return snap.version

    # ------------------------------------------------------------------ rounds
    async def register_all(self, force: bool = True) -> dict[str, bool]:
        """Register with every name server now (``force`` false: only where the data version it holds differs);
        returns which succeeded (or needed nothing)."""
        wanted = self._rounds + 1
        async with self._lock:  # one round at a time: the parts of two versions never interleave
            if force and self._rounds >= wanted:  # a round that started after this call covered its change
                return dict(self._last)
            if force:
                self._rounds += 1
            snap = self._snapshot()
            results = await asyncio.gather(*(self._register_one(a, snap, force) for a in self.addrs))
            self._last = dict(zip(self.addrs, results, strict=True))
        return dict(self._last)

    async def _register_one(self, addr: str, snap: TableSnapshot | dict[str, Any], force: bool) -> bool:
        version = self._version(snap)
        acked = self._acked.get(addr)
        consolidate = addr in self._increments and not force
        if not force and not consolidate and acked == version and not await self._changed(addr, snap):
            self.unchanged += 1
            return True
        if force and acked is not None and acked != version and isinstance(snap, TableSnapshot):
            done = await self._send_increment(addr, snap)
            if done is not None:
                return done
        self._acked.pop(addr, None)
        encoded = await self._encoded(snap, addr in self._plain)
        ok, refused = await self._send(addr, encoded)
        if not ok and refused and encoded.compressed:
            log.warning("name server %s refused a compressed registration: sending it JSON from now on", addr)
            self._plain.add(addr)
            ok, _ = await self._send(addr, await self._encoded(snap, True))
        if ok:
            self._acked[addr] = version
            self._increments.discard(addr)
            if isinstance(snap, TableSnapshot):
                self._held[addr] = ({tc.topic_name: tc for tc in snap.topics}, tuple(snap.filter_servers))
        else:
            self._held.pop(addr, None)
        return ok

    def _increment(self, addr: str, snap: TableSnapshot) -> list[TopicConfig] | None:
        """The topics created or changed since what ``addr`` acknowledged; None when the change needs the whole
        table (a topic removed, the filter servers changed, too many topics, nothing acknowledged yet)."""
        held = self._held.get(addr)
        if held is None or held[1] != tuple(snap.filter_servers):
            return None
        table = held[0]
        changed = [tc for tc in snap.topics if table.get(tc.topic_name) is not tc]
        if len(changed) > INCREMENT_MAX_TOPICS:
            return None
        added = sum(1 for tc in changed if tc.topic_name not in table)
        if len(table) + added != len(snap.topics):
            return None  # a topic left: the whole table, whose last part removes it
        return changed

    async def _send_increment(self, addr: str, snap: TableSnapshot) -> bool | None:
        """Send only what changed (unmarked: a name server adds it and removes nothing), with the new data version;
        None when the whole table must go instead (the change is not an increment, or it was refused)."""
        if len(snap.topics) >= OFF_LOOP_TOPICS:  # a pass over the table (30 ms at 100,000 topics)
            changed = await asyncio.to_thread(self._increment, addr, snap)
        else:
            changed = self._increment(addr, snap)
        if changed is None:
            return None
        body = encode_json(snap.data_version, changed, snap.filter_servers)
        ok, refused = await self._send(addr, Encoded([body], False), marked=False)
        if refused:
            return None
        if not ok:
            self._acked.pop(addr, None)
            self._held.pop(addr, None)
            return False
        self.increments += 1
        table = self._held[addr][0]
        for tc in changed:
            table[tc.topic_name] = tc
        self._acked[addr] = snap.version
        self._increments.add(addr)  # the next round sends the whole table once (a name server that restarted
        return True  # meanwhile took the increment as all there is)

    async def _changed(self, addr: str, snap: TableSnapshot | dict[str, Any]) -> bool:
        """QUERY_DATA_VERSION (322): does ``addr`` hold another data version than ours (or none)? A failure is a
        change (the table is sent); the query refreshes the broker's liveness there."""
        state, ts, counter = self._version(snap)
        hdr = {k: self._header[k] for k in ("brokerName", "brokerAddr", "clusterName", "brokerId")}
        body = orjson.dumps({"counter": counter, "stateVersion": state, "timestamp": ts})
        try:
            resp = await self._pool.request(addr, RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, hdr, body),
                                            timeout=TIMEOUT_S)  # fmt: skip
        except Exception as e:
            log.warning("QUERY_DATA_VERSION to name server %s failed: %s", addr, e)
            return True
        if resp.code != ResponseCode.SUCCESS:
            return True
        if get_bool(resp.ext_fields, "changed"):
            return True
        try:
            theirs = orjson.loads(resp.body) if resp.body else None
        except orjson.JSONDecodeError:
            return True
        return theirs is not None and version_key(theirs) != (state, ts, counter)

    async def _send(self, addr: str, encoded: Encoded, marked: bool = True) -> tuple[bool, bool]:
        """Send every part to ``addr`` in order, ``marked`` as parts of the complete table; (all acknowledged, a
        part was refused by an answer)."""
        n = len(encoded.parts)
        for i, body in enumerate(encoded.parts, 1):
            header = {**self._header, "compressed": encoded.compressed, "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF}
            if marked:
                header[PART_FIELD] = f"{i}/{n}"
            cmd = RemotingCommand.request(RequestCode.REGISTER_BROKER, header, body)
            try:
                resp = await self._pool.request(addr, cmd, timeout=TIMEOUT_S)
            except Exception as e:
                log.warning("register with name server %s failed: %s", addr, e)
                return False, False
            if resp.code != ResponseCode.SUCCESS:
                log.warning("name server %s refused registration: [%d] %s", addr, resp.code, resp.remark)
                return False, True
            self.sent_bodies += 1
            self.sent_bytes += len(body)
            if self._on_answer is not None and i == n:
                f = resp.ext_fields
                self._on_answer(f.get("masterAddr") or None, f.get("haServerAddr") or None)
        return True, False

    def kick(self) -> None:
        """Register again soon (topics or filter servers changed)."""
        self._kick.set()

    def _forced(self) -> bool:
        return (
            self.settings.force
            or (self._soon is not None and self._soon())
            or (self._force is not None and self._force())
        )

    async def _loop(self) -> None:
        while True:
            try:
                wait = min(SOON_S, self._interval) if self._soon is not None and self._soon() else self._interval
                await asyncio.wait_for(self._kick.wait(), wait)
            except TimeoutError:
                pass
            kicked = self._kick.is_set()
            self._kick.clear()
            try:
                await self.register_all(force=kicked or self._forced())
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
