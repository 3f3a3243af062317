"""The seccomp filter of a filter worker, built with libseccomp (PyPI's ``pyseccomp``, or Debian's ``seccomp``).

Everything is allowed except the system calls below, which fail with EPERM: opening sockets, starting processes or
threads, signalling or inspecting other processes, namespaces and mounts, changing credentials, loading kernel code
and the like (docs/protocol/filter-server.md §8). A system call of another architecture (x32, i386) kills the
worker. Also used to resolve system call numbers for ``lockdown``.
"""

from __future__ import annotations

import errno
import importlib
from types import ModuleType
from typing import Any

DENIED: tuple[str, ...] = (
    # new processes and threads
    "fork", "vfork", "clone", "clone3", "execve", "execveat",
    # other processes: signals, tracing, memory
    "kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "pidfd_send_signal",
    "pidfd_getfd", "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp",
    # the network (and UNIX sockets)
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    # namespaces, mounts, file handles, device nodes
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "mount_setattr", "move_mount", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick", "name_to_handle_at", "open_by_handle_at", "mknod", "mknodat",
    # credentials
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "setfsuid", "setfsgid",
    "capset",
    # the kernel itself
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "init_module", "finit_module",
    "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "acct", "quotactl",
    "quotactl_fd", "syslog", "iopl", "ioperm", "personality", "vhangup", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "sethostname", "setdomainname", "io_uring_setup", "io_uring_enter",
    "io_uring_register",
    # System V and POSIX IPC
    "msgget", "semget", "shmget", "mq_open",
)  # fmt: skip
"""System calls a filter function has no use for and that would let it reach beyond its worker."""

_TIOCSTI = 0x5412  # push characters into a terminal's input
_TIOCLINUX = 0x541C


def binding() -> ModuleType:
    """The libseccomp binding: ``pyseccomp`` (PyPI, ctypes) or ``seccomp`` (libseccomp's own); ImportError if none
    (or no libseccomp)."""
    errors = []
    for name in ("pyseccomp", "seccomp"):
        try:
            return importlib.import_module(name)
        except (ImportError, RuntimeError, OSError) as e:  # pyseccomp raises RuntimeError without libseccomp
            errors.append(f"{name}: {e}")
    raise ImportError("no libseccomp binding (" + "; ".join(errors) + ")")


def syscall_number(name: str) -> int | None:
    """The native number of system call ``name`` according to libseccomp, or None."""
    try:
        sc: Any = binding()
        n = int(sc.resolve_syscall(sc.system_arch(), name))
    except (ImportError, OSError, ValueError):
        return None
    return n if n >= 0 else None


def install() -> int:
    """Load the filter into this process (sets no_new_privs too); returns how many rules it holds.

    Raises ImportError without a binding, OSError when the kernel refuses the filter.
    """
    sc: Any = binding()
    deny = sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(defaction=sc.ALLOW)
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    rules = 0
    for name in DENIED:
        try:
            f.add_rule(deny, name)
        except (OSError, ValueError, RuntimeError):  # not a system call on this architecture
            continue
        rules += 1
    for request in (_TIOCSTI, _TIOCLINUX):
        f.add_rule(deny, "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, request))
        rules += 1
    f.load()
    return rules
