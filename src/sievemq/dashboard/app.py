"""The dashboard's HTTP side: the ``/api/...`` handlers, the static page and the headers every answer carries
(docs/dashboard.md §2, §5).

Handlers check their parameters (``params.Query``), ask ``DashboardData`` and answer JSON; a refusal is JSON with
a status and a stable ``reason`` (``errors.py``), never a stack trace. The page's files are served from a fixed
list (no path from a request ever reaches the file system). Every answer carries a strict Content-Security-Policy
(scripts and styles from this origin only, no inline code, no frames), ``X-Content-Type-Options: nosniff``,
``Referrer-Policy: no-referrer`` and ``Cache-Control: no-store``; with a loopback listen address, a request whose
``Host`` is not a loopback name is refused (a web page elsewhere cannot read the API by rebinding a DNS name).

With logins (an ``Authenticator``), every ``/api/`` request names its user by a bearer token (§5), checked before
anything else is; each endpoint declares what it ``Reads``, and a user who may not read message contents gets
messages without them (``MESSAGES``) or a 403 (``CONTENT``). The page's own files need no login: they hold no data.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Awaitable, Callable
from enum import Enum
from importlib import resources
from typing import Any

import orjson
from aiohttp import web

from sievemq.admin.messages import FIND_MAX
from sievemq.admin.time_search import TIME_SEARCH_MAX
from sievemq.dashboard.access import WRITE_MAX_BYTES, check_same_origin, parse_write
from sievemq.dashboard.auth import Authenticator
from sievemq.dashboard.errors import ApiError, ApiReason, bad_parameter, error_of
from sievemq.dashboard.params import EXPRESSION_MAX, Query, check_expression
from sievemq.dashboard.service import LIST_MAX, DashboardData
from sievemq.dashboard.users import OPEN, Role, User
from sievemq.dashboard.views import trace_view, with_content

__all__ = ["SECURITY_HEADERS", "STATIC_FILES", "Reads", "dashboard_routes"]

log = logging.getLogger(__name__)

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
"""Headers on every answer of the dashboard (page and API)."""

STATIC_FILES = {
    "index.html": "text/html",
    "app.js": "text/javascript",
    "login.js": "text/javascript",
    "views.js": "text/javascript",
    "access.js": "text/javascript",
    "trace.js": "text/javascript",
    "dom.js": "text/javascript",
    "style.css": "text/css",
    "favicon.svg": "image/svg+xml",
}
"""The page's files (``sievemq/dashboard/static/``) and their types: nothing else is served."""

REQUEST_TIMEOUT_S = 60.0
"""Longest one API answer may take (every admin request has its own, shorter timeout)."""
_EXPLAIN_LAST_MAX = 100_000
_LOOPBACK_NAMES = {"localhost", "localhost.", "ip6-localhost"}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Answer = Callable[[Query, User], Awaitable[Any]]


class Reads(Enum):
    """What an endpoint's answer holds, for who may ask it (docs/dashboard.md §5)."""

    STATE = "state"
    """The cluster's state: names, counts, offsets, subscriptions. Every user."""
    MESSAGES = "messages"
    """Messages: a user who may not read contents gets them without bodies and property values."""
    CONTENT = "content"
    """Message contents, or what reveals them (explain evaluates selectors over properties and shows samples):
    403 BODY_NOT_ALLOWED to a user who may not read them."""


def _loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_of(header: str) -> str:
    """The host part of a ``Host`` header (``[::1]:8080`` -> ``::1``)."""
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json",
                        headers=SECURITY_HEADERS)  # fmt: skip


def _error(err: ApiError) -> web.Response:
    response = _json(err.to_json(), err.status)
    response.headers.update(err.headers)
    return response


class _Api:
    """The handlers, over one ``DashboardData``."""

    def __init__(self, data: DashboardData, listen_host: str, auth: Authenticator | None) -> None:
        self.data = data
        self.auth = auth
        self.local_only = _loopback(listen_host) if listen_host else False
        self.gate = asyncio.Semaphore(4)
        """API answers computed at once; more wait (a page refreshing in many tabs does not flood the brokers)."""

    def guard(self, request: web.Request) -> ApiError | None:
        """403 when a loopback-only dashboard is asked under a name that is not loopback."""
        if self.local_only and not _loopback(_host_of(request.headers.get("Host", ""))):
            return ApiError(403, "HOST_NOT_ALLOWED", "this dashboard listens on a loopback address: open it as "
                            "http://127.0.0.1:PORT/ or http://localhost:PORT/")  # fmt: skip
        return None

    def user(self, request: web.Request) -> User:
        """Who asks (``OPEN`` without logins); ``ApiError`` 401 or 429 refusing the request."""
        if self.auth is None:
            return OPEN
        return self.auth.user(request.headers.get("Authorization"), request.remote)

    def endpoint(self, answer: Answer, reads: Reads) -> Handler:
        """A GET handler: the Host check, the login, then ``answer(query, user)`` gives the JSON (``reads`` says
        what it holds); refusals and failures become error answers."""

        async def handle(request: web.Request) -> web.StreamResponse:
            refused = self.guard(request)
            if refused is not None:
                return _error(refused)
            try:
                user = self.user(request)
            except ApiError as e:
                return _error(e)
            if reads is Reads.CONTENT and not user.read_bodies:
                return _error(ApiError(403, ApiReason.BODY_NOT_ALLOWED, f"user {user.name} may not read message "
                                       "bodies and property values, which this shows (readBodies in the users "
                                       "file)"))  # fmt: skip
            try:
                async with self.gate, asyncio.timeout(REQUEST_TIMEOUT_S):
                    body = await answer(Query(request.query.items()), user)
                return _json(with_content(body, user.read_bodies) if reads is Reads.MESSAGES else body)
            except Exception as e:
                return self.failed(request, e)

        return handle

    @staticmethod
    def failed(request: web.Request, e: Exception) -> web.Response:
        """The error answer of a failure while answering (a bug: 500, logged with its stack)."""
        if isinstance(e, TimeoutError):
            return _error(ApiError(502, ApiReason.BROKER_ERROR, f"no answer within {REQUEST_TIMEOUT_S:.0f} s: the "
                                   "cluster is slow or a broker does not answer"))  # fmt: skip
        err = error_of(e)
        if err is None:
            log.exception("dashboard %s failed", request.path)
            err = ApiError(500, "INTERNAL_ERROR", "the dashboard failed to answer (its log says why)")
        return _error(err)

    async def write_access(self, request: web.Request) -> web.StreamResponse:
        """``POST /api/access`` (docs/dashboard.md §9): the Host check, the login, the same-origin check, an admin
        only, then the checked body's change on every master."""
        refused = self.guard(request)
        if refused is not None:
            return _error(refused)
        try:
            user = self.user(request)
            crossed = check_same_origin(request.content_type, request.headers, request.host)
            if crossed is not None:
                raise crossed
            if self.auth is None and not self.local_only:
                raise ApiError(403, ApiReason.WRITES_NEED_LOGINS, "this dashboard has no logins and listens beyond "
                               "loopback: changing users and policies needs logins (authEnable)")  # fmt: skip
            if user.role is not Role.ADMIN:
                raise ApiError(403, ApiReason.ADMIN_REQUIRED, f"user {user.name} is a viewer: only a dashboard admin "
                               "changes users and policies")  # fmt: skip
            if request.query:
                raise bad_parameter(next(iter(request.query))[:64], "a write takes its fields in its JSON body")
            if (request.content_length or 0) > WRITE_MAX_BYTES:
                raise bad_parameter("body", f"longer than {WRITE_MAX_BYTES} bytes")
            body = await request.read()  # aiohttp refuses a body past client_max_size (1 MiB) by itself
            action, args = parse_write(body)
        except ApiError as e:
            return _error(e)
        try:
            async with self.gate, asyncio.timeout(REQUEST_TIMEOUT_S):
                return _json(await self.data.access_write(action, args, user.name))
        except Exception as e:
            return self.failed(request, e)

    # ------------------------------------------------------------------------------------------ endpoints
    async def info(self, q: Query, user: User) -> Any:
        q.done()
        auth: dict[str, Any] = {"enabled": self.auth is not None}
        if self.auth is not None:
            auth["user"] = user.to_json()
        return {**self.data.info(), "auth": auth}

    async def cluster(self, q: Query, user: User) -> Any:
        q.done()
        return await self.data.cluster()

    async def topics(self, q: Query, user: User) -> Any:
        system, limit = q.take_bool("system"), q.take_int("limit", 500, 1, LIST_MAX)
        after = q.take_after()
        q.done()
        return await self.data.topics(system, limit, after)

    async def topic(self, q: Query, user: User) -> Any:
        topic = q.take_topic()
        q.done()
        return await self.data.topic(topic)

    async def groups(self, q: Query, user: User) -> Any:
        system, limit = q.take_bool("system"), q.take_int("limit", 500, 1, LIST_MAX)
        after = q.take_after()
        q.done()
        return await self.data.groups(system, limit, after)

    async def group(self, q: Query, user: User) -> Any:
        group = q.take_group()
        q.done()
        return await self.data.group(group)

    async def by_id(self, q: Query, user: User) -> Any:
        msg_id, topic = q.take_msg_id(), q.take_optional_topic()
        q.done()
        return await self.data.by_id(msg_id, topic)

    async def by_key(self, q: Query, user: User) -> Any:
        topic, key = q.take_topic(), q.take_key()
        begin = q.take_time("begin", 0)
        end = q.take_time("end", -1)
        limit = q.take_int("limit", 64, 1, FIND_MAX)
        q.done()
        return await self.data.by_key(topic, key, begin, None if end < 0 else end, limit)

    async def by_time(self, q: Query, user: User) -> Any:
        topic, begin, end = q.take_topic(), q.take_time("begin"), q.take_time("end")
        limit = q.take_int("limit", 100, 1, TIME_SEARCH_MAX)
        q.done()
        if end < begin:
            raise ApiError(400, ApiReason.INVALID_PARAMETER, "parameter end: before begin", parameter="end")
        return await self.data.by_time(topic, begin, end, limit)

    async def message(self, q: Query, user: User) -> Any:
        msg_id, topic = q.take_msg_id(), q.take_optional_topic()
        q.done()
        return await self.data.message(msg_id, topic)

    async def explain(self, q: Query, user: User) -> Any:
        topic = q.take_topic()
        kind = q.take_choice("type", ("SQL92", "TAG"), "SQL92")
        expression = q.take_text("expression", EXPRESSION_MAX)
        last = q.take_int("last", 1000, 1, _EXPLAIN_LAST_MAX)
        q.done()
        check_expression(kind, expression)
        return await self.data.explain(topic, kind, expression, last)

    async def access(self, q: Query, user: User) -> Any:
        q.done()
        return {**await self.data.access(), "canWrite": user.role is Role.ADMIN}

    async def trace(self, q: Query, user: User) -> Any:
        msg_id, topic = q.take_msg_id(), q.take_optional_topic()
        trace_topic = q.take_optional_topic("traceTopic") or "RMQ_SYS_TRACE_TOPIC"
        group = q.take_optional_group()
        q.done()
        return trace_view(await self.data.trace(msg_id, topic, trace_topic, group), user.read_bodies)

    async def unknown(self, request: web.Request) -> web.StreamResponse:
        refused = self.guard(request)
        if refused is not None:
            return _error(refused)
        try:
            self.user(request)
        except ApiError as e:
            return _error(e)
        return _error(ApiError(404, ApiReason.NOT_FOUND, f"no API endpoint {request.path[:200]} (docs/dashboard.md "
                               "lists them)"))  # fmt: skip

    # ------------------------------------------------------------------------------------------ the page
    async def static(self, request: web.Request) -> web.StreamResponse:
        refused = self.guard(request)
        if refused is not None:
            return _error(refused)
        name = request.match_info.get("name") or "index.html"
        kind = STATIC_FILES.get(name)
        if kind is None:
            raise web.HTTPNotFound(headers=SECURITY_HEADERS)
        body = resources.files("sievemq.dashboard").joinpath("static", name).read_bytes()
        return web.Response(body=body, content_type=kind, charset="utf-8" if kind.startswith("text") else None,
                            headers=SECURITY_HEADERS)  # fmt: skip


def dashboard_routes(data: DashboardData, listen_host: str, auth: Authenticator | None = None) -> list[web.RouteDef]:
    """The dashboard's routes (mount them with ``HttpServer.add_routes`` before it starts): ``/`` and its files,
    ``/api/...`` (GET, and ``POST /api/access`` for ACL 2.0 changes by admins). ``listen_host``: where the HTTP
    port listens (loopback: loopback names only). ``auth``: the logins every ``/api/`` request needs (None: none;
    a warning unless on loopback)."""
    if auth is None and not _loopback(listen_host):
        log.warning("the dashboard listens on %s without logins: anyone who reaches it reads every topic's "
                    "messages; set authEnable true with a usersFile (docs/dashboard.md §5)",
                    listen_host or "every interface")  # fmt: skip
    api = _Api(data, listen_host, auth)
    endpoints: dict[str, tuple[Answer, Reads]] = {
        "info": (api.info, Reads.STATE),
        "cluster": (api.cluster, Reads.STATE),
        "topics": (api.topics, Reads.STATE),
        "topic": (api.topic, Reads.STATE),
        "groups": (api.groups, Reads.STATE),
        "group": (api.group, Reads.STATE),
        "messages/by-id": (api.by_id, Reads.MESSAGES),
        "messages/by-key": (api.by_key, Reads.MESSAGES),
        "messages/by-time": (api.by_time, Reads.MESSAGES),
        "message": (api.message, Reads.MESSAGES),
        "explain": (api.explain, Reads.CONTENT),
        "access": (api.access, Reads.STATE),
        "trace": (api.trace, Reads.STATE),  # a viewer without readBodies: property values hidden (trace_view)
    }
    routes = [web.get(f"/api/{path}", api.endpoint(fn, reads), allow_head=False)
              for path, (fn, reads) in endpoints.items()]  # fmt: skip
    routes.append(web.post("/api/access", api.write_access))  # the one write (§9): admins, same origin, JSON
    routes.append(web.get("/api/{tail:.*}", api.unknown, allow_head=False))
    routes.append(web.get("/", api.static))
    routes.append(web.get("/{name:[a-z]+\\.(?:html|js|css|svg)}", api.static))
    return routes
