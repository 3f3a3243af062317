"""A server's ACL check: the ``ProcessorTable`` authorizer of a role that has ``aclEnable`` on.

Each request is decided (``decision.decide``) against the rules in force of the role's ``AclFile``; a refusal is
answered with code 16 (NO_PERMISSION), a remark for people and the extField ``reason`` (docs/protocol/acl.md §5),
and logged: each distinct refusal (peer address and remark) at most once every ``LOG_INTERVAL`` seconds.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from sievemq.acl.decision import Refusal, authorize_more, decide
from sievemq.acl.loader import CHECK_INTERVAL, AclFile
from sievemq.acl.policy import Policy
from sievemq.acl.strict import StrictPolicy
from sievemq.errors import RemotingError
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.util.ratelimit import RateLimitedLog, suppressed_note

log = logging.getLogger(__name__)

LOG_INTERVAL = 10.0


class AclAuthorizer:
    """Decides every request of one role against one ACL file (reloaded when it changes)."""

    def __init__(
        self, path: str | Path, policy: Policy, check_interval: float = CHECK_INTERVAL,
        strict: StrictPolicy | None = None,
    ) -> None:  # fmt: skip
        """``strict``: who needs strict signatures and their window (default: checked when present, never
        required, 300 s)."""
        self.file = AclFile(path, check_interval)
        self.policy = policy
        self.strict = strict if strict is not None else StrictPolicy()
        self.refused: Counter[str] = Counter()
        """Refusals by reason since start."""
        self._log = RateLimitedLog(LOG_INTERVAL)
        log.info("%s: ACL on, rules from %s (%d accounts)", policy.role, self.file.path, len(self.file.rules.accounts))

    def __call__(self, conn: Connection, cmd: RemotingCommand) -> None:
        """Raise the refusal of a request that may not be served."""
        peer = conn.peer[0]
        refusal = decide(self.file.current(), self.policy, peer, cmd.code, cmd.ext_fields, cmd.body, self.strict)
        if refusal is not None:
            self._refuse(peer, refusal)

    def check_more(self, conn: Connection, cmd: RemotingCommand, resources: dict[str, int]) -> None:
        """Raise the refusal when the admitted request's account lacks ``resources`` (the processor found them: the
        topic of a record the request names)."""
        peer = conn.peer[0]
        refusal = authorize_more(self.file.current(), peer, cmd.ext_fields, resources, self.policy.role)
        if refusal is not None:
            self._refuse(peer, refusal)

    def _refuse(self, peer: str, refusal: Refusal) -> None:
        self.refused[refusal.reason] += 1
        held_back = self._log.allow((peer, refusal.remark))
        if held_back is not None:
            log.warning("%s refused a request from %s: [%s] %s%s", self.policy.role, peer, refusal.reason,
                        refusal.remark, suppressed_note(held_back))  # fmt: skip
        raise RemotingError(ResponseCode.NO_PERMISSION, refusal.remark, refusal.reason)
