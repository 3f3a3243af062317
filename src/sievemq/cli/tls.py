"""The command-line clients' TLS options (docs/protocol/tls.md §5): ``--tls``, ``--tls-ca-file``, ``--tls-cert-file``,
``--tls-key-file`` and ``--no-tls-verify`` (named like the fields of ``sievemq.ClientOptions``; ``--tls-ca``,
``--tls-cert``, ``--tls-key`` and ``--tls-insecure`` are the same), or ``SIEVEMQ_TLS=1``, ``SIEVEMQ_TLS_CA``,
``SIEVEMQ_TLS_CERT``, ``SIEVEMQ_TLS_KEY`` and ``SIEVEMQ_TLS_INSECURE=1``. Any of the others turns TLS on, as
``--tls`` does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from sievemq.remoting.tls import ClientTls, TlsFileError

F = TypeVar("F", bound=Callable[..., Any])


def client_tls(
    tls: bool, ca: str | None = None, cert: str | None = None, key: str | None = None, insecure: bool = False
) -> ClientTls | None:
    """The TLS the options ask for (None: plain TCP); TlsFileError when a file does not load."""
    if not (tls or ca or cert or key or insecure):
        return None
    settings = ClientTls(ca_file=ca or "", cert_file=cert or "", key_file=key or "", verify=not insecure)
    settings.context()  # fail here, before anything connects
    return settings


def client_kwargs(tls: ClientTls | None) -> dict[str, Any]:
    """The TLS fields of ``ClientOptions`` (keyword arguments of the clients too) for ``tls`` (none: plain TCP)."""
    if tls is None:
        return {}
    return {
        "tls": True,
        "tls_ca_file": tls.ca_file or None,
        "tls_cert_file": tls.cert_file or None,
        "tls_key_file": tls.key_file or None,
        "tls_verify": tls.verify,
    }


def tls_options(f: F) -> F:
    """Click options for TLS; the command gets ``tls`` (``ClientTls`` or None)."""
    import click

    @functools.wraps(f)
    def wrapper(
        *args: Any,
        use_tls: bool,
        tls_ca: str | None,
        tls_cert: str | None,
        tls_key: str | None,
        tls_insecure: bool,
        **kw: Any,
    ) -> Any:
        try:
            settings = client_tls(use_tls, tls_ca, tls_cert, tls_key, tls_insecure)
        except TlsFileError as e:
            raise click.ClickException(f"TLS: {e}") from None
        return f(*args, tls=settings, **kw)

    path = click.Path(exists=True, dir_okay=False)
    options = (
        click.option(
            "--no-tls-verify",
            "--tls-insecure",
            "tls_insecure",
            is_flag=True,
            envvar="SIEVEMQ_TLS_INSECURE",
            help="TLS without verifying the server's certificate or name (self-signed development certificates "
            "only; $SIEVEMQ_TLS_INSECURE)",
        ),
        click.option(
            "--tls-key-file",
            "--tls-key",
            "tls_key",
            type=path,
            envvar="SIEVEMQ_TLS_KEY",
            help="PEM key of --tls-cert-file ($SIEVEMQ_TLS_KEY)",
        ),
        click.option(
            "--tls-cert-file",
            "--tls-cert",
            "tls_cert",
            type=path,
            envvar="SIEVEMQ_TLS_CERT",
            help="PEM client certificate, for servers that require one ($SIEVEMQ_TLS_CERT)",
        ),
        click.option(
            "--tls-ca-file",
            "--tls-ca",
            "tls_ca",
            type=path,
            envvar="SIEVEMQ_TLS_CA",
            help="PEM certificates trusted to sign the servers' (default: the system's; $SIEVEMQ_TLS_CA)",
        ),
        click.option("--tls", "use_tls", is_flag=True, envvar="SIEVEMQ_TLS", help="connect over TLS ($SIEVEMQ_TLS=1)"),
    )
    out: Any = wrapper
    for option in options:
        out = option(out)
    return cast(F, out)
