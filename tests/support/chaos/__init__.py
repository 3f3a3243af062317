"""A chaos workload's history and the checker that judges it (Jepsen-style): record every send attempt and its
outcome, every delivery, every injected fault and the final read of the stores, then ``check`` the history."""

from tests.support.chaos.checker import (
    DEFINITE_FAILURE_CODES,
    FINAL_READ,
    Lost,
    OrderViolation,
    Recovery,
    SplitBrain,
    Verdict,
    check,
    percentile,
)
from tests.support.chaos.history import (
    Delivered,
    Event,
    Fault,
    FinalRead,
    History,
    SendAttempt,
    SendFailed,
    SendOk,
    Stored,
)

__all__ = [
    "DEFINITE_FAILURE_CODES",
    "FINAL_READ",
    "Delivered",
    "Event",
    "Fault",
    "FinalRead",
    "History",
    "Lost",
    "OrderViolation",
    "Recovery",
    "SendAttempt",
    "SendFailed",
    "SendOk",
    "SplitBrain",
    "Stored",
    "Verdict",
    "check",
    "percentile",
]
