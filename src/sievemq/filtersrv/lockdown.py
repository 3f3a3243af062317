"""Locks a filter worker down before it runs any user code: namespaces, a root of its own, an unprivileged user,
rlimits, no_new_privs, Landlock, seccomp, in that order, each checked once set (docs/protocol/filter-server.md §8).

A layer that the machine or the operator (``sandboxSkip``) does not allow is reported missing with the reason and
the others are still set up; the filter server decides from the report (``layers.upload_refusal``). With a PID
namespace the process forks: the child, PID 1 of the new namespace, goes on to serve, and the original process
stays outside only to wait for it and exit the same way (so the pool sees the child's exit code or signal).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import resource
import select
import signal
import socket
import stat
from dataclasses import dataclass, field
from typing import NoReturn

from sievemq.filtersrv import landlock, syscalls
from sievemq.filtersrv.layers import LAYERS, LayerReport

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MS_NOATIME, _MS_NODIRATIME = 1024, 2048
_MNT_DETACH = 2
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_GET_NO_NEW_PRIVS = 1, 4, 38, 39
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_CAP_VERSION_3 = 0x20080522
_FALLBACK_SYSCALLS = {"x86_64": {"pivot_root": 155, "capset": 126, "capget": 125},
                      "aarch64": {"pivot_root": 41, "capset": 91, "capget": 90}}  # fmt: skip
_NAMESPACES = (
    ("mountns", CLONE_NEWNS, "mnt"),
    ("netns", CLONE_NEWNET, "net"),
    ("ipcns", CLONE_NEWIPC, "ipc"),
    ("pidns", CLONE_NEWPID, "pid_for_children"),
)
_NEW_ROOT = "/tmp"  # where the worker's own root is built (a tmpfs in its own mount namespace: hides nothing else)
_LOCKED_FLAGS = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC | _MS_NOATIME | _MS_NODIRATIME


@dataclass(frozen=True)
class Plan:
    """What a worker's sandbox is made of."""

    cpu_seconds: int
    memory_mb: int
    read_paths: tuple[str, ...] = ()
    """Folders (or files) the worker may read: Python's own, the filterPaths, the operator's extra ones."""
    user: str = "nobody"
    skip: frozenset[str] = field(default_factory=frozenset)
    max_files: int = 64
    parent: int = 0
    """The filter server's pid: the worker must not outlive it."""


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32))


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
    return libc


def _prctl(libc: ctypes.CDLL, option: int, arg2: int = 0) -> int:
    zero = ctypes.c_ulong(0)
    return int(libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), zero, zero, zero))


def _errno_text(what: str) -> str:
    return f"{what}: {os.strerror(ctypes.get_errno())}"


def _syscall_number(name: str) -> int | None:
    n = syscalls.syscall_number(name)
    return n if n is not None else _FALLBACK_SYSCALLS.get(os.uname().machine, {}).get(name)


def _ns_link(link: str) -> str | None:
    try:
        return os.readlink(f"/proc/self/ns/{link}")
    except OSError:
        return None


def readable_dirs(paths: list[str]) -> tuple[str, ...]:
    """``paths`` that exist, absolute, without those inside another one, sorted."""
    out: list[str] = []
    for p in sorted({os.path.abspath(p) for p in paths if p and os.path.exists(p)}):
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return tuple(out)


def tie_to_parent(parent: int) -> None:
    """Die with the filter server (SIGKILL), and exit at once if it is already gone."""
    _prctl(_libc(), _PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent and os.getppid() != parent:
        os._exit(1)


def supervise(child: int, lifeline: int, cpu_seconds: int, parent: int, cpu_flag: int) -> NoReturn:
    """Outside the PID namespace: wait for the worker and end the same way. A SIGKILL at the CPU hard limit is
    reported as SIGXCPU (PID 1 of a namespace does not die of the soft limit's SIGXCPU): the worker's SIGXCPU
    handler writes a byte to ``cpu_flag`` before it asks for the SIGKILL, so the kill is told apart from any other
    without comparing CPU times (which a loaded machine's accounting can leave short of the limit)."""
    tie_to_parent(parent)
    keep = sorted((lifeline, cpu_flag))
    os.closerange(3, keep[0])
    os.closerange(keep[0] + 1, keep[1])
    os.closerange(keep[1] + 1, 1 << 16)
    try:
        _, status, usage = os.wait4(child, 0)
    except ChildProcessError:
        os._exit(1)
    if os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    sig = os.WTERMSIG(status)
    if sig == signal.SIGKILL and (_flagged(cpu_flag) or usage.ru_utime + usage.ru_stime >= cpu_seconds - 0.05):
        sig = signal.SIGXCPU
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if sig not in (signal.SIGKILL, signal.SIGSTOP):  # these two keep their default action: no handler to reset
        signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)


def _flagged(fd: int) -> bool:
    """Whether the worker wrote to its CPU-limit pipe (it is dead: the pipe holds the byte or is at its end)."""
    try:
        return os.read(fd, 1) != b""
    except OSError:
        return False


class Lockdown:
    """Sets up the layers of ``plan`` in this process; ``run`` returns what holds."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.active: list[str] = []
        self.missing: dict[str, str] = {}
        self.notes: dict[str, str] = {}
        self._libc = _libc()

    def _want(self, name: str) -> bool:
        if name in self.plan.skip:
            self.missing[name] = "skipped (sandboxSkip)"
            return False
        return True

    def _ok(self, name: str, note: str = "") -> None:
        self.active.append(name)
        if note:
            self.notes[name] = note

    # ------------------------------------------------------------------ the steps
    def run(self) -> LayerReport:
        """Every layer in order; in a new PID namespace only the child returns."""
        account = self._sandbox_account()
        lifeline: int | None = None
        created = self._namespaces()
        if "pidns" in created:
            lifeline = self._enter_pid_namespace()
        if "mountns" in created:
            self._own_root()
        for name in ("netns", "ipcns"):
            if name in created:
                self._ok(name)
        self._drop_user(account)
        self._drop_capabilities()
        self._arm_parent_death(lifeline)
        self._rlimits()
        self._no_new_privs()
        if self._want("landlock"):
            self._landlock()
        if self._want("seccomp"):
            self._seccomp()
        return LayerReport(tuple(sorted(self.active, key=LAYERS.index)), dict(self.missing), dict(self.notes))

    def _sandbox_account(self) -> pwd.struct_passwd | None:
        """The sandbox user, looked up while /etc/passwd is still visible (None: no user layer)."""
        if not self._want("user"):
            return None
        if os.geteuid() != 0:
            self.missing["user"] = (
                f"the filter server runs as uid {os.geteuid()}, not root, so its workers cannot switch to another user"
            )
            return None
        try:
            account = pwd.getpwnam(self.plan.user)
        except KeyError:
            self.missing["user"] = f"sandboxUser '{self.plan.user}' does not exist"
            return None
        if account.pw_uid == 0 or account.pw_gid == 0:
            self.missing["user"] = f"sandboxUser '{self.plan.user}' is root (uid or gid 0)"
            return None
        return account

    def _namespaces(self) -> set[str]:
        wanted = [ns for ns in _NAMESPACES if self._want(ns[0])]
        if not wanted:
            return set()
        if os.geteuid() != 0:
            why = self._user_namespace()
            if why:
                for name, _, _ in wanted:
                    self.missing[name] = why
                return set()
        created = set()
        for name, flag, link in wanted:
            before = _ns_link(link)
            if self._libc.unshare(ctypes.c_int(flag)) != 0:
                self.missing[name] = _errno_text("unshare")
                continue
            if before is not None and _ns_link(link) == before:
                self.missing[name] = "unshare left the namespace unchanged"
                continue
            created.add(name)
        return created

    def _user_namespace(self) -> str:
        """An unprivileged process gets the rights to create namespaces in a user namespace of its own, mapping
        only its own ids; returns why not, or ``""``."""
        uid, gid = os.geteuid(), os.getegid()
        if self._libc.unshare(ctypes.c_int(CLONE_NEWUSER)) != 0:
            return _errno_text("a user namespace (needed without root) cannot be created")
        try:
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text)
        except OSError as e:
            return f"cannot map ids in the user namespace: {e.strerror}"
        return ""

    def _enter_pid_namespace(self) -> int:
        """Fork; the child (PID 1) returns the read end of a pipe that the parent holds open as long as it lives."""
        r, w = os.pipe()
        flag_r, flag_w = os.pipe()
        child = os.fork()
        if child:
            os.close(r)
            os.close(flag_w)
            supervise(child, w, self.plan.cpu_seconds, self.plan.parent, flag_r)
        os.close(w)
        os.close(flag_r)
        self._arm_parent_death(r, keep=True)
        cpu = self.plan.cpu_seconds

        def cpu_limit_reached(signum: int, frame: object) -> None:  # PID 1 ignores SIGXCPU: ask for the SIGKILL now
            with contextlib.suppress(OSError):
                os.write(flag_w, b"x")  # tells the supervisor that the coming SIGKILL is the CPU limit's
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))

        signal.signal(signal.SIGXCPU, cpu_limit_reached)
        if os.getpid() == 1:
            self._ok("pidns")
        else:
            self.missing["pidns"] = f"the worker is pid {os.getpid()} after entering the PID namespace, not 1"
        return r

    def _arm_parent_death(self, lifeline: int | None, *, keep: bool = False) -> None:
        """SIGKILL when the parent dies (again after a change of user, which clears it); exit if it is gone."""
        _prctl(self._libc, _PR_SET_PDEATHSIG, signal.SIGKILL)
        if lifeline is None:
            if self.plan.parent and os.getppid() != self.plan.parent:
                os._exit(1)
            return
        if select.select([lifeline], [], [], 0)[0]:  # the parent died before PDEATHSIG was set
            os._exit(1)
        if not keep:
            os.close(lifeline)

    def _mount(self, source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
        def enc(text: str | None) -> bytes | None:
            return text.encode() if text is not None else None

        if self._libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
            raise OSError(ctypes.get_errno(), _errno_text(f"mount {target}"))

    def _own_root(self) -> None:
        """A tmpfs root holding read-only bind mounts of the readable paths at their own paths, then pivot_root to
        it: the rest of the filesystem (/etc, /proc, the broker's store...) is not there at all."""
        old_umask = os.umask(0o022)
        holders: list[tuple[str, int]] = []
        try:
            self._mount(None, "/", None, _MS_REC | _MS_PRIVATE)
            holders = [(p, os.open(p, os.O_PATH | os.O_CLOEXEC)) for p in self.plan.read_paths if os.path.exists(p)]
            self._mount("sievemq-worker", _NEW_ROOT, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,nr_inodes=4096,mode=755")
            for path, fd in holders:
                target = _NEW_ROOT + path
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    os.makedirs(target, 0o755, exist_ok=True)
                else:
                    os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
                    os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
                self._mount(f"/proc/self/fd/{fd}", target, None, _MS_BIND)
                locked = os.fstatvfs(fd).f_flag & _LOCKED_FLAGS
                self._mount(None, target, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV | locked)
            self._pivot(_NEW_ROOT)
            self._mount(None, "/", None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
        except OSError as e:
            self.missing["mountns"] = f"cannot build the worker's root: {e.strerror or e}"
            with contextlib.suppress(OSError):
                self._libc.umount2(_NEW_ROOT.encode(), _MNT_DETACH)
            return
        finally:
            for _, fd in holders:
                os.close(fd)
            os.umask(old_umask)
        if os.path.exists("/proc/self") or os.path.exists("/etc/passwd"):
            self.missing["mountns"] = "the worker's root still shows /proc or /etc"
            return
        self._ok("mountns", f"{len(holders)} read-only folders")

    def _pivot(self, new_root: str) -> None:
        os.chdir(new_root)
        nr = _syscall_number("pivot_root")
        if nr is not None and self._libc.syscall(ctypes.c_long(nr), b".", b".") == 0:
            if self._libc.umount2(b".", _MNT_DETACH) != 0:
                raise OSError(ctypes.get_errno(), _errno_text("umount the old root"))
        else:
            os.chroot(".")  # pivot_root refused (a root on rootfs): chroot, which seccomp keeps shut
        os.chdir("/")

    def _drop_user(self, account: pwd.struct_passwd | None) -> None:
        if account is None:
            return
        uid, gid = account.pw_uid, account.pw_gid
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
        except OSError as e:
            self.missing["user"] = f"cannot switch to sandboxUser '{self.plan.user}': {e.strerror}"
            return
        try:
            os.setuid(0)
        except PermissionError:
            pass
        else:
            self.missing["user"] = "the worker could switch back to root"
            return
        if os.getresuid() == (uid, uid, uid) and os.getresgid() == (gid, gid, gid) and not os.getgroups():
            unreadable = [p for p in self.plan.read_paths if not os.access(p, os.R_OK)]
            warning = f"; it cannot read {', '.join(unreadable)} (check the permissions)" if unreadable else ""
            self._ok("user", f"{self.plan.user} (uid {uid}, gid {gid}){warning}")
        else:
            self.missing["user"] = "the worker's ids are not the sandbox user's after switching"

    def _drop_capabilities(self) -> None:
        """No capability left (a user namespace grants all of them in itself); an error leaves seccomp to stop
        what capabilities would allow."""
        _prctl(self._libc, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)
        nr = _syscall_number("capset")
        if nr is not None:
            header, data = _CapHeader(_CAP_VERSION_3, 0), (_CapData * 2)()
            self._libc.syscall(ctypes.c_long(nr), ctypes.byref(header), ctypes.byref(data))
        _prctl(self._libc, _PR_SET_DUMPABLE, 0)

    def _rlimits(self) -> None:
        p = self.plan
        limits = {
            resource.RLIMIT_CORE: (0, 0),
            resource.RLIMIT_CPU: (p.cpu_seconds, p.cpu_seconds + 1),
            resource.RLIMIT_FSIZE: (0, 0),
            resource.RLIMIT_NOFILE: (p.max_files, p.max_files),
            resource.RLIMIT_NPROC: (0, 0),
        }
        if p.memory_mb > 0:
            limits[resource.RLIMIT_AS] = (p.memory_mb << 20, p.memory_mb << 20)
        failed = []
        for which, value in limits.items():
            try:
                resource.setrlimit(which, value)
            except (ValueError, OSError) as e:
                if which in (resource.RLIMIT_CPU, resource.RLIMIT_AS):
                    raise  # the pool relies on these two
                failed.append(f"{which}: {e}")
        if not failed and all(resource.getrlimit(w) == v for w, v in limits.items()):
            note = "NPROC not enforced for root" if os.geteuid() == 0 else ""
            self._ok("rlimits", note)
        else:
            self.missing["rlimits"] = "cannot set " + ", ".join(failed or ["every limit"])

    def _no_new_privs(self) -> None:
        _prctl(self._libc, _PR_SET_NO_NEW_PRIVS, 1)
        if _prctl(self._libc, _PR_GET_NO_NEW_PRIVS) == 1:
            self._ok("no_new_privs")
        else:
            self.missing["no_new_privs"] = _errno_text("prctl(PR_SET_NO_NEW_PRIVS)")

    def _landlock(self) -> None:
        try:
            abi = landlock.restrict_to(list(self.plan.read_paths))
        except OSError as e:
            self.missing["landlock"] = str(e.strerror or e)
            return
        try:
            os.listdir("/")
        except PermissionError:
            self._ok("landlock", landlock.coverage(abi))
        else:
            self.missing["landlock"] = "the worker can still list / (is / one of the readable paths?)"

    def _seccomp(self) -> None:
        try:
            rules = syscalls.install()
        except ImportError as e:
            self.missing["seccomp"] = str(e)
            return
        except OSError as e:
            self.missing["seccomp"] = f"the kernel refused the filter: {e.strerror or e}"
            return
        try:
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
        except PermissionError:
            self._ok("seccomp", f"{rules} rules")
        else:
            self.missing["seccomp"] = "the worker can still open a socket"
