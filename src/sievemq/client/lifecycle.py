"""Starting and closing producers and consumers: the steps they share, in one place.

``start()``: a running client starts once (another call does nothing), a closed one never again
(``ClientStateError``). It joins the ``ClientInstance`` of its config (one producer or consumer per group and
instance, else ``ClientStateError``), starts the instance's periodic work, fetches the routes of its topics and
sends the first heartbeats; a sievemq broker answers with the subscriptions it refuses (a consumer raises
``SubscriptionError`` unless it stands by). A consumer whose start fails part way through is closed again.
``close()``: only a running client has anything to undo; it leaves with UNREGISTER_CLIENT to every broker, and the
instance loses a user (the last one closes it).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import ClassVar, Self

from sievemq.client.errors import ClientStateError, SubscriptionError
from sievemq.client.instance import ClientConfig, ClientInstance
from sievemq.client.subscription import refusals_for
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import ResponseCode


class ClientLifecycle:
    """The state of a producer or consumer (``new``, ``running``, ``closing``, ``closed``) and its instance."""

    _kind: ClassVar[str] = "client"
    """What the client is called in state errors ("producer", "consumer")."""
    _state: str
    _instance: ClientInstance | None

    async def start(self) -> None:
        """Connect and join (each client says how)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Leave and disconnect (each client says how)."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _startable(self) -> bool:
        """False when the client already runs (start() has nothing to do); ClientStateError once it was closed."""
        if self._state == "running":
            return False
        if self._state != "new":
            raise ClientStateError(f"this {self._kind} was closed; create a new one")
        return True

    def _closable(self) -> bool:
        """True for a running client; any other is marked closed at once (close() has nothing to undo)."""
        if self._state != "running":
            self._state = "closed"
            return False
        return True

    @property
    def instance(self) -> ClientInstance:
        """The started client's instance (its routes, connections and brokers), for the layers built on a client
        (the gRPC proxy); ClientStateError when the client is not started."""
        return self._running()

    def _running(self) -> ClientInstance:
        """The instance of a started client (ClientStateError otherwise)."""
        if self._state != "running" or self._instance is None:
            raise ClientStateError(f"the {self._kind} is not started (call start() or use 'async with')")
        return self._instance

    @contextlib.asynccontextmanager
    async def _closed_on_failure(self) -> AsyncIterator[None]:
        """Start steps after which a failure (or cancellation) closes the client again before it propagates."""
        try:
            yield
        except BaseException:
            await self.close()
            raise


async def join(config: ClientConfig, register: Callable[[ClientInstance], None]) -> ClientInstance:
    """One more user of the instance of ``config``, registered by ``register`` (``register_producer`` or
    ``register_consumer``); a group the instance already serves: ClientStateError, the instance released."""
    inst = ClientInstance.acquire(config)
    try:
        register(inst)
    except ValueError as e:
        await inst.release()
        raise ClientStateError(str(e)) from None
    return inst


async def go_live(
    inst: ClientInstance, group: str, topics: Iterable[str], check: Callable[[], Awaitable[None]] | None = None
) -> list[str]:
    """Start the instance's periodic work, fetch the route of each topic, run ``check`` (a consumer's
    CHECK_CLIENT_CONFIG; its failure is raised before any heartbeat named ``group``) and send the first heartbeats;
    the remarks of ``group``'s subscriptions they refused (the caller tells them: raised, or logged once)."""
    await inst.start()
    for topic in topics:
        await inst.update_route(topic)
    if check is not None:
        await check()
    inst.heartbeats.announced.add(group)
    refused = [r for r in await inst.heartbeat_all() if r.group == group]
    inst.told_refusals(refused)  # the caller raises or logs them: the heartbeat tick does not say them again
    return refusals_for(group, refused)


def refused_error(refused: list[str]) -> SubscriptionError:
    """The error of a start whose subscriptions the brokers refused (inconsistent with the group's)."""
    return SubscriptionError(ResponseCode.SUBSCRIPTION_NOT_EXIST, "\n".join(refused), Reason.SUBSCRIPTION_INCONSISTENT)


async def leave(inst: ClientInstance, *, producer_group: str | None = None, consumer_group: str | None = None) -> None:
    """UNREGISTER_CLIENT of the group to every broker, then one user fewer for the instance."""
    await inst.unregister(producer_group=producer_group, consumer_group=consumer_group)
    await inst.release()
