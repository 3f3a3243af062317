"""Landlock through its three system calls (ctypes): read-only access beneath given paths, nothing else.

The ruleset handles every filesystem right the kernel's ABI knows (so anything not granted is denied), TCP bind and
connect from ABI 4 (no rule grants them), and from ABI 6 the signal and abstract-UNIX-socket scopes (no signal and
no abstract socket reaches a process outside the worker). See docs/protocol/filter-server.md §8.
"""

from __future__ import annotations

import ctypes
import os
import stat

_SYS_CREATE_RULESET = 444  # the same number on every architecture
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

_FS_READ_FILE = 1 << 2
_FS_READ_DIR = 1 << 3
_FS_ABI1 = (1 << 13) - 1  # execute, write, read file/dir, remove, make char/dir/reg/sock/fifo/block/sym
_FS_REFER = 1 << 13  # ABI 2
_FS_TRUNCATE = 1 << 14  # ABI 3
_FS_IOCTL_DEV = 1 << 15  # ABI 5
_NET_ALL = (1 << 0) | (1 << 1)  # bind and connect TCP, ABI 4
_SCOPE_ALL = (1 << 0) | (1 << 1)  # abstract UNIX sockets and signals, ABI 6


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class LandlockError(OSError):
    """Landlock is missing or refused a step; the message says which."""


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version() -> int:
    """The kernel's Landlock ABI (0 when Landlock is not built in or not enabled at boot)."""
    libc = _libc()
    n = int(libc.syscall(ctypes.c_long(_SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
                         ctypes.c_uint32(_CREATE_RULESET_VERSION)))  # fmt: skip
    return max(n, 0)


def handled(abi: int) -> tuple[int, int, int]:
    """(filesystem rights, network rights, scopes) that a ruleset handles at ``abi``."""
    fs = _FS_ABI1
    if abi >= 2:
        fs |= _FS_REFER
    if abi >= 3:
        fs |= _FS_TRUNCATE
    if abi >= 5:
        fs |= _FS_IOCTL_DEV
    return fs, _NET_ALL if abi >= 4 else 0, _SCOPE_ALL if abi >= 6 else 0


def coverage(abi: int) -> str:
    """What a ruleset at ``abi`` restricts, in words."""
    parts = ["filesystem"]
    if abi >= 4:
        parts.append("TCP")
    if abi >= 6:
        parts.append("signals and abstract sockets")
    return f"ABI {abi}: " + ", ".join(parts)


def _fail(what: str) -> LandlockError:
    err = ctypes.get_errno()
    return LandlockError(err, f"landlock {what}: {os.strerror(err)}")


def restrict_to(read_paths: list[str]) -> int:
    """Restrict this process (and any child) to reading beneath ``read_paths``; returns the ABI used.

    Needs no_new_privs set first. Paths that do not exist are skipped. Raises LandlockError when Landlock is
    unavailable or refuses a step.
    """
    abi = abi_version()
    if abi < 1:
        raise LandlockError(ctypes.get_errno(), "landlock is not enabled in this kernel")
    libc = _libc()
    fs, net, scoped = handled(abi)
    attr = _RulesetAttr(fs, net, scoped)
    ruleset = int(libc.syscall(ctypes.c_long(_SYS_CREATE_RULESET), ctypes.byref(attr),
                               ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0)))  # fmt: skip
    if ruleset < 0:
        raise _fail("create_ruleset")
    try:
        for path in read_paths:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
                rule = _PathBeneathAttr(_FS_READ_FILE | (_FS_READ_DIR if is_dir else 0), fd)
                rc = libc.syscall(ctypes.c_long(_SYS_ADD_RULE), ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                                  ctypes.byref(rule), ctypes.c_uint32(0))  # fmt: skip
                if rc < 0:
                    raise _fail(f"add_rule {path}")
            finally:
                os.close(fd)
        if libc.syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            raise _fail("restrict_self")
    finally:
        os.close(ruleset)
    return abi
