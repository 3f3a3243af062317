"""ACL 2.0's admin codes, as RocketMQ 5's ``AdminBrokerProcessor`` answers them (docs/acl2.md §4): users (3001
create, 3002 update, 3003 delete, 3004 get, 3005 list) and ACLs (3006 create, 3007 update, 3008 delete, 3009 get,
3010 list), with RocketMQ's headers and ``UserInfo``/``AclInfo`` JSON bodies.

Who may send them is the gate's business (Update or Get on ``Cluster:<name>``, or a super user:
``sievemq.auth.classification``); here, as in RocketMQ, only a super user may create, change or delete a Super
user. A change is answered once it is on disk (``AuthStore``). A request that is not valid is answered 29
(INVALID_PARAMETER) with the reason ``ACL_INVALID``; one a Normal user may not make, 16 with ``NO_PERMISSION``.

A slave's users and ACLs are a copy of its master's (GET_ALL_AUTH_METADATA, 30023, answered here; docs/acl2.md §8):
it makes no change of its own. A write (3001-3003, 3006-3008) is answered 0 when the master's copy, fetched at once,
already holds what it asks (``mqadmin createUser -c`` writes to the master, then to its slaves), else 14
(SERVICE_NOT_AVAILABLE) with the reason ``BROKER_IS_SLAVE``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import orjson

from sievemq.acl.signature import ACCESS_KEY
from sievemq.auth.model import (
    AuthError,
    PolicyType,
    User,
    UserStatus,
    UserType,
    parse_password,
    parse_resource,
    parse_subject,
    parse_username,
)
from sievemq.auth.store import AuthStore
from sievemq.auth.wire import acl_info, parse_acl_info, parse_user_info, user_info
from sievemq.errors import RemotingError
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.server import ProcessorTable

__all__ = ["INVALID", "AuthProcessor", "Role"]

INVALID = Reason.ACL_INVALID


async def _discard(path: object, doc: object) -> None:
    """A scratch store's writer: nothing reaches the disk."""


def _acl_gone(store: AuthStore, cmd: RemotingCommand) -> bool:
    """Whether the ACL entry (or whole ACL) a DELETE_ACL names is absent from ``store``."""
    f = cmd.ext_fields
    try:
        name = parse_subject(f.get("subject"))
        ptype = PolicyType.parse(f["policyType"], "policyType") if f.get("policyType") else PolicyType.CUSTOM
        resource = parse_resource(f["resource"]) if f.get("resource") else None
    except AuthError:
        return False
    acl = store.acl(name)
    return acl is None or (resource is not None and acl.without(ptype, resource) == acl)


def _invalid(e: AuthError) -> RemotingError:
    return RemotingError(ResponseCode.INVALID_PARAMETER, str(e), INVALID)


class Role(Protocol):
    """The broker's place in its set (``broker/replication.py``'s ``Replication``)."""

    @property
    def is_slave(self) -> bool: ...

    @property
    def master_remoting(self) -> str | None: ...


Handler = Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand]]


@dataclass
class AuthProcessor:
    """Users and ACLs of the broker's ``AuthStore``."""

    store: AuthStore
    role: Role | None = None
    """A slave refuses the writes: its users and ACLs are copied from its master."""
    refresh: Callable[[], Awaitable[None]] | None = None
    """A slave's fetch of its master's users and ACLs, now (``MetadataSync.refresh_auth``)."""

    def register(self, table: ProcessorTable) -> None:
        """Put 3001-3010 into ``table``."""
        c = RequestCode
        for code, handler in ((c.AUTH_CREATE_USER, self.create_user), (c.AUTH_UPDATE_USER, self.update_user),
                              (c.AUTH_DELETE_USER, self.delete_user), (c.AUTH_CREATE_ACL, self.put_acl),
                              (c.AUTH_UPDATE_ACL, self.put_acl), (c.AUTH_DELETE_ACL, self.delete_acl)):  # fmt: skip
            table.register(code, self._write(handler))
        for code, handler in ((c.AUTH_GET_USER, self.get_user), (c.AUTH_LIST_USER, self.list_users),
                              (c.AUTH_GET_ACL, self.get_acl), (c.AUTH_LIST_ACL, self.list_acls),
                              (c.GET_ALL_AUTH_METADATA, self.all_auth)):  # fmt: skip
            table.register(code, handler)

    def _write(self, handler: Handler) -> Handler:
        """``handler``, refused on a slave."""

        async def write(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            if self.role is not None and self.role.is_slave:
                if await self._master_holds(conn, cmd):
                    return cmd.response(ResponseCode.SUCCESS, "ACL 2.0: this slave's copy of its master's users "
                                        "and ACLs holds it already")  # fmt: skip
                master = self.role.master_remoting or "its master"
                raise RemotingError(ResponseCode.SERVICE_NOT_AVAILABLE, "ACL 2.0: this broker is a slave: its users "
                                    f"and ACLs are copies of its master's; change them on {master} (mqadmin -b)",
                                    Reason.BROKER_IS_SLAVE)  # fmt: skip
            return await handler(conn, cmd)

        return write

    async def _master_holds(self, conn: Connection, cmd: RemotingCommand) -> bool:
        """Whether the master's users and ACLs (fetched now) already are what the write ``cmd`` asks: it is played
        on a scratch copy (a create of an existing user as its update) and changes nothing, or deletes an ACL entry
        that is not there."""
        try:
            if self.refresh is not None:
                await self.refresh()
        except (ConnectionError, OSError, TimeoutError, RemotingError):
            return False
        scratch = AuthStore(self.store.path, _discard)
        await scratch.replace(self.store.users, self.store.acls)
        before = scratch.document()
        sim, code = AuthProcessor(scratch), cmd.code
        if code == RequestCode.AUTH_CREATE_USER and scratch.user(cmd.ext_fields.get("username") or "") is not None:
            code = RequestCode.AUTH_UPDATE_USER
        handlers: dict[int, Handler] = {
            RequestCode.AUTH_CREATE_USER: sim.create_user, RequestCode.AUTH_UPDATE_USER: sim.update_user,
            RequestCode.AUTH_DELETE_USER: sim.delete_user, RequestCode.AUTH_CREATE_ACL: sim.put_acl,
            RequestCode.AUTH_UPDATE_ACL: sim.put_acl, RequestCode.AUTH_DELETE_ACL: sim.delete_acl,
        }  # fmt: skip
        try:
            await handlers[code](conn, cmd)
        except RemotingError:  # what the master accepted fails here only as a delete of what is gone already
            return code == RequestCode.AUTH_DELETE_ACL and _acl_gone(scratch, cmd)
        return scratch.document() == before

    async def all_auth(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """30023 GET_ALL_AUTH_METADATA: every user and ACL, as ``auth.json`` holds them (a slave's copy)."""
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(self.store.document()))

    def _caller_is_super(self, cmd: RemotingCommand) -> bool:
        name = cmd.ext_fields.get(ACCESS_KEY)
        if not name:  # RocketMQ: no credentials, then authentication is off
            return True
        user = self.store.user(name)
        return user is not None and user.is_super

    def _super_guard(self, cmd: RemotingCommand, what: str) -> None:
        if not self._caller_is_super(cmd):
            raise RemotingError(ResponseCode.NO_PERMISSION, f"ACL 2.0: {what} only a super user may do",
                                Reason.NO_PERMISSION)  # fmt: skip

    @staticmethod
    def _username(cmd: RemotingCommand) -> str:
        try:
            return parse_username(cmd.ext_fields.get("username"))
        except AuthError as e:
            raise _invalid(e) from None

    async def create_user(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """3001, header ``username``, body UserInfo (password needed; userType Normal, userStatus enable when
        absent)."""
        name = self._username(cmd)
        try:
            info = parse_user_info(cmd.body)
            if info.password is None:
                raise AuthError(f"user {name!r}: a new user needs a password")
            user = User(
                name,
                parse_password(info.password, name),
                info.user_type or UserType.NORMAL,
                info.status or UserStatus.ENABLE,
            )
            if user.is_super:
                self._super_guard(cmd, "creating a Super user is what")
            await self.store.create_user(user)
        except AuthError as e:
            raise _invalid(e) from None
        return cmd.response(ResponseCode.SUCCESS)

    async def update_user(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """3002, header ``username``, body UserInfo: the fields given change (the password, type, status)."""
        name = self._username(cmd)

        def check(old: User) -> None:
            if old.is_super or info.user_type is UserType.SUPER:
                self._super_guard(cmd, "changing a Super user is what")

        try:
            info = parse_user_info(cmd.body)
            if info.password is not None:
                parse_password(info.password, name)
            await self.store.update_user(name, info.password, info.user_type, info.status, check)
        except AuthError as e:
            raise _invalid(e) from None
        return cmd.response(ResponseCode.SUCCESS)

    async def delete_user(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """3003, header ``username``: the user and its ACL go (none: success, nothing done)."""
        name = self._username(cmd)

        def check(old: User) -> None:
            if old.is_super:
                self._super_guard(cmd, "deleting a Super user is what")

        await self.store.delete_user(name, check)
        return cmd.response(ResponseCode.SUCCESS)

    async def get_user(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """3004, header ``username``: its UserInfo (no body when there is no such user, as RocketMQ)."""
        user = self.store.user(self._username(cmd))
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(user_info(user)) if user else b"")

    async def list_users(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """3005, header ``filter`` (optional): the users whose name contains it, as a list of UserInfo."""
        text = cmd.ext_fields.get("filter") or ""
        users = [user_info(u) for n, u in sorted(self.store.users.items()) if text in n]
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(users) if users else b"")

    async def put_acl(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """3006 and 3007, header ``subject``, body AclInfo: its entries are added, an entry of a resource the
        policy has replacing it (RocketMQ's create and update both merge)."""
        try:
            name, policies = parse_acl_info(cmd.body, cmd.ext_fields.get("subject"))
            await self.store.merge_acl(name, policies)
        except AuthError as e:
            raise _invalid(e) from None
        return cmd.response(ResponseCode.SUCCESS)

    async def delete_acl(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """3008, headers ``subject``, ``resource`` (absent: the whole ACL) and ``policyType`` (absent: Custom)."""
        f = cmd.ext_fields
        try:
            name = parse_subject(f.get("subject"))
            ptype = PolicyType.parse(f["policyType"], "policyType") if f.get("policyType") else PolicyType.CUSTOM
            resource = parse_resource(f["resource"]) if f.get("resource") else None
            await self.store.delete_acl(name, ptype, resource)
        except AuthError as e:
            raise _invalid(e) from None
        return cmd.response(ResponseCode.SUCCESS)

    async def get_acl(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """3009, header ``subject``: its AclInfo (no body when it has none; 29 when the user does not exist)."""
        try:
            name = parse_subject(cmd.ext_fields.get("subject"))
        except AuthError as e:
            raise _invalid(e) from None
        if self.store.user(name) is None:
            raise _invalid(AuthError(f"the subject User:{name} does not exist"))
        acl = self.store.acl(name)
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(acl_info(acl)) if acl else b"")

    async def list_acls(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """3010, headers ``subjectFilter`` and ``resourceFilter`` (optional): the ACLs whose subject contains the
        one, with their entries whose resource contains the other."""
        subjects = cmd.ext_fields.get("subjectFilter") or ""
        resources = cmd.ext_fields.get("resourceFilter") or ""
        out = []
        for name in sorted(self.store.acls):
            info = acl_info(self.store.acls[name], resources)
            if subjects in info["subject"] and info["policies"]:
                out.append(info)
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(out) if out else b"")
