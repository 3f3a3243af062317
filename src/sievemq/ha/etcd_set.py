"""One broker's connection to its set's keys in etcd: its lease, its liveness key, reads and transactions (doing;
``election.py`` decides). docs/failover.md §2.

The client (``aetcd``) talks to one endpoint at a time; an operation that fails or takes longer than ``op_timeout``
moves to the next endpoint and raises ``EtcdUnavailable`` (the caller tries again at its next round). Reads are
linearizable (a member cut off from its cluster's majority answers none). Every change of the ``state`` key is a
transaction that compares the revision the decision was made on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import aetcd

from sievemq.ha.fencing import LeaseClock
from sievemq.ha.set_state import ReplicaInfo, SetState, SetView, handover_target

__all__ = ["EtcdSet", "EtcdUnavailable", "set_prefix"]

log = logging.getLogger(__name__)


class EtcdUnavailable(Exception):
    """No etcd endpoint answered in time (the message says which and why)."""


def set_prefix(root: str, cluster: str, broker_name: str) -> str:
    """The key prefix of one broker set (``<root>/<cluster>/<brokerName>/``)."""
    return f"{root.rstrip('/')}/{cluster}/{broker_name}/"


class EtcdSet:
    """The keys of one broker set, as broker ``broker_id`` sees and changes them."""

    def __init__(
        self, endpoints: list[str], prefix: str, broker_id: int, clock: LeaseClock, *, op_timeout: float = 2.0
    ) -> None:
        """``clock`` is kept up to date with this broker's lease (granted, renewed, lost)."""
        if not endpoints:
            raise ValueError("no etcd endpoints")
        self.endpoints = endpoints
        self.prefix = prefix.encode()
        self.broker_id = broker_id
        self.clock = clock
        self.op_timeout = op_timeout
        self._at = 0
        self._client: Any = None
        self._lease: Any = None
        self._closing: set[asyncio.Task[None]] = set()
        self.last_error: str | None = None

    # ------------------------------------------------------------------------------------------ keys
    @property
    def state_key(self) -> bytes:
        """The set's state."""
        return self.prefix + b"state"

    @property
    def handover_key(self) -> bytes:
        """An operator's request that the master hand over to another broker (``mqadmin electMaster``)."""
        return self.prefix + b"handover"

    @property
    def lease_id(self) -> int | None:
        """This broker's lease (None before one is granted)."""
        return int(self._lease.id) if self._lease is not None else None

    def broker_key(self, broker_id: int) -> bytes:
        """A broker's liveness key."""
        return self.prefix + b"brokers/%d" % broker_id

    # ------------------------------------------------------------------------------------------ plumbing
    async def _connected(self) -> Any:
        if self._client is None:
            host, _, port = self.endpoints[self._at].rpartition(":")
            client = aetcd.Client(host=host, port=int(port), timeout=max(1, round(self.op_timeout)))
            await asyncio.wait_for(client.connect(), self.op_timeout)
            self._client = client
        return self._client

    async def _call(self, what: str, op: Any) -> Any:
        """Run ``op(client)``; on failure move to the next endpoint and raise ``EtcdUnavailable``."""
        endpoint = self.endpoints[self._at]
        client = None
        try:
            async with asyncio.timeout(self.op_timeout):
                client = await self._connected()
                return await op(client)
        except (Exception, asyncio.CancelledError) as e:  # any failure of the client is etcd's ...
            task = asyncio.current_task()
            if isinstance(e, asyncio.CancelledError) and task is not None and task.cancelling():
                raise  # ... but this task being cancelled (gRPC cancels calls on a closed channel, too)
            why = f"etcd {endpoint}: {what} failed: {type(e).__name__}: {e}".rstrip(": ")
            if why != self.last_error:
                log.warning("%s", why)
            self.last_error = why
            if client is None or client is self._client:  # not one another task replaced already
                self._retire_client()
                self._at = (self._at + 1) % len(self.endpoints)
            raise EtcdUnavailable(why) from None

    def _retire_client(self) -> None:
        """Stop using the client; close it once calls other tasks have in flight on it are over (closing a channel
        cancels them)."""
        client, self._client = self._client, None
        if client is not None:
            task = asyncio.get_running_loop().create_task(self._close_later(client))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def _close_later(self, client: Any) -> None:
        await asyncio.sleep(self.op_timeout + 0.5)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.close(), 1.0)

    async def _drop_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 1.0)

    async def close(self, *, revoke: bool) -> None:
        """Close the connection; ``revoke``: let the lease go now (a clean stop: the set elects without waiting)."""
        if revoke and self._lease is not None:
            lease_id = self._lease.id
            with contextlib.suppress(EtcdUnavailable):
                await self._call("revoking the lease", lambda c: c.revoke_lease(lease_id))
            self.clock.lost()
        self._lease = None
        await self._drop_client()
        for task in list(self._closing):
            task.cancel()

    # ------------------------------------------------------------------------------------------ lease
    async def keep_alive(self) -> bool:
        """Renew this broker's lease (granting a new one when there is none or it expired); True when renewed
        (``clock`` then counts from the moment this call started). A new lease has no keys: publish again."""
        sent = time.monotonic()
        if self._lease is not None:
            lease_id = self._lease.id
            reply = await self._call("renewing the lease", lambda c: c.refresh_lease(lease_id))
            if reply is not None and int(reply.TTL) > 0:
                self.clock.renewed(sent)
                return True
            log.warning("etcd: this broker's lease %x expired", lease_id)
            self.clock.lost()
            self._lease = None
        ttl = max(1, round(self.clock.ttl))
        self._lease = await self._call("granting a lease", lambda c: c.lease(ttl))
        self.clock.renewed(sent)
        return False

    @property
    def has_lease(self) -> bool:
        """True once a lease was granted (and not known lost)."""
        return self._lease is not None

    async def publish(self, info: ReplicaInfo) -> None:
        """Write this broker's liveness key, attached to its lease."""
        lease = self._lease
        if lease is None:
            raise EtcdUnavailable("no lease yet")
        key, value = self.broker_key(info.broker_id), info.to_json()
        await self._call("publishing this broker", lambda c: c.put(key, value, lease=lease))

    # ------------------------------------------------------------------------------------------ reads
    async def view(self) -> SetView:
        """The set's state and live brokers, in one linearizable read."""
        result = await self._call("reading the set", lambda c: c.get_prefix(self.prefix))
        state: SetState | None = None
        revision = 0
        alive: dict[int, ReplicaInfo] = {}
        leases: dict[int, int] = {}
        handover: int | None = None
        brokers = self.prefix + b"brokers/"
        for kv in result:
            key = bytes(kv.key)
            try:
                if key == self.state_key:
                    state = SetState.from_json(bytes(kv.value))
                    revision = int(kv.mod_revision)
                elif key == self.handover_key:
                    handover = handover_target(bytes(kv.value))
                elif key.startswith(brokers):
                    info = ReplicaInfo.from_json(bytes(kv.value))
                    alive[info.broker_id] = info
                    leases[info.broker_id] = int(kv.lease)
            except ValueError as e:
                name = key.decode(errors="replace")
                log.error("etcd key %s holds something that is not sievemq's: %s (ignored)", name, e)
        return SetView(state, revision, alive, leases, handover)

    # ------------------------------------------------------------------------------------------ transactions
    async def _txn(self, what: str, compare: list[Any], put: SetState, me: ReplicaInfo | None = None) -> bool:
        key, value = self.state_key, put.to_json()
        lease = self._lease

        async def op(c: Any) -> Any:
            success = [c.transactions.put(key, value)]
            if me is not None:
                success.append(c.transactions.put(self.broker_key(me.broker_id), me.to_json(), lease=lease))
            return await c.transaction(compare=compare, success=success, failure=[])

        ok, _ = await self._call(what, op)
        return bool(ok)

    async def bootstrap(self, state: SetState) -> bool:
        """Create the set's first state, unless someone did; and only while this broker's key is live."""
        c = await self._client_for_compare()
        return await self._txn("creating the set's state", [
            c.transactions.version(self.state_key) == 0,
            c.transactions.version(self.broker_key(self.broker_id)) > 0,
        ], state)  # fmt: skip

    async def elect(self, state: SetState, seen_revision: int, old_master: int, me: ReplicaInfo) -> bool:
        """Write ``state`` (this broker master of a new epoch) and this broker's key, if the state is still at
        ``seen_revision`` and the old master's key is gone; unless this broker is the old master (restarted: its key
        must be gone too), its own key must still be live."""
        if self._lease is None:
            raise EtcdUnavailable("no lease yet")
        c = await self._client_for_compare()
        compare = [c.transactions.mod(self.state_key) == seen_revision,
                   c.transactions.version(self.broker_key(old_master)) == 0]  # fmt: skip
        if old_master != self.broker_id:
            compare.append(c.transactions.version(self.broker_key(self.broker_id)) > 0)
        return await self._txn("electing a master", compare, state, me)

    async def alter(self, state: SetState, seen_revision: int) -> bool:
        """The master changes its SyncStateSet: written if the state is still at ``seen_revision`` and this
        broker's key is still live."""
        c = await self._client_for_compare()
        return await self._txn("changing the SyncStateSet", [
            c.transactions.mod(self.state_key) == seen_revision,
            c.transactions.version(self.broker_key(self.broker_id)) > 0,
        ], state)  # fmt: skip

    async def hand_over(self, state: SetState, seen_revision: int) -> bool:
        """The master writes ``state`` (the handover's target master of the next epoch) and clears the request, if
        the state is still at ``seen_revision`` and the target's key is live."""
        key, value, handover = self.state_key, state.to_json(), self.handover_key

        async def op(c: Any) -> Any:
            return await c.transaction(compare=[
                c.transactions.mod(key) == seen_revision,
                c.transactions.version(self.broker_key(state.master_id)) > 0,
            ], success=[c.transactions.put(key, value), c.transactions.delete(handover)], failure=[])  # fmt: skip

        ok, _ = await self._call("handing over", op)
        return bool(ok)

    async def drop_handover(self) -> None:
        """Clear an operator's handover request (done, or refused)."""
        handover = self.handover_key
        await self._call("clearing the handover request", lambda c: c.delete(handover))

    async def _client_for_compare(self) -> Any:
        try:
            return await self._connected()
        except (aetcd.ClientError, OSError, TimeoutError) as e:
            self._retire_client()
            self._at = (self._at + 1) % len(self.endpoints)
            raise EtcdUnavailable(f"etcd {self.endpoints[self._at]}: {e}") from None
