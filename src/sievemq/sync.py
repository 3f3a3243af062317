"""Blocking facade for scripts: the asyncio clients driven from an event loop in a background thread.

::

    from sievemq import Message
    from sievemq.sync import Producer

    with Producer(namesrv="127.0.0.1:9876", group="orders-p") as p:
        print(p.send(Message("orders", b"hello")).msg_id)

The clients take the same arguments as the asyncio ones, ``ClientOptions`` and ``ConsumeOptions`` included
(both importable from here too). Every object of this module shares one daemon thread running one event loop.
Listeners of a ``sievemq.sync.PushConsumer`` that are plain functions run in the consumer's thread pool.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from sievemq.client import producer as _producer
from sievemq.client import pull_consumer as _pull
from sievemq.client import push_consumer as _push
from sievemq.client.filter_functions import FunctionStatus
from sievemq.client.message import Message, MessageQueue, Selector, SendResult
from sievemq.client.options import ClientOptions, ConsumeOptions
from sievemq.protocol.message import MessageExt

__all__ = ["ClientOptions", "ConsumeOptions", "Producer", "PullConsumer", "PushConsumer", "run"]

T = TypeVar("T")
L = TypeVar("L", bound=Callable[[list[MessageExt]], Any])


class _LoopThread:
    """One event loop in a daemon thread."""

    _lock = threading.Lock()
    _current: _LoopThread | None = None

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="sievemq-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @classmethod
    def get(cls) -> _LoopThread:
        with cls._lock:
            if cls._current is None or not cls._current.thread.is_alive():
                cls._current = cls()
            return cls._current


def _submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    lt = _LoopThread.get()
    if threading.current_thread() is lt.thread:
        coro.close()
        raise RuntimeError("sievemq.sync calls cannot be made from the sievemq event loop thread (use the async API)")
    return asyncio.run_coroutine_threadsafe(coro, lt.loop)


def run(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run a coroutine on the background loop and wait for its result."""
    return _submit(coro).result(timeout)


def _call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    async def go() -> T:
        return fn(*args, **kwargs)

    return run(go())


class Producer:
    """Blocking ``sievemq.Producer``; same arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._p = _producer.Producer(*args, **kwargs)

    @property
    def client_id(self) -> str:
        """``ip@instanceName``."""
        return self._p.client_id

    @property
    def options(self) -> ClientOptions:
        """How the producer connects (give it to other clients: ``options=producer.options``)."""
        return self._p.options

    def start(self) -> Producer:
        """Connect (blocking)."""
        run(self._p.start())
        return self

    def close(self) -> None:
        """Flush pending one-way sends and disconnect."""
        run(self._p.close())

    def __enter__(self) -> Producer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, msg: Message, **kwargs: Any) -> SendResult:
        """Send and wait for the broker's answer (see ``sievemq.Producer.send``)."""
        return run(self._p.send(msg, **kwargs))

    def send_batch(self, msgs: Sequence[Message], **kwargs: Any) -> SendResult:
        """Send a batch of one topic."""
        return run(self._p.send_batch(msgs, **kwargs))

    def send_async(self, msg: Message, **kwargs: Any) -> concurrent.futures.Future[SendResult]:
        """Start a send; the returned future completes with the SendResult."""
        return _submit(self._p.send(msg, **kwargs))

    def send_oneway(self, msg: Message, **kwargs: Any) -> None:
        """Send without an answer."""
        _call(self._p.send_oneway, msg, **kwargs)


class PushConsumer:
    """Blocking ``sievemq.PushConsumer``; same arguments. The listener runs in a thread pool (or the loop if async)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._c = _push.PushConsumer(*args, **kwargs)

    @property
    def client_id(self) -> str:
        """``ip@instanceName``."""
        return self._c.client_id

    @property
    def options(self) -> ClientOptions:
        """How the consumer connects."""
        return self._c.options

    @property
    def consume_options(self) -> ConsumeOptions:
        """How the consumer consumes."""
        return self._c.consume_options

    def subscribe(self, topic: str, expression: Selector | str | None = "*") -> None:
        """Subscribe a topic (see ``sievemq.PushConsumer.subscribe``)."""
        _call(self._c.subscribe, topic, expression)

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming a topic."""
        _call(self._c.unsubscribe, topic)

    def listener(self, fn: L) -> L:
        """Register the listener (decorator)."""
        return self._c.listener(fn)

    def assignment(self) -> set[MessageQueue]:
        """Queues processed now."""
        return _call(self._c.assignment)

    def function_status(self) -> dict[str, FunctionStatus]:
        """Topic -> the state of its filter function (see ``sievemq.PushConsumer.function_status``)."""
        return _call(self._c.function_status)

    def start(self) -> PushConsumer:
        """Join the group and start consuming (blocking until started)."""
        run(self._c.start())
        return self

    def close(self) -> None:
        """Stop, persist offsets, leave the group."""
        run(self._c.close())

    def __enter__(self) -> PushConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class PullConsumer:
    """Blocking ``sievemq.PullConsumer``; same arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._c = _pull.PullConsumer(*args, **kwargs)

    @property
    def options(self) -> ClientOptions:
        """How the consumer connects."""
        return self._c.options

    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        """Consume exactly these queues."""
        _call(self._c.assign, list(mqs))

    def subscribe(self, topic: str, expression: Selector | str | None = "*") -> None:
        """Consume a topic as a member of the group."""
        _call(self._c.subscribe, topic, expression)

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """Readable queues of a topic."""
        return run(self._c.fetch_queues(topic))

    def assignment(self) -> set[MessageQueue]:
        """Queues fetched now."""
        return _call(self._c.assignment)

    def start(self) -> PullConsumer:
        """Start fetching."""
        run(self._c.start())
        return self

    def close(self) -> None:
        """Stop fetching."""
        run(self._c.close())

    def __enter__(self) -> PullConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[MessageExt]:
        """Wait up to ``timeout`` seconds for messages."""
        return run(self._c.poll(timeout, max_records))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """Move a queue's position."""
        _call(self._c.seek, mq, offset)

    def position(self, mq: MessageQueue) -> int:
        """Next offset handed out for a queue."""
        return _call(self._c.position, mq)

    def committed(self, mq: MessageQueue) -> int:
        """The broker's stored offset (-1 when none)."""
        return run(self._c.committed(mq))

    def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Store positions on the brokers."""
        run(self._c.commit(offsets))
