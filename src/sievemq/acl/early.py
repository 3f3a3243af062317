"""Before a large frame's body is read: does its header name an account? (docs/server-limits.md §4).

A server with ACL on reads the header of a frame longer than ``serverAclEarlyCheckBytes`` before its body, and
reads the body only when the header could be served: the peer is in ``globalWhiteRemoteAddresses``, or the
``AccessKey`` names an account of the ACL file. Otherwise the request is answered NO_PERMISSION with the reason
``decide`` would give (``ACL_NO_CREDENTIALS``, ``ACL_UNKNOWN_ACCOUNT``) and the connection is closed, so an
unknown sender cannot make the server hold megabytes. The signature covers the body, so it is checked as ever once
the frame is whole (``decision.decide``); so are the permissions.

Unlike ``decide``, this holds for every code, those a role lets through unchecked too (the name server's reads):
no request sievemq serves without credentials carries a large body.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from sievemq.acl.decision import Refusal, identify
from sievemq.acl.model import AclRules
from sievemq.errors import RemotingError
from sievemq.remoting.codes import ResponseCode, request_name
from sievemq.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from sievemq.acl.authorizer import AclAuthorizer


def early_refusal(rules: AclRules, peer: str, code: int, fields: Mapping[str, str], role: str) -> Refusal | None:
    """None when the body of a large request with these header ``fields`` from ``peer`` may be read, else why not
    (``decision.identify``: a trusted address, or an AccessKey the file knows)."""
    caller = identify(rules, peer, fields, f"a large {request_name(code)} ({code})", role)
    return caller if isinstance(caller, Refusal) else None


class EarlyCheck:
    """The header screen of a server with ACL on (``RemotingServer(screen=...)``): raises the refusal."""

    def __init__(self, rules: Callable[[], AclRules], role: str) -> None:
        """``rules``: the rules in force (``AclFile.current``); ``role``: named in remarks."""
        self.rules = rules
        self.role = role

    def __call__(self, peer: str, cmd: RemotingCommand) -> None:
        refusal = early_refusal(self.rules(), peer, cmd.code, cmd.ext_fields, self.role)
        if refusal is not None:
            raise RemotingError(ResponseCode.NO_PERMISSION, refusal.remark, refusal.reason)


def early_check(acl: AclAuthorizer | None) -> EarlyCheck | None:
    """The header screen of a role whose authorizer is ``acl`` (None with ACL off: no screen)."""
    return EarlyCheck(acl.file.current, acl.policy.role) if acl is not None else None
