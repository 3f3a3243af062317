"""Function registrations by (topic, group): what may be registered, CRCs, counts, and disabling.

Pure logic, no I/O: the processors decide *when* to load a function in a worker; this module decides *whether*
a request may register it (operator-allowed modules, signed uploads) and keeps the per-function state.
"""

from __future__ import annotations

import hashlib
import keyword
import re
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from sievemq.errors import RemotingError
from sievemq.filtersrv.replay import NonceWindow
from sievemq.protocol.reasons import Reason
from sievemq.protocol.upload_signing import (
    ACCESS_KEY_FIELD,
    NONCE_FIELD,
    SIGNATURE_FIELD,
    TIMESTAMP_FIELD,
    Upload,
    filter_class_crc,
    is_signature,
    parse_nonce,
    parse_timestamp,
    verify_upload,
)
from sievemq.remoting.codes import ResponseCode

FunctionKind = Literal["named", "source"]
_IDENT_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """What a worker loads: a function named in an allowed module, or uploaded source defining ``name``."""

    kind: FunctionKind
    name: str
    """``module:function`` for a named function; the function's name for uploaded source."""
    source: str = ""
    crc: int = 0
    account: str = ""
    """The ``uploadAccessKey`` that signed an upload (part of its tenant: ``tenants.TenantKey``); empty when named."""

    @property
    def fid(self) -> str:
        """A content id: equal specs share one loaded function in a worker."""
        h = hashlib.sha256(f"{self.kind}\0{self.name}\0{self.source}".encode()).hexdigest()
        return f"{self.kind[0]}{h[:31]}"

    def to_json(self) -> dict[str, Any]:
        """The spec as sent to a worker."""
        return {"fid": self.fid, "kind": self.kind, "name": self.name, "source": self.source}


def module_allowed(module: str, allowed: tuple[str, ...]) -> bool:
    """True when ``module`` is one of ``allowed`` or a submodule of one."""
    return any(module == m or module.startswith(m + ".") for m in allowed)


def _is_identifier(name: str) -> bool:
    return bool(_IDENT_RE.match(name)) and not keyword.iskeyword(name)


def _refused(text: str) -> RemotingError:
    return RemotingError(ResponseCode.NO_PERMISSION, f"upload refused: {text}", Reason.FILTER_NOT_ALLOWED)


@dataclass(frozen=True)
class RegistrationPolicy:
    """The operator's rules for REGISTER_MESSAGE_FILTER_CLASS."""

    modules: tuple[str, ...] = ()
    upload_enabled: bool = False
    secret: str = ""
    accounts: tuple[str, ...] = ()
    max_source_bytes: int = 256 * 1024
    upload_refusal: str = ""
    """Set when uploads are on in the configuration but the workers' sandbox is too weak (``sandboxRequire``)."""
    nonces: NonceWindow = field(default_factory=NonceWindow)

    def spec_for(
        self,
        group: str,
        topic: str,
        class_name: str,
        crc: int,
        body: bytes,
        fields: dict[str, str],
        filter_server: str = "",
    ) -> FunctionSpec:
        """The function a 302 request to ``filter_server`` (this server's ``ip:port``) asks for; RemotingError
        (NO_PERMISSION / SYSTEM_ERROR) when refused."""
        if not body:
            return self._named(class_name, crc)
        return self._upload(group, topic, class_name, crc, body, fields, filter_server)

    def _named(self, class_name: str, crc: int) -> FunctionSpec:
        module, sep, func = class_name.partition(":")
        if not sep or not _MODULE_RE.match(module) or not _is_identifier(func):
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR,
                f"className '{class_name}' is not 'module:function' (a named function needs both; a function "
                "whose name starts with '_' cannot be named). To upload source instead, send it as the body",
                Reason.FILTER_INVALID,
            )
        if not module_allowed(module, self.modules):
            allowed = ", ".join(self.modules) or "none"
            raise RemotingError(
                ResponseCode.NO_PERMISSION,
                f"module '{module}' is not one of the filter server's filterModules (allowed: {allowed}); "
                "ask the operator to add it",
                Reason.FILTER_NOT_ALLOWED,
            )
        return FunctionSpec("named", class_name, "", crc)

    def _upload(
        self, group: str, topic: str, class_name: str, crc: int, body: bytes, fields: dict[str, str], server: str
    ) -> FunctionSpec:
        if self.upload_refusal:
            raise RemotingError(
                ResponseCode.NO_PERMISSION,
                f"this filter server keeps uploads off although clientUploadFilterEnable=true: {self.upload_refusal}",
                Reason.FILTER_NOT_ALLOWED,
            )
        if not self.upload_enabled:
            raise RemotingError(
                ResponseCode.NO_PERMISSION,
                "this filter server does not accept uploaded filter source (clientUploadFilterEnable=false); "
                "name a function from the operator's filterModules instead ('module:function', empty body)",
                Reason.FILTER_NOT_ALLOWED,
            )
        if not self.secret:
            raise RemotingError(
                ResponseCode.NO_PERMISSION,
                "uploads are enabled but the filter server has no uploadSecret, so no upload can be verified",
                Reason.FILTER_NOT_ALLOWED,
            )
        account = fields.get(ACCESS_KEY_FIELD, "")
        if not account or account not in self.accounts:
            raise _refused(f"{ACCESS_KEY_FIELD} {account[:64]!r} is not one of the filter server's uploadAccounts")
        if len(body) > self.max_source_bytes:
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR,
                f"uploaded source is {len(body)} bytes, more than maxSourceBytes {self.max_source_bytes}",
                Reason.FILTER_INVALID,
            )
        self._check_signature(Upload(account, group, topic, class_name, server, 0, "", body), fields)
        if not _is_identifier(class_name):
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR,
                f"className '{class_name}' must be the name of the function the uploaded source defines "
                "(a Python identifier not starting with '_'); Java class filters are not supported",
                Reason.FILTER_INVALID,
            )
        actual = filter_class_crc(body)
        if actual != crc:
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR,
                f"classCRC {crc} does not match the uploaded source (CRC32 & 0x7FFFFFFF = {actual})",
                Reason.FILTER_INVALID,
            )
        try:
            source = body.decode("utf-8")
        except UnicodeDecodeError:
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR, "uploaded source is not UTF-8 text", Reason.FILTER_INVALID
            ) from None
        return FunctionSpec("source", class_name, source, crc, account)

    def _check_signature(self, unsigned: Upload, fields: dict[str, str]) -> None:
        """Well-formed fields, a timestamp inside the window, a signature that verifies, a nonce not seen before
        (remembered only once the signature verified, so that no one without the secret can fill the memory)."""
        account = unsigned.access_key
        signature = fields.get(SIGNATURE_FIELD, "")
        if not is_signature(signature):
            what = "missing" if not signature else "malformed (not 64 hexadecimal ASCII digits)"
            raise _refused(f"the {SIGNATURE_FIELD} of account '{account}' is {what}")
        timestamp = parse_timestamp(fields.get(TIMESTAMP_FIELD, ""))
        if timestamp is None:
            raise _refused(f"{TIMESTAMP_FIELD} is missing or not milliseconds since the epoch (decimal digits)")
        nonce = parse_nonce(fields.get(NONCE_FIELD, ""))
        if nonce is None:
            raise _refused(f"{NONCE_FIELD} is missing or not 16 to 64 of A-Z a-z 0-9 _ -")
        stale = self.nonces.stale(timestamp)
        if stale:
            raise _refused(stale)
        upload = Upload(
            account, unsigned.group, unsigned.topic, unsigned.class_name, unsigned.filter_server, timestamp, nonce,
            unsigned.source,
        )  # fmt: skip
        if not verify_upload(self.secret, upload, signature):
            raise _refused(
                f"the {SIGNATURE_FIELD} of account '{account}' does not verify (HMAC-SHA256 with the shared "
                "uploadSecret over the length-prefixed fields of docs/protocol/filter-server.md §5)"
            )
        replayed = self.nonces.claim(account, nonce, timestamp)
        if replayed:
            raise _refused(replayed)


@dataclass
class FunctionStats:
    """Counts of one registered function."""

    seen: int = 0
    matched: int = 0
    filtered_out: int = 0
    errors: int = 0
    batches: int = 0
    time_spent: float = 0.0
    """Seconds spent in workers (round trip, including decoding), successful or not."""


@dataclass
class Registration:
    """One (topic, group)'s function and its state."""

    topic: str
    group: str
    spec: FunctionSpec
    registered_at: float = field(default_factory=time.time)
    enabled: bool = True
    consecutive_failures: int = 0
    disabled_reason: str = ""
    last_error: str = ""
    stats: FunctionStats = field(default_factory=FunctionStats)
    serial: int = 0
    """This registration's number on its filter server: a new registration of (topic, group) has a new one (and
    new counts), which is how the broker tells a counter reset from growth (``counts_report``)."""

    @property
    def label(self) -> str:
        """How remarks and logs name the function."""
        return f"'{self.spec.name}' ({self.spec.kind}) of group {self.group} on topic {self.topic}"

    def to_json(self) -> dict[str, Any]:
        """Status JSON of this registration."""
        s = self.stats
        return {
            "topic": self.topic,
            "consumerGroup": self.group,
            "className": self.spec.name,
            "kind": self.spec.kind,
            "account": self.spec.account,
            "classCRC": self.spec.crc,
            "registeredAt": int(self.registered_at * 1000),
            "enabled": self.enabled,
            "disabledReason": self.disabled_reason,
            "consecutiveFailures": self.consecutive_failures,
            "lastError": self.last_error,
            "seen": s.seen,
            "matched": s.matched,
            "filteredOut": s.filtered_out,
            "errors": s.errors,
            "batches": s.batches,
            "timeSpentMs": round(s.time_spent * 1000, 3),
        }


class FilterRegistry:
    """Registrations keyed by (topic, group); counts; disabling after consecutive failures."""

    def __init__(self, max_consecutive_failures: int = 3) -> None:
        self.max_consecutive_failures = max_consecutive_failures
        self._regs: dict[tuple[str, str], Registration] = {}
        self._serial = 0

    def get(self, topic: str, group: str) -> Registration | None:
        """The registration of (topic, group), if any."""
        return self._regs.get((topic, group))

    def unchanged(self, topic: str, group: str, spec: FunctionSpec) -> Registration | None:
        """The current registration when ``spec`` is the same function with the same CRC, uploaded by the same account
        (the same tenant: no reload needed)."""
        reg = self._regs.get((topic, group))
        if reg is not None and (reg.spec.crc, reg.spec.fid, reg.spec.account) == (spec.crc, spec.fid, spec.account):
            return reg
        return None

    def put(self, topic: str, group: str, spec: FunctionSpec) -> Registration:
        """Register ``spec`` for (topic, group), replacing (and re-enabling) what was there."""
        self._serial += 1
        reg = Registration(topic, group, spec, serial=self._serial)
        self._regs[(topic, group)] = reg
        return reg

    @staticmethod
    def reenable(reg: Registration) -> None:
        """A new registration of the same function: enable it again and forget its failure streak."""
        reg.enabled = True
        reg.consecutive_failures = 0
        reg.disabled_reason = ""

    @staticmethod
    def record_batch(reg: Registration, seen: int, matched: int, seconds: float) -> None:
        """A batch ran: count it and end any failure streak."""
        s = reg.stats
        s.seen += seen
        s.matched += matched
        s.filtered_out += seen - matched
        s.batches += 1
        s.time_spent += seconds
        reg.consecutive_failures = 0

    def record_failure(self, reg: Registration, error: str, seconds: float) -> bool:
        """A batch failed; returns True when this failure disabled the function."""
        reg.stats.errors += 1
        reg.stats.time_spent += seconds
        reg.consecutive_failures += 1
        reg.last_error = error
        if reg.enabled and reg.consecutive_failures >= self.max_consecutive_failures:
            reg.enabled = False
            reg.disabled_reason = (
                f"disabled after {reg.consecutive_failures} consecutive failures (last: {error}); "
                "register the function again (302) to re-enable it"
            )
            return True
        return False

    def registrations(self) -> list[Registration]:
        """Every registration, in the order its (topic, group) was first registered (``/metrics``' stable order)."""
        return list(self._regs.values())

    def all(self) -> list[Registration]:
        """Every registration, sorted by topic then group."""
        return [self._regs[k] for k in sorted(self._regs)]

    def snapshot(self) -> list[dict[str, Any]]:
        """Status JSON of every registration."""
        return [r.to_json() for r in self.all()]

    def counts_report(self) -> list[dict[str, Any]]:
        """Each registration's decisions as its filter server tells its broker in every 301 (docs/metrics.md §4):
        ``consumerGroup``, ``topic``, ``serial``, ``matched``, ``filteredOut``, ``errors``."""
        return [
            {
                "consumerGroup": r.group,
                "topic": r.topic,
                "serial": r.serial,
                "matched": r.stats.matched,
                "filteredOut": r.stats.filtered_out,
                "errors": r.stats.errors,
            }
            for r in self.registrations()
        ]
