"""sievemq: a message queue on Apache RocketMQ's architecture and 4.x wire protocol.

The client API (asyncio; blocking versions in ``sievemq.sync``)::

    from sievemq import Message, Producer, PushConsumer, ConsumeResult

    async with Producer(namesrv="127.0.0.1:9876", group="orders-p") as p:
        await p.send(Message("orders", b"...", tags="TagA"))
"""

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

__version__ = "0.1.0"

__all__ = [
    "ClientError",
    "ClientStateError",
    "ConfigError",
    "ConnectionClosedError",
    "ConsumeFrom",
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
