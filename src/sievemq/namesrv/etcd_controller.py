"""RocketMQ 5's controller requests, answered by a name server from the broker sets' state in etcd (docs/failover.md).

RocketMQ can run its controller inside the name server (``enableControllerInNamesrv``); ``mqadmin``'s controller
commands then take that name server as ``-a``. A sievemq name server with ``etcdEndpoints`` does the same over the
keys the failover brokers keep in etcd (``ha/set_state.py``; a set's are under
``<etcdRoot>/<cluster>/<brokerName>/``):

* 1005 CONTROLLER_GET_METADATA_INFO (``getControllerMetaData``, and the first step of the two below): the name
  server says it is the controller's leader, at the address the request reached it on: any name server with
  ``etcdEndpoints`` is one, as etcd holds what a controller's Raft log would.
* 1006 CONTROLLER_GET_SYNC_STATE_DATA (``getSyncStateSet``): a ``BrokerReplicasInfo`` of the brokerNames in the
  request body (a JSON list), from each set's ``state`` and live brokers.
* 1002 CONTROLLER_ELECT_MASTER (``electMaster``): an operator asks that broker N become the master. The name server
  checks N is alive and in the SyncStateSet, then writes ``<prefix>handover`` = ``{"brokerId": N, "requestedAt":
  <ms>}`` (attached to a lease of its own, so a name server that dies leaves no request behind) in a transaction
  that requires the state unchanged since it checked and no other request pending. The master does the handover
  (it stops acknowledging, waits until N has its whole log, and writes the new state itself: only a master knows
  where its log ends), and the name server answers once the state names N master of a higher epoch, as RocketMQ's
  controller does (``ElectMasterResponseHeader`` fields and body), or refuses with 2012 and a ``reason``
  (``protocol/reasons.py``) when the master withdrew the request or did not hand over in ``HANDOVER_TIMEOUT_S``
  (then the request is withdrawn).

Without ``etcdEndpoints`` these codes are not registered: the name server answers them as RocketMQ's name server
without a controller does, 3 REQUEST_CODE_NOT_SUPPORTED.

Every etcd operation is bounded (``ETCD_BUDGET_S`` in all, ``ETCD_TRY_S`` per endpoint: ``mqadmin`` gives up on a
request after 3 s), and a name server with etcd unreachable keeps serving routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import aetcd
import orjson

from sievemq.errors import RemotingError
from sievemq.ha.set_state import ReplicaInfo, SetState
from sievemq.protocol.names import group_problem
from sievemq.protocol.reasons import REASON_FIELD, Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import require_int, require_str
from sievemq.remoting.server import ProcessorTable
from sievemq.util.tasks import cancel_and_wait, spawn

__all__ = [
    "HANDOVER_TIMEOUT_S",
    "ControllerEtcd",
    "ControllerProcessor",
    "EtcdUnreachable",
    "Refusal",
    "SetRecord",
    "elect_body",
    "elect_header",
    "elect_refusal",
    "handover_outcome",
    "metadata_header",
    "parse_broker_names",
    "parse_sets",
    "replicas_info",
]

log = logging.getLogger(__name__)

HANDOVER_TIMEOUT_S = 15.0
"""How long electMaster waits for the master to hand over before it withdraws the request."""
HANDOVER_POLL_S = 0.25
"""How often electMaster reads the set while it waits."""
HANDOVER_LEASE_S = int(HANDOVER_TIMEOUT_S) + 10
"""The handover request's lease: it outlives the wait, and goes with a name server that died waiting."""
ETCD_BUDGET_S = 2.5
"""At most this long for one etcd operation, every endpoint tried included (``mqadmin`` waits 3 s per request)."""
ETCD_TRY_S = 1.0
"""At most this long on one endpoint before the next is tried."""
MAX_BROKER_NAMES = 1024
"""The most brokerNames one CONTROLLER_GET_SYNC_STATE_DATA may ask for."""
LOG_EVERY_S = 30.0
"""While etcd stays unreachable, one warning per this many seconds."""


class EtcdUnreachable(Exception):
    """No etcd endpoint answered within the budget (the message says which and why)."""


# ------------------------------------------------------------------------------------------------ pure: etcd's keys
@dataclass(frozen=True)
class SetRecord:
    """One broker set as read from etcd in one linearizable read."""

    cluster: str
    broker_name: str
    state: SetState | None
    revision: int
    """The state key's mod revision (0 without one)."""
    alive: Mapping[int, ReplicaInfo]
    handover: bytes | None = None
    """The pending handover request's value, as stored."""

    @property
    def handover_target(self) -> int | None:
        """The broker id the pending request names (None: none, or not readable)."""
        return _handover_target(self.handover)


def _handover_target(raw: bytes | None) -> int | None:
    if raw is None:
        return None
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    bid = doc.get("brokerId") if isinstance(doc, dict) else None
    return bid if isinstance(bid, int) and not isinstance(bid, bool) and bid > 0 else None


def parse_sets(root: str, rows: Iterable[tuple[bytes, bytes, int]]) -> dict[tuple[str, str], SetRecord]:
    """The sets under ``root`` from ``(key, value, mod_revision)`` rows: ``{(cluster, brokerName): SetRecord}``.
    Keys that are not a set's, and values that do not parse, are left out (logged)."""
    base = root.rstrip("/").encode() + b"/"
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for key, value, revision in rows:
        if not key.startswith(base):
            continue
        parts = key[len(base) :].split(b"/")
        if len(parts) < 3 or not parts[0] or not parts[1]:
            continue
        name = (parts[0].decode(errors="replace"), parts[1].decode(errors="replace"))
        rec = found.setdefault(name, {"state": None, "revision": 0, "alive": {}, "handover": None})
        rest = parts[2:]
        try:
            if rest == [b"state"]:
                rec["state"], rec["revision"] = SetState.from_json(value), revision
            elif rest == [b"handover"]:
                rec["handover"] = value
            elif len(rest) == 2 and rest[0] == b"brokers":
                info = ReplicaInfo.from_json(value)
                rec["alive"][info.broker_id] = info
        except ValueError as e:
            what = key.decode(errors="replace")
            log.error("etcd key %s holds something that is not sievemq's: %s (ignored)", what, e)
    return {name: SetRecord(name[0], name[1], r["state"], r["revision"], r["alive"], r["handover"])
            for name, r in found.items()}  # fmt: skip


# ------------------------------------------------------------------------------------------------ pure: bodies
def parse_broker_names(body: bytes) -> list[str]:
    """CONTROLLER_GET_SYNC_STATE_DATA's body: a JSON list of brokerNames (``RemotingError`` when it is not one)."""
    try:
        names = orjson.loads(body) if body else None
    except orjson.JSONDecodeError as e:
        raise RemotingError(ResponseCode.SYSTEM_ERROR, f"the body is not JSON: {e}", Reason.INVALID_HEADER) from None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        why = "the body must be a JSON list of brokerNames"
        raise RemotingError(ResponseCode.SYSTEM_ERROR, why, Reason.INVALID_HEADER)
    if len(names) > MAX_BROKER_NAMES:
        why = f"at most {MAX_BROKER_NAMES} brokerNames in one request, not {len(names)}"
        raise RemotingError(ResponseCode.SYSTEM_ERROR, why, Reason.INVALID_HEADER)
    return list(dict.fromkeys(names))


def _address(bid: int, state: SetState, alive: Mapping[int, ReplicaInfo]) -> str:
    info = alive.get(bid)
    if info is not None:
        return info.address
    return state.master_address if bid == state.master_id else ""


def _members(state: SetState, alive: Mapping[int, ReplicaInfo]) -> list[int]:
    return sorted(set(alive) | state.sync_state_set | {state.master_id})


def replicas_info(broker_name: str, state: SetState, alive: Mapping[int, ReplicaInfo]) -> dict[str, Any]:
    """A set's ``BrokerReplicasInfo.ReplicasInfo``: the master, the epochs, and each broker the set knows (live, or
    in the SyncStateSet) as a ``ReplicaIdentity`` in ``inSyncReplicas`` or ``notInSyncReplicas``."""
    in_sync: list[dict[str, Any]] = []
    not_in_sync: list[dict[str, Any]] = []
    for bid in _members(state, alive):
        replica = {"brokerName": broker_name, "brokerId": bid, "brokerAddress": _address(bid, state, alive),
                   "alive": bid in alive}  # fmt: skip
        (in_sync if bid in state.sync_state_set else not_in_sync).append(replica)
    return {
        "masterBrokerId": state.master_id,
        "masterAddress": state.master_address,
        "masterEpoch": state.master_epoch,
        "syncStateSetEpoch": state.sync_state_set_epoch,
        "inSyncReplicas": in_sync,
        "notInSyncReplicas": not_in_sync,
    }


def metadata_header(group: str, address: str) -> dict[str, str]:
    """GetMetaDataResponseHeader of a name server that is its own controller leader (no Raft peers: etcd is its
    log)."""
    return {"group": group, "controllerLeaderId": address, "controllerLeaderAddress": address, "isLeader": "true",
            "peers": ""}  # fmt: skip


def elect_header(state: SetState) -> dict[str, str]:
    """ElectMasterResponseHeader of ``state``."""
    return {"masterBrokerId": str(state.master_id), "masterAddress": state.master_address,
            "masterEpoch": str(state.master_epoch), "syncStateSetEpoch": str(state.sync_state_set_epoch)}  # fmt: skip


def elect_body(cluster: str, broker_name: str, state: SetState, alive: Mapping[int, ReplicaInfo]) -> dict[str, Any]:
    """CONTROLLER_ELECT_MASTER's body: RocketMQ's ``ElectMasterResponseBody`` (``brokerMemberGroup`` and the new
    ``syncStateSet``), with the member group's fields at the top level too (``mqadmin electMaster`` reads the body
    as a ``BrokerMemberGroup``; each reader ignores the other's fields)."""
    addrs = {str(bid): addr for bid in _members(state, alive) if (addr := _address(bid, state, alive))}
    group = {"cluster": cluster, "brokerName": broker_name, "brokerAddrs": addrs}
    return {"brokerMemberGroup": group, "syncStateSet": sorted(state.sync_state_set), **group}


@dataclass(frozen=True)
class Refusal:
    """Why an electMaster is refused: its response code, stable reason and remark."""

    code: int
    reason: Reason
    remark: str


def elect_refusal(rec: SetRecord, target: int) -> Refusal | None:
    """Whether broker ``target`` may be asked to become the set's master now (None: yes)."""
    st = rec.state
    where = f"{rec.broker_name} of cluster {rec.cluster}"
    if st is None:
        return Refusal(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, Reason.SET_NOT_FOUND,
                       f"etcd holds no state of broker set {where}: no broker of it ran under automatic failover "
                       "with this etcdRoot")  # fmt: skip
    failed = ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    if target == st.master_id and target in rec.alive:
        return Refusal(ResponseCode.CONTROLLER_MASTER_STILL_EXIST, Reason.ALREADY_MASTER,
                       f"broker {target} is the live master of {where} already (epoch {st.master_epoch})")  # fmt: skip
    if target not in rec.alive:
        why = f"broker {target} of {where} is not alive (no live key in etcd); live: {sorted(rec.alive)}"
        return Refusal(failed, Reason.HANDOVER_TARGET_NOT_ALIVE, why)
    if target not in st.sync_state_set:
        return Refusal(failed, Reason.HANDOVER_TARGET_NOT_IN_SYNC,
                       f"broker {target} of {where} is not in the SyncStateSet {sorted(st.sync_state_set)}: it lacks "
                       "acknowledged messages; ask again once it caught up")  # fmt: skip
    if st.master_id not in rec.alive:
        return Refusal(failed, Reason.HANDOVER_NO_LIVE_MASTER,
                       f"{where} has no live master to hand over (broker {st.master_id} of epoch {st.master_epoch} "
                       "is gone): its brokers elect one by themselves within seconds")  # fmt: skip
    pending = rec.handover_target
    if rec.handover is not None and pending != target:
        why = f"the master of {where} is handing over to broker {pending}, as asked before"
        return Refusal(failed, Reason.HANDOVER_PENDING, why)
    return None


def handover_outcome(old: SetState, target: int, rec: SetRecord) -> SetState | Refusal | None:
    """What a read of the set says of a handover to ``target`` asked of ``old``'s master: the new state once done,
    a refusal when it will not happen, None while it may still."""
    st = rec.state
    failed = ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    if st is None:
        why = f"the state of broker set {rec.broker_name} of cluster {rec.cluster} is gone from etcd"
        return Refusal(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, Reason.SET_NOT_FOUND, why)
    if st.master_epoch > old.master_epoch:
        if st.master_id == target:
            return st
        why = f"an election made broker {st.master_id} master of epoch {st.master_epoch} meanwhile"
        return Refusal(failed, Reason.HANDOVER_OVERTAKEN, why)
    if rec.handover_target != target:
        return Refusal(failed, Reason.HANDOVER_REFUSED,
                       f"the request was withdrawn without a handover to broker {target}: the master (broker "
                       f"{old.master_id}) refused it (broker {target} fell behind or left the SyncStateSet), or the "
                       "name server that wrote it gave up waiting")  # fmt: skip
    return None


# ------------------------------------------------------------------------------------------------ etcd
class ControllerEtcd:
    """The name server's etcd client: reads of the sets and the handover request's writes, each bounded."""

    def __init__(self, endpoints: list[str], root: str) -> None:
        if not endpoints:
            raise ValueError("no etcd endpoints")
        self.endpoints = endpoints
        self.root = root.rstrip("/")
        self._at = 0
        self._client: Any = None
        self._connecting = asyncio.Lock()
        self.last_error: str | None = None
        """Why the last operation failed (None once one succeeded)."""
        self._logged = 0.0

    def prefix(self, cluster: str, broker_name: str) -> bytes:
        """A set's key prefix."""
        return f"{self.root}/{cluster}/{broker_name}/".encode()

    async def _connected(self, at: int) -> Any:
        async with self._connecting:
            if self._client is None or self._at != at:
                await self._drop()
                self._at = at
                host, _, port = self.endpoints[at].rpartition(":")
                client = aetcd.Client(host=host, port=int(port), timeout=2)
                try:
                    await client.connect()
                except BaseException:
                    with contextlib.suppress(Exception):
                        await client.close()
                    raise
                self._client = client
            return self._client

    async def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 1.0)

    async def _call(self, what: str, op: Callable[[Any], Any]) -> Any:
        """Run ``op(client)`` on the current endpoint, then the next ones, within ``ETCD_BUDGET_S``."""
        deadline = time.monotonic() + ETCD_BUDGET_S
        why = "no endpoint tried"
        for i in range(len(self.endpoints)):
            left = deadline - time.monotonic()
            if left <= 0.05:
                break
            at = (self._at + (1 if i else 0)) % len(self.endpoints)
            try:
                async with asyncio.timeout(min(ETCD_TRY_S, left)):
                    result = await op(await self._connected(at))
                self.last_error = None
                return result
            except (aetcd.ClientError, OSError, TimeoutError, asyncio.CancelledError) as e:
                task = asyncio.current_task()
                if isinstance(e, asyncio.CancelledError) and task is not None and task.cancelling():
                    raise  # this request is cancelled; else gRPC cancelled the call: another closed the channel
                why = f"etcd {self.endpoints[at]}: {what} failed: {type(e).__name__}: {e}".rstrip(": ")
                now = time.monotonic()
                if self.last_error is None or now - self._logged >= LOG_EVERY_S:  # an outage is logged, not each try
                    log.warning("%s", why)
                    self._logged = now
                self.last_error = why
                async with self._connecting:
                    if self._at == at:
                        await self._drop()
        raise EtcdUnreachable(why)

    async def close(self) -> None:
        """Close the connection."""
        async with self._connecting:
            await self._drop()

    @staticmethod
    def _rows(result: Any) -> list[tuple[bytes, bytes, int]]:
        return [(bytes(kv.key), bytes(kv.value), int(kv.mod_revision)) for kv in result]

    async def sets(self) -> dict[tuple[str, str], SetRecord]:
        """Every set under the root, in one read."""
        base = self.root.encode() + b"/"
        result = await self._call("reading the sets", lambda c: c.get_prefix(base))
        return parse_sets(self.root, self._rows(result))

    async def read(self, cluster: str, broker_name: str) -> SetRecord:
        """One set (empty when etcd has none of its keys)."""
        prefix = self.prefix(cluster, broker_name)
        result = await self._call("reading the set", lambda c: c.get_prefix(prefix))
        found = parse_sets(self.root, self._rows(result)).get((cluster, broker_name))
        return found or SetRecord(cluster, broker_name, None, 0, {})

    async def request_handover(self, cluster: str, broker_name: str, revision: int, value: bytes) -> int | None:
        """Write the handover request if the state is still at ``revision`` and no request is pending; the id of
        the lease it is attached to, None when the transaction's comparisons failed (the lease is revoked)."""
        prefix = self.prefix(cluster, broker_name)
        state, handover = prefix + b"state", prefix + b"handover"
        lease = await self._call("granting the handover request's lease", lambda c: c.lease(HANDOVER_LEASE_S))
        lease_id = int(lease.id)

        async def op(c: Any) -> Any:
            compare = [c.transactions.mod(state) == revision, c.transactions.version(handover) == 0]
            return await c.transaction(compare=compare, success=[c.transactions.put(handover, value, lease=lease_id)],
                                       failure=[])  # fmt: skip

        try:
            ok, _ = await self._call("writing the handover request", op)
        except BaseException:
            await self.revoke(lease_id)
            raise
        if not ok:
            await self.revoke(lease_id)
            return None
        return lease_id

    async def revoke(self, lease_id: int) -> None:
        """Let a lease go (its key, if still attached, with it); etcd's expiry does it when this fails."""
        with contextlib.suppress(EtcdUnreachable):
            await self._call("revoking a lease", lambda c: c.revoke_lease(lease_id))


# ------------------------------------------------------------------------------------------------ the processor
class ControllerProcessor:
    """Answers 1002, 1005 and 1006 from etcd."""

    def __init__(
        self, etcd: ControllerEtcd, address: Callable[[], str], cluster_of: Callable[[str], str | None] | None = None
    ) -> None:
        """``address()``: the name server's own address, for a connection whose local address is unknown;
        ``cluster_of(brokerName)``: the cluster the name server's routes know for a broker name (1006 carries none;
        a name under two clusters in etcd is answered with that one)."""
        self.etcd = etcd
        self.address = address
        self.cluster_of = cluster_of or (lambda _name: None)
        self._tasks: set[asyncio.Task[Any]] = set()

    def register(self, table: ProcessorTable) -> None:
        """Put the controller codes into ``table``."""
        table.register(RequestCode.CONTROLLER_GET_METADATA_INFO, self.metadata)
        table.register(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, self.sync_state_data)
        table.register(RequestCode.CONTROLLER_ELECT_MASTER, self.elect_master)

    async def stop(self) -> None:
        """Stop waiting for handovers (their requests' leases expire) and close the etcd connection."""
        await cancel_and_wait(*self._tasks)
        await self.etcd.close()

    @staticmethod
    def _unreachable(e: EtcdUnreachable) -> RemotingError:
        return RemotingError(ResponseCode.SYSTEM_ERROR, f"the controller cannot reach etcd: {e}",
                             Reason.ETCD_UNAVAILABLE)  # fmt: skip

    @staticmethod
    def _refuse(
        cmd: RemotingCommand, r: Refusal, header: dict[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        return cmd.response(r.code, r.remark, {**(header or {}), REASON_FIELD: r.reason}, body)

    async def metadata(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """1005 CONTROLLER_GET_METADATA_INFO: this name server leads, at the address the request came to."""
        host, port = conn.local
        if port and host not in ("0.0.0.0", "::"):
            address = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
        else:
            address = self.address()
        return cmd.response(ResponseCode.SUCCESS, ext_fields=metadata_header(self.etcd.root, address))

    async def sync_state_data(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """1006 CONTROLLER_GET_SYNC_STATE_DATA: ``{"replicasInfoTable": {brokerName: ReplicasInfo}}``; names with
        no state in etcd are left out, as RocketMQ leaves out sets it does not know."""
        names = parse_broker_names(cmd.body)
        try:
            found = await self.etcd.sets() if names else {}
        except EtcdUnreachable as e:
            raise self._unreachable(e) from None
        by_name: dict[str, list[SetRecord]] = {}
        for (_cluster, name), rec in sorted(found.items()):
            if rec.state is not None:
                by_name.setdefault(name, []).append(rec)
        table: dict[str, Any] = {}
        for name in names:
            recs = by_name.get(name)
            if not recs:
                continue
            known = self.cluster_of(name)
            rec = next((r for r in recs if r.cluster == known), recs[0])
            assert rec.state is not None
            table[name] = replicas_info(name, rec.state, rec.alive)
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps({"replicasInfoTable": table}))

    async def elect_master(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """1002 CONTROLLER_ELECT_MASTER: ask the set's master to hand over to ``brokerId``; answer once it did."""
        f = cmd.ext_fields
        cluster, name = require_str(f, "clusterName"), require_str(f, "brokerName")
        for value, what in ((cluster, "cluster"), (name, "broker")):
            if (problem := group_problem(value, what)) is not None:
                raise RemotingError(ResponseCode.SYSTEM_ERROR, problem, Reason.INVALID_NAME)
        target = require_int(f, "brokerId")
        if target < 1:
            why = f"brokerId must be the id (> 0) of the broker to become master, not {target}"
            raise RemotingError(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, why, Reason.INVALID_HEADER)
        task = spawn(self._elect(cmd, cluster, name, target), self._tasks, name=f"elect-{cluster}-{name}-{target}")
        return await asyncio.shield(task)  # a requester that leaves does not stop the wait (nor its clean-up)

    async def _elect(self, cmd: RemotingCommand, cluster: str, name: str, target: int) -> RemotingCommand:
        try:
            for _ in range(3):  # the state moved between the read and the write: decide again
                rec = await self.etcd.read(cluster, name)
                refusal = elect_refusal(rec, target)
                if refusal is not None:
                    if refusal.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST and rec.state is not None:
                        body = orjson.dumps({"syncStateSet": sorted(rec.state.sync_state_set)})
                        return self._refuse(cmd, refusal, elect_header(rec.state), body)
                    return self._refuse(cmd, refusal)
                assert rec.state is not None
                if rec.handover is not None:  # the same request is pending (asked again): wait with it
                    return await self._wait(cmd, rec.state, rec, target, None)
                value = orjson.dumps({"brokerId": target, "requestedAt": int(time.time() * 1000)})
                lease = await self.etcd.request_handover(cluster, name, rec.revision, value)
                if lease is not None:
                    log.warning("electMaster: asked the master (broker %d) of %s/%s to hand over to broker %d",
                                rec.state.master_id, cluster, name, target)  # fmt: skip
                    return await self._wait(cmd, rec.state, rec, target, lease)
            why = f"the state of {name} of cluster {cluster}, or a request pending, kept changing; ask again"
            return self._refuse(cmd, Refusal(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, Reason.HANDOVER_PENDING, why))
        except EtcdUnreachable as e:
            err = self._unreachable(e)
            return cmd.response(err.code, err.remark, {REASON_FIELD: err.reason})

    async def _wait(self, cmd: RemotingCommand, old: SetState, rec: SetRecord, target: int,
                    lease: int | None) -> RemotingCommand:  # fmt: skip
        """Poll the set until the handover is done or will not be; withdraw the request (``lease``: ours) at the end
        unless the master took it. A request of another electMaster (``lease`` None) is waited for until it is gone:
        its writer withdraws it in time, or its lease expires."""
        limit = HANDOVER_TIMEOUT_S if lease is not None else HANDOVER_LEASE_S
        deadline = time.monotonic() + limit
        unreachable: EtcdUnreachable | None = None
        try:
            while time.monotonic() < deadline:
                await asyncio.sleep(HANDOVER_POLL_S)
                try:
                    rec = await self.etcd.read(rec.cluster, rec.broker_name)
                except EtcdUnreachable as e:
                    unreachable = e
                    continue
                unreachable = None
                outcome = handover_outcome(old, target, rec)
                if isinstance(outcome, SetState):
                    log.warning("electMaster: broker %d is the master of %s/%s, epoch %d", target, rec.cluster,
                                rec.broker_name, outcome.master_epoch)  # fmt: skip
                    body = elect_body(rec.cluster, rec.broker_name, outcome, rec.alive)
                    return cmd.response(ResponseCode.SUCCESS, ext_fields=elect_header(outcome), body=orjson.dumps(body))
                if outcome is not None:
                    return self._refuse(cmd, outcome)
            why = (f"the master (broker {old.master_id}) did not hand over to broker {target} within "
                   f"{limit:g}s; the request is withdrawn")  # fmt: skip
            if unreachable is not None:
                why += f" (etcd: {unreachable})"
            return self._refuse(cmd, Refusal(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, Reason.HANDOVER_TIMEOUT, why))
        finally:
            if lease is not None:  # the request goes with its lease (a no-op once the master deleted it)
                await asyncio.shield(self.etcd.revoke(lease))
