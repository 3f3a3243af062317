"""Where command-line clients find their keys: flags, then AK/SK, then a profile of the credentials file."""

from __future__ import annotations

from pathlib import Path

import pytest

from sievemq.acl.credentials import resolve_credentials
from sievemq.errors import ConfigError


def test_precedence(tmp_path: Path) -> None:
    f = tmp_path / "credentials"
    f.write_text(
        '[default]\naccess_key = "fromfile"\nsecret_key = "s1"\n[prod]\naccessKey = "prodak"\nsecretKey = "s2"\n'
    )
    env = {"SIEVEMQ_CREDENTIALS_FILE": str(f)}
    assert resolve_credentials(env=env).access_key == "fromfile"  # type: ignore[union-attr]
    assert resolve_credentials(profile="prod", env=env).access_key == "prodak"  # type: ignore[union-attr]
    assert resolve_credentials(env={**env, "SIEVEMQ_PROFILE": "prod"}).secret_key == "s2"  # type: ignore[union-attr]
    assert resolve_credentials(env={**env, "AK": "envak", "SK": "e"}).access_key == "envak"  # type: ignore[union-attr]
    flags = resolve_credentials("flagak", "f", env={**env, "AK": "envak", "SK": "e"})
    assert flags is not None and (flags.access_key, flags.secret_key, flags.source) == (
        "flagak",
        "f",
        "the command line",
    )
    assert "f'" not in repr(flags) and "secret" not in repr(flags)


def test_nothing_configured_means_unsigned(tmp_path: Path) -> None:
    assert resolve_credentials(env={"SIEVEMQ_CREDENTIALS_FILE": str(tmp_path / "none")}) is None


@pytest.mark.parametrize(
    ("kwargs", "text", "message"),
    [
        ({"access_key": "ak"}, None, "go together"),
        ({"profile": "nope"}, '[default]\naccess_key = "a"\nsecret_key = "b"\n', r"no profile \[nope\]"),
        ({"profile": "x"}, None, "does not exist"),
        ({}, '[default]\naccess_key = "a"\n', "needs both"),
        ({}, "[default\n", "credentials file"),
    ],
)
def test_errors(tmp_path: Path, kwargs: dict[str, str], text: str | None, message: str) -> None:
    f = tmp_path / "credentials"
    if text is not None:
        f.write_text(text)
    with pytest.raises(ConfigError, match=message):
        resolve_credentials(**kwargs, env={"SIEVEMQ_CREDENTIALS_FILE": str(f)})  # type: ignore[arg-type]
