"""Permissions of the plain ACL: the bits, their spelling in ``plain_acl.yml``, and the check (docs/protocol/acl.md §3).

The bit values are RocketMQ's: ``DENY`` 1, ``ANY`` 2, ``PUB`` 4, ``SUB`` 8. A needed ``ANY`` is met by ``PUB`` or
``SUB``; an owned ``DENY`` meets nothing.
"""

from __future__ import annotations

from typing import Final


class Perm:
    """The bits of what a request needs, or an account owns, on one resource (plain ints: flag enums cost
    microseconds per operation on the request path)."""

    NONE: Final = 0
    DENY: Final = 1
    ANY: Final = 2
    PUB: Final = 4
    SUB: Final = 8


PERM_WORDS: dict[str, int] = {
    "DENY": Perm.DENY,
    "PUB": Perm.PUB,
    "SUB": Perm.SUB,
    "PUB|SUB": Perm.PUB | Perm.SUB,
    "SUB|PUB": Perm.PUB | Perm.SUB,
}
PERM_CHOICES = "PUB, SUB, PUB|SUB, SUB|PUB or DENY"


def parse_perm(text: str) -> int:
    """The permission spelled ``text`` (spaces around it ignored); ``ValueError`` for any other word.

    RocketMQ reads an unknown word as DENY; sievemq refuses the file instead, so a typo is seen, not silently
    locking an account out.
    """
    perm = PERM_WORDS.get(text.strip())
    if perm is None:
        raise ValueError(f"{text!r} is not a permission (expected {PERM_CHOICES})")
    return perm


def allows(needed: int, owned: int) -> bool:
    """True when ``owned`` meets ``needed``."""
    if owned & Perm.DENY:
        return False
    if needed & Perm.ANY:
        return bool(owned & (Perm.PUB | Perm.SUB))
    return bool(needed & owned)


def perm_name(perm: int) -> str:
    """``PUB``, ``SUB``, ``PUB|SUB``, ``DENY`` or ``PUB or SUB`` (ANY), for remarks."""
    if perm & Perm.ANY:
        return "PUB or SUB"
    if perm & Perm.DENY:
        return "DENY"
    return "|".join(name for name, bit in (("PUB", Perm.PUB), ("SUB", Perm.SUB)) if perm & bit) or "none"
