"""``sievemq acl``: ACL 2.0's users and policies on the brokers (docs/acl2.md, "The sievemq acl commands"), as
RocketMQ's ``mqadmin createUser``/``createAcl`` and their siblings, with mqadmin's option letters: ``acl user
create|update|delete|get|list``, ``acl policy create|update|delete|get|list`` and ``acl migrate plain_acl.yml``.

Each command goes to one broker (``-b host:port``) or to every master of a cluster (``-c NAME``), by default to
every master the name server knows: a broker keeps its own users and ACLs. One broker's refusal does not stop the
others; it is printed on stderr and the command exits 1. A value the broker would refuse (a username, a resource,
an action) is refused before anything is sent (exit 2).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import click

from sievemq.acl.credentials import Credentials, credential_options
from sievemq.cli.admin import _admin
from sievemq.cli.connect import namesrv_option
from sievemq.cli.tls import tls_options
from sievemq.remoting.tls import ClientTls

__all__ = ["COMMANDS", "acl"]

class _Word(click.ParamType):  # type: ignore[type-arg]  # generic from click 8.2 on
    """One of RocketMQ's words in any letter case, given as written (``super`` -> ``Super``); mqadmin's short
    letter and a long name both name the option."""

    def __init__(self, *words: str) -> None:
        self.words = words
        self.name = "|".join(words)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        for w in self.words:
            if str(value).strip().lower() == w.lower():
                return w
        self.fail(f"{value!r} is not one of {', '.join(self.words)}", param, ctx)


_json_option = click.option("--json", "as_json", is_flag=True, help="print JSON (field names: docs/acl2.md)")


def _targets(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--cluster", "-c", default=None, help="every master of this cluster (default: every master)")(f)
    return click.option("--broker", "-b", default=None, help="this broker only (host:port)")(f)


def _split(values: Sequence[str]) -> list[str]:
    """Comma-separated values, as mqadmin takes them (an option given twice adds to the list)."""
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def _checked(fn: Callable[[], Any], param: str) -> Any:
    from sievemq.auth.model import AuthError

    try:
        return fn()
    except AuthError as e:
        raise click.BadParameter(str(e), param_hint=param) from None


def _report(outcome: Any, done: str | None = None) -> None:
    """Print each broker's failure on stderr (and ``done`` with the brokers that did it); exit 1 if any failed."""
    if done and outcome.results:
        click.echo(f"{done} on {', '.join(outcome.results)}")
    for addr, text in outcome.error_texts().items():
        click.echo(f"{addr}: {text}", err=True)
    if outcome.errors:
        sys.exit(1)


def _run(
    namesrv: str,
    credentials: Credentials | None,
    tls: ClientTls | None,
    broker: str | None,
    cluster: str | None,
    fn: Callable[[Any, str], Awaitable[Any]],
    show: Callable[[Any], None],
) -> None:
    """``fn(auth_admin, addr)`` on every target broker, then ``show(outcome)``."""

    async def go(admin: Any) -> None:
        auth = admin.auth()
        targets = await auth.targets(broker, cluster)
        outcome = await auth.each(targets, lambda addr: fn(auth, addr))
        show(outcome)

    _admin(namesrv, go, credentials, tls)


def _common(f: Callable[..., Any]) -> Callable[..., Any]:
    for deco in (tls_options, credential_options, namesrv_option, _targets):
        f = deco(f)
    return f


@click.group()
def acl() -> None:
    """ACL 2.0: the brokers' users and their policies (docs/acl2.md)."""


@acl.group("user")
def user() -> None:
    """Create, change, delete and show ACL 2.0 users."""


def _password(password: str | None, from_stdin: bool, needed: bool) -> str | None:
    if from_stdin:
        if password:
            raise click.UsageError("give the password with --password or --password-stdin, not both")
        text = sys.stdin.readline().rstrip("\r\n")
        if not text:
            raise click.BadParameter("no password on stdin", param_hint="--password-stdin")
        return text
    if needed and not password:
        raise click.UsageError("a new user needs a password: --password/-p, or --password-stdin")
    return password


_password_options = (
    click.option("--password", "-p", default=None, help="the password (visible to `ps`: --password-stdin hides it)"),
    click.option("--password-stdin", is_flag=True, help="read the password from the first line of stdin"),
)


@user.command("create")
@click.option("--username", "-u", required=True, help="the user (its requests' AccessKey)")
@_password_options[0]
@_password_options[1]
@click.option("--user-type", "-t", type=_Word("Super", "Normal"), default=None,
              help="Super may do everything; Normal what its policies allow (default)")  # fmt: skip
@_common
def user_create(username: str, password: str | None, password_stdin: bool, user_type: str | None, namesrv: str,
                broker: str | None, cluster: str | None, credentials: Credentials | None,
                tls: ClientTls | None) -> None:  # fmt: skip
    """Create user -u with password -p (mqadmin createUser)."""
    from sievemq.auth.model import parse_password, parse_username

    name = _checked(lambda: parse_username(username), "--username")
    secret = _password(password, password_stdin, needed=True)
    _checked(lambda: parse_password(secret, name), "--password")
    _run(namesrv, credentials, tls, broker, cluster,
         lambda auth, addr: auth.create_user(addr, name, secret, user_type),
         lambda o: _report(o, f"user {name} created"))  # fmt: skip


@user.command("update")
@click.option("--username", "-u", required=True, help="the user")
@_password_options[0]
@_password_options[1]
@click.option("--user-type", "-t", type=_Word("Super", "Normal"), default=None,
              help="its new type")  # fmt: skip
@click.option("--user-status", "-s", type=_Word("enable", "disable"), default=None,
              help="disable refuses every request of the user")  # fmt: skip
@_common
def user_update(username: str, password: str | None, password_stdin: bool, user_type: str | None,
                user_status: str | None, namesrv: str, broker: str | None, cluster: str | None,
                credentials: Credentials | None, tls: ClientTls | None) -> None:  # fmt: skip
    """Change user -u: its password, type or status, whichever is given (mqadmin updateUser)."""
    from sievemq.auth.model import parse_password, parse_username

    name = _checked(lambda: parse_username(username), "--username")
    secret = _password(password, password_stdin, needed=False)
    if secret is not None:
        _checked(lambda: parse_password(secret, name), "--password")
    if secret is None and user_type is None and user_status is None:
        raise click.UsageError("nothing to change: give --password, --user-type or --user-status")
    _run(namesrv, credentials, tls, broker, cluster,
         lambda auth, addr: auth.update_user(addr, name, secret, user_type, user_status),
         lambda o: _report(o, f"user {name} updated"))  # fmt: skip


@user.command("delete")
@click.option("--username", "-u", required=True, help="the user (its ACL goes too)")
@_common
def user_delete(username: str, namesrv: str, broker: str | None, cluster: str | None,
                credentials: Credentials | None, tls: ClientTls | None) -> None:  # fmt: skip
    """Delete user -u and its ACL (mqadmin deleteUser; a user that does not exist: nothing done)."""
    from sievemq.auth.model import parse_username

    name = _checked(lambda: parse_username(username), "--username")
    _run(namesrv, credentials, tls, broker, cluster, lambda auth, addr: auth.delete_user(addr, name),
         lambda o: _report(o, f"user {name} deleted"))  # fmt: skip


def _user_rows(per_broker: dict[str, list[dict[str, Any]]]) -> list[list[Any]]:
    return [[u.get("username"), u.get("userType"), u.get("userStatus"), addr]
            for addr, users in per_broker.items() for u in users]  # fmt: skip


@user.command("get")
@click.option("--username", "-u", required=True, help="the user")
@_json_option
@_common
def user_get(username: str, as_json: bool, namesrv: str, broker: str | None, cluster: str | None,
             credentials: Credentials | None, tls: ClientTls | None) -> None:  # fmt: skip
    """Show user -u on each broker, never its password (mqadmin getUser); exit 1 when no broker has it."""
    from sievemq.admin.render import echo_json, print_table
    from sievemq.auth.model import parse_username

    name = _checked(lambda: parse_username(username), "--username")

    def show(o: Any) -> None:
        if as_json:
            echo_json(o.to_json())
        else:
            found = {a: [u] for a, u in o.results.items() if u is not None}
            if found:
                print_table(["USERNAME", "TYPE", "STATUS", "BROKER"], _user_rows(found))
        missing = [a for a, u in o.results.items() if u is None]
        if missing and not as_json:
            click.echo(f"user {name} does not exist on {', '.join(missing)}", err=True)
        _report(o)
        if not any(u is not None for u in o.results.values()):
            sys.exit(1)

    _run(namesrv, credentials, tls, broker, cluster, lambda auth, addr: auth.get_user(addr, name), show)


@user.command("list")
@click.option("--filter", "-f", "name_filter", default="", help="only the users whose name contains this")
@_json_option
@_common
def user_list(name_filter: str, as_json: bool, namesrv: str, broker: str | None, cluster: str | None,
              credentials: Credentials | None, tls: ClientTls | None) -> None:  # fmt: skip
    """Every user of each broker, never their passwords (mqadmin listUser)."""
    from sievemq.admin.render import echo_json, print_table

    def show(o: Any) -> None:
        if as_json:
            echo_json(o.to_json())
        else:
            print_table(["USERNAME", "TYPE", "STATUS", "BROKER"], _user_rows(o.results))
        _report(o)

    _run(namesrv, credentials, tls, broker, cluster, lambda auth, addr: auth.list_users(addr, name_filter), show)


# ------------------------------------------------------------------------------------------------ policies
@acl.group("policy")
def policy() -> None:
    """Create, change, delete and show users' policy entries (their ACLs)."""


_policy_type = click.option("--policy-type", type=_Word("Custom", "Default"),
                            default="Custom", show_default=True, help="which policy of the ACL")  # fmt: skip


def _put_command(update: bool) -> click.Command:
    word = "update" if update else "create"

    @click.option("--subject", "-s", required=True, help="whose ACL: User:<username>")
    @click.option("--resources", "-r", multiple=True, required=True,
                  help="Topic:<name>, Group:<name>, Cluster:<name>, a prefix (Topic:ord*) or *; comma-separated")
    @click.option("--actions", "-a", multiple=True, required=True,
                  help="Pub, Sub, Create, Update, Delete, Get, List or All; comma-separated")
    @click.option("--source-ips", "-i", multiple=True, help="only from these addresses or CIDR blocks; comma-separated")
    @click.option("--decision", "-d", type=_Word("Allow", "Deny"), required=True, help="Allow or Deny")
    @_policy_type
    @_common
    def put(subject: str, resources: tuple[str, ...], actions: tuple[str, ...], source_ips: tuple[str, ...],
            decision: str, policy_type: str, namesrv: str, broker: str | None, cluster: str | None,
            credentials: Credentials | None, tls: ClientTls | None) -> None:  # fmt: skip
        from sievemq.admin.auth_ops import acl_body

        body = _checked(lambda: acl_body(subject, _split(resources), _split(actions), decision, _split(source_ips),
                                         policy_type), "--subject/--resources/--actions/--source-ips")  # fmt: skip
        n = len(body["policies"][0]["entries"])
        _run(namesrv, credentials, tls, broker, cluster, lambda auth, addr: auth.put_acl(addr, body, update),
             lambda o: _report(o, f"{n} entr{'y' if n == 1 else 'ies'} of {body['subject']} {word}d"))  # fmt: skip

    put.__doc__ = (f"Add entries to an ACL: one per resource -r, each with actions -a, source addresses -i and "
                   f"decision -d; an entry of a resource the policy has is replaced (mqadmin {word}Acl).")  # fmt: skip
    return click.command(word)(put)


policy.add_command(_put_command(False))
policy.add_command(_put_command(True))


@policy.command("delete")
@click.option("--subject", "-s", required=True, help="whose ACL: User:<username>")
@click.option("--resources", "-r", multiple=True, help="only these resources' entries (default: the whole ACL)")
@click.option("--policy-type", type=_Word("Custom", "Default"), default=None,
              help="the policy of -r's entries (default: Custom)")  # fmt: skip
@_common
def policy_delete(subject: str, resources: tuple[str, ...], policy_type: str | None, namesrv: str,
                  broker: str | None, cluster: str | None, credentials: Credentials | None,
                  tls: ClientTls | None) -> None:  # fmt: skip
    """Delete the entries of resources -r from an ACL, or without -r the whole ACL (mqadmin deleteAcl)."""
    from sievemq.auth.model import parse_resource, parse_subject, subject_key

    who = subject_key(_checked(lambda: parse_subject(subject), "--subject"))
    def key(text: str) -> str:
        return str(_checked(lambda: parse_resource(text).key, "--resources"))

    keys: list[str | None] = [key(r) for r in _split(resources)]

    async def go(auth: Any, addr: str) -> None:
        for resource in keys or [None]:
            await auth.delete_acl(addr, who, resource, policy_type)

    what = f"entries {', '.join(map(str, keys))} of {who}" if keys else f"the ACL of {who}"
    _run(namesrv, credentials, tls, broker, cluster, go, lambda o: _report(o, f"{what} deleted"))


def _acl_rows(per_broker: dict[str, list[dict[str, Any]]]) -> list[list[Any]]:
    return [[info.get("subject"), p.get("policyType"), e.get("resource"), ",".join(e.get("actions") or []),
             ",".join(e.get("sourceIps") or []) or None, e.get("decision"), addr]
            for addr, infos in per_broker.items() for info in infos for p in info.get("policies") or []
            for e in p.get("entries") or []]  # fmt: skip


_ACL_COLUMNS = ["SUBJECT", "POLICY", "RESOURCE", "ACTIONS", "SOURCE IPS", "DECISION", "BROKER"]


@policy.command("get")
@click.option("--subject", "-s", required=True, help="whose ACL: User:<username>")
@_json_option
@_common
def policy_get(subject: str, as_json: bool, namesrv: str, broker: str | None, cluster: str | None,
               credentials: Credentials | None, tls: ClientTls | None) -> None:  # fmt: skip
    """Show a user's ACL on each broker (mqadmin getAcl)."""
    from sievemq.admin.render import echo_json, print_table
    from sievemq.auth.model import parse_subject, subject_key

    who = subject_key(_checked(lambda: parse_subject(subject), "--subject"))

    def show(o: Any) -> None:
        if as_json:
            echo_json(o.to_json())
        else:
            print_table(_ACL_COLUMNS, _acl_rows({a: [i] for a, i in o.results.items() if i is not None}))
            empty = [a for a, i in o.results.items() if i is None]
            if empty:
                click.echo(f"{who} has no policy entries on {', '.join(empty)}", err=True)
        _report(o)

    _run(namesrv, credentials, tls, broker, cluster, lambda auth, addr: auth.get_acl(addr, who), show)


@policy.command("list")
@click.option("--subject", "-s", "subject_filter", default="", help="only subjects containing this")
@click.option("--resource", "-r", "resource_filter", default="", help="only entries whose resource contains this")
@_json_option
@_common
def policy_list(subject_filter: str, resource_filter: str, as_json: bool, namesrv: str, broker: str | None,
                cluster: str | None, credentials: Credentials | None, tls: ClientTls | None) -> None:  # fmt: skip
    """Every ACL of each broker, one line per entry (mqadmin listAcl)."""
    from sievemq.admin.render import echo_json, print_table

    def show(o: Any) -> None:
        if as_json:
            echo_json(o.to_json())
        else:
            print_table(_ACL_COLUMNS, _acl_rows(o.results))
        _report(o)

    _run(namesrv, credentials, tls, broker, cluster,
         lambda auth, addr: auth.list_acls(addr, subject_filter, resource_filter), show)  # fmt: skip


# ------------------------------------------------------------------------------------------------ migrate
@acl.command("migrate")
@click.argument("acl_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--apply", "apply_it", is_flag=True, help="create the users and their policies on the brokers")
@_json_option
@_common
def migrate_cmd(acl_file: Path, apply_it: bool, as_json: bool, namesrv: str, broker: str | None,
                cluster: str | None, credentials: Credentials | None, tls: ClientTls | None) -> None:  # fmt: skip
    """Print the ACL 2.0 users and policies the accounts of plain ACL file ACL_FILE become (as the broker's
    migrateAuthFromV1Enabled does: docs/acl2.md §7); with --apply, create them on the brokers through the admin
    codes (a user a broker has already is left as it is). Passwords are never printed."""
    from sievemq.acl.loader import load_file
    from sievemq.admin.auth_ops import migration_plan, plan_json
    from sievemq.admin.render import echo_json, print_table
    from sievemq.errors import SieveError

    try:
        rules = load_file(acl_file)
    except SieveError as e:
        raise click.ClickException(str(e)) from None
    users, acls, notes = migration_plan(rules)
    plan = plan_json(users, acls, notes)
    if not apply_it:
        if as_json:
            echo_json(plan)
            return
        print_table(["USERNAME", "TYPE", "STATUS"], [[u["username"], u["userType"], u["userStatus"]]
                                                      for u in plan["users"]], title="users")  # fmt: skip
        print_table(_ACL_COLUMNS[:-1], [r[:-1] for r in _acl_rows({"": plan["acls"]})], title="policies")
        for note in notes:
            click.echo(note, err=True)
        return

    def show(o: Any) -> None:
        if as_json:
            echo_json({**plan, **o.to_json()})
        else:
            for addr, r in o.results.items():
                click.echo(f"{addr}: created {', '.join(r['created']) or 'no user'}"
                           + (f"; already there: {', '.join(r['existing'])}" if r["existing"] else ""))  # fmt: skip
            for note in notes:
                click.echo(note, err=True)
        _report(o)

    _run(namesrv, credentials, tls, broker, cluster,
         lambda auth, addr: auth.apply_migration(addr, users, acls), show)  # fmt: skip


COMMANDS = [acl]
