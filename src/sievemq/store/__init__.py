"""The durable store: commit log, consume queues, key index, checkpoint, recovery, retention.

Public API is ``MessageStore`` (``message_store.py``) with its settings (``config.py``), results
(``results.py``) and the filter it applies to pulls (``filtering.py``); the consume-queue extension's unit
and probe types (``consume_queue_ext.py``), the delay-level table (``delay_levels.py``) and crash-safe
JSON files (``jsonfile.py``).
"""

from sievemq.protocol.delay_levels import SCHEDULE_TOPIC, parse_levels
from sievemq.store.config import StoreConfig
from sievemq.store.consume_queue_ext import BitmapProbe, CqExtUnit, is_ext_address
from sievemq.store.dispatch import BitmapCalculator, DispatchListener
from sievemq.store.filtering import AcceptingFilter, MessageFilter
from sievemq.store.jsonfile import atomic_write_json, read_json
from sievemq.store.message_store import MessageStore
from sievemq.store.results import GetResult, GetStatus, PutResult, PutStatus, StoreError

__all__ = [
    "SCHEDULE_TOPIC",
    "AcceptingFilter",
    "BitmapCalculator",
    "BitmapProbe",
    "CqExtUnit",
    "DispatchListener",
    "GetResult",
    "GetStatus",
    "MessageFilter",
    "MessageStore",
    "PutResult",
    "PutStatus",
    "StoreConfig",
    "StoreError",
    "atomic_write_json",
    "is_ext_address",
    "parse_levels",
    "read_json",
]
