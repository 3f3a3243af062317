"""The ``-n/--namesrv`` option every client and admin command takes, defined once: its default, its environment
variable (shown in each ``--help``), and the banner line that points the CLI at a name server elsewhere."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from sievemq.client.errors import NotANameServerError
    from sievemq.client.options import ClientOptions

DEFAULT_NAMESRV = "127.0.0.1:9876"
"""Where the CLI looks for a name server when neither ``-n`` nor ``$SIEVEMQ_NAMESRV`` says (``sievemq dev``'s)."""
NAMESRV_ENV = "SIEVEMQ_NAMESRV"

namesrv_option = click.option(
    "--namesrv",
    "-n",
    default=DEFAULT_NAMESRV,
    envvar=NAMESRV_ENV,
    show_envvar=True,
    show_default=True,
    help="name server address(es), ';'-separated",
)
"""``-n/--namesrv``: ``--help`` shows ``[env var: SIEVEMQ_NAMESRV; default: 127.0.0.1:9876]``."""


def export_line(namesrv_addr: str) -> str | None:
    """The shell line that points later CLI commands at ``namesrv_addr`` (``export SIEVEMQ_NAMESRV=...``), or None
    when the CLI finds it without one (it is the default)."""
    if namesrv_addr == DEFAULT_NAMESRV:
        return None
    return f"export {NAMESRV_ENV}={namesrv_addr}"


async def wrong_namesrv(options: ClientOptions) -> NotANameServerError | None:
    """After a client command failed to get an answer from its name servers: the first address of ``-n`` that is
    not a name server (a broker, an HTTP port), each asked once with a name server request; None when each is one
    or cannot be told (unreachable). The admin client tells addresses apart itself (``AdminClient._namesrv_call``);
    the producer and consumer take a broker's refusal for the name server's answer."""
    from sievemq.admin.api import AdminClient
    from sievemq.client.errors import NotANameServerError
    from sievemq.client.options import parse_namesrv
    from sievemq.protocol.names import AUTO_CREATE_TOPIC_KEY
    from sievemq.remoting.tls import ClientTls

    tls = None
    if options.tls:
        tls = ClientTls(ca_file=options.tls_ca_file or "", cert_file=options.tls_cert_file or "",
                        key_file=options.tls_key_file or "", verify=options.tls_verify)  # fmt: skip
    for addr in parse_namesrv(options.namesrv):
        async with AdminClient(addr, timeout=options.request_timeout, access_key=options.access_key,
                               secret_key=options.secret_key, tls=tls) as admin:  # fmt: skip
            try:
                await admin.route(AUTO_CREATE_TOPIC_KEY)
            except NotANameServerError as e:
                return e
            except Exception:  # a name server after all (its own refusal), or unreachable: not told apart here
                pass
    return None
