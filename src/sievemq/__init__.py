"""sievemq: a message queue on Apache RocketMQ's architecture and 4.x wire protocol.

The client API (asyncio; blocking versions in ``sievemq.sync``)::

    from sievemq import Message, Producer, PushConsumer, ConsumeResult

    async with Producer(namesrv="127.0.0.1:9876", group="orders-p") as p:
        await p.send(Message("orders", b"...", tags="TagA"))
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sievemq.version import __version__

if TYPE_CHECKING:
    from sievemq.client.errors import (
        ClientError,
        ClientStateError,
        MessageValidationError,
        NoRouteError,
        SubscriptionError,
    )
    from sievemq.client.message import (
        ConsumeFrom,
        ConsumeResult,
        Message,
        MessageQueue,
        Selector,
        SendResult,
        SendStatus,
    )
    from sievemq.client.options import ClientOptions, ConsumeOptions
    from sievemq.client.producer import Producer
    from sievemq.client.pull_consumer import PullConsumer
    from sievemq.client.push_consumer import PushConsumer
    from sievemq.client.transaction_producer import TransactionProducer, TransactionSendResult, TransactionState
    from sievemq.errors import (
        ConfigError,
        ConnectionClosedError,
        FrameError,
        RemotingError,
        RequestTimeoutError,
        SieveError,
    )
    from sievemq.protocol.message import MessageExt

_PUBLIC = {
    "ClientError": "sievemq.client.errors",
    "ClientOptions": "sievemq.client.options",
    "ClientStateError": "sievemq.client.errors",
    "ConfigError": "sievemq.errors",
    "ConnectionClosedError": "sievemq.errors",
    "ConsumeFrom": "sievemq.client.message",
    "ConsumeOptions": "sievemq.client.options",
    "ConsumeResult": "sievemq.client.message",
    "FrameError": "sievemq.errors",
    "Message": "sievemq.client.message",
    "MessageExt": "sievemq.protocol.message",
    "MessageQueue": "sievemq.client.message",
    "MessageValidationError": "sievemq.client.errors",
    "NoRouteError": "sievemq.client.errors",
    "Producer": "sievemq.client.producer",
    "PullConsumer": "sievemq.client.pull_consumer",
    "PushConsumer": "sievemq.client.push_consumer",
    "RemotingError": "sievemq.errors",
    "RequestTimeoutError": "sievemq.errors",
    "Selector": "sievemq.client.message",
    "SendResult": "sievemq.client.message",
    "SendStatus": "sievemq.client.message",
    "SieveError": "sievemq.errors",
    "SubscriptionError": "sievemq.client.errors",
    "TransactionProducer": "sievemq.client.transaction_producer",
    "TransactionSendResult": "sievemq.client.transaction_producer",
    "TransactionState": "sievemq.client.transaction_producer",
}
"""Each public name and the module that defines it: imported on first use, so that a server process, which imports
``sievemq.broker`` (and with it this package), does not load the client."""


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'sievemq' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

__all__ = [
    "ClientError",
    "ClientOptions",
    "ClientStateError",
    "ConfigError",
    "ConnectionClosedError",
    "ConsumeFrom",
    "ConsumeOptions",
    "ConsumeResult",
    "FrameError",
    "Message",
    "MessageExt",
    "MessageQueue",
    "MessageValidationError",
    "NoRouteError",
    "Producer",
    "PullConsumer",
    "PushConsumer",
    "RemotingError",
    "RequestTimeoutError",
    "Selector",
    "SendResult",
    "SendStatus",
    "SieveError",
    "SubscriptionError",
    "TransactionProducer",
    "TransactionSendResult",
    "TransactionState",
    "__version__",
]
