"""The ACL settings that the name server, the broker and the filter server share (docs/protocol/acl.md §1.2): their
help and default, declared once."""

from __future__ import annotations

from typing import Literal

__all__ = ["ACL_STRICT", "ACL_WINDOW", "AclStrictMode"]

AclStrictMode = Literal["off", "admin", "all"]
ACL_STRICT = (
    "requests that must carry a strict signature (the code, field names, a time and a nonce signed; replays "
    "refused): off (checked when present, as sievemq's clients sign), admin (every request of an admin account), "
    "all (every signed request: only sievemq's clients and tools get in)",
    "off",
)
"""``aclStrictSignatures``: its help and default, shared by the roles (docs/protocol/acl.md §1.2)."""
ACL_WINDOW = (
    "a strict signature's SignedAt may differ from this server's clock by at most this many seconds",
    300,
)
"""``aclSignatureWindowSeconds``: its help and default."""
