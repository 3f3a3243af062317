"""What ``PushConsumer.function_status()`` reports of a group's filter functions: per topic the function, the filter
servers holding its current registration, and the latest problem (cleared once a pull through a filter server
succeeds). A topic's "no filter server could run the function" error is logged at once, then at most every
``ERROR_LOG_INTERVAL`` seconds with the count of those not logged; its recovery is logged once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sievemq.client.message import FilterFunction
from sievemq.client.subscription import SubscriptionEntry

__all__ = ["ERROR_LOG_INTERVAL", "FunctionStatus", "StatusBoard", "function_of"]

log = logging.getLogger("sievemq.client.filter_functions")  # the filter functions' records, as before the split

ERROR_LOG_INTERVAL = 10.0
"""A topic's "no filter server could run the function" error is logged at once, then at most this often."""


@dataclass
class FunctionStatus:
    """One topic's filter function as ``PushConsumer.function_status()`` reports it."""

    topic: str
    function: str
    """``module:function`` or the uploaded function's name."""
    kind: str
    """``named`` or ``source``."""
    crc: int
    filter_servers: list[str] = field(default_factory=list)
    """Filter servers holding the current registration (sorted)."""
    last_error: str | None = None
    """The latest problem (no filter server, refusal, function failure); None again once a pull succeeds."""
    last_error_time: float | None = None
    """When ``last_error`` happened (``time.time()``); kept after the error clears."""
    errors: int = 0
    """Problems counted so far."""


def function_of(entry: SubscriptionEntry) -> FilterFunction:
    """The filter function of a function subscription (ValueError for another)."""
    fn = entry.selector.filter_function
    if fn is None:
        raise ValueError(f"the subscription of {entry.topic} is not a filter function")
    return fn


class StatusBoard:
    """The ``FunctionStatus`` of each topic of one group, and when its unavailability was last logged."""

    def __init__(self) -> None:
        self._status: dict[str, FunctionStatus] = {}
        self._logged: dict[str, tuple[float, int]] = {}
        """Topic -> when its unavailability was last logged, and how many errors were not logged since."""

    def of(self, entry: SubscriptionEntry) -> FunctionStatus:
        """The status of ``entry``'s function (a fresh one when the function changed)."""
        fn = function_of(entry)
        st = self._status.get(entry.topic)
        if st is None or st.function != fn.name or st.crc != fn.crc:
            st = FunctionStatus(entry.topic, fn.name, fn.kind, fn.crc)
            self._status[entry.topic] = st
        return st

    def keep_only(self, topics: Iterable[str]) -> None:
        """Forget the topics not among ``topics`` (no longer subscribed with a function)."""
        keep = set(topics)
        for topic in [t for t in self._status if t not in keep]:
            del self._status[topic]

    def report(self, accepted: Mapping[tuple[str, str], int]) -> dict[str, FunctionStatus]:
        """Topic -> the state of its filter function (copies); ``accepted``: (topic, filter server) -> the classCRC
        the server accepted."""
        out = {}
        for topic, st in self._status.items():
            servers = sorted(s for (t, s), crc in accepted.items() if t == topic and crc == st.crc)
            out[topic] = FunctionStatus(
                st.topic, st.function, st.kind, st.crc, servers, st.last_error, st.last_error_time, st.errors
            )
        return out

    def error(self, entry: SubscriptionEntry, text: str) -> None:
        """A problem of ``entry``'s function (counted; the latest one)."""
        st = self.of(entry)
        st.last_error = text
        st.last_error_time = time.time()
        st.errors += 1

    def unavailable(self, entry: SubscriptionEntry, text: str) -> None:
        """No filter server could run ``entry``'s function: counted, and logged at once, then at most every
        ``ERROR_LOG_INTERVAL`` seconds."""
        self.error(entry, text)
        now = time.monotonic()
        last, unlogged = self._logged.get(entry.topic, (float("-inf"), 0))
        if now - last >= ERROR_LOG_INTERVAL:
            more = f" ({unlogged} more such errors of this topic since the last report)" if unlogged else ""
            log.error("%s%s", text, more)
            self._logged[entry.topic] = (now, 0)
        else:
            self._logged[entry.topic] = (last, unlogged + 1)

    def cleared(self, entry: SubscriptionEntry) -> bool:
        """A pull of ``entry``'s topic succeeded: its error clears; True when the topic was logged as unavailable
        (its recovery is worth a line)."""
        st = self.of(entry)
        if st.last_error is None:
            return False
        st.last_error = None
        return self._logged.pop(entry.topic, None) is not None
