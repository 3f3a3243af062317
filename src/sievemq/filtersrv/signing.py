"""Upload signing and the class CRC: pure standard library, importable by clients as well as the filter server.

An uploaded filter function is accepted only with an HMAC-SHA256 signature over::

    consumerGroup + "\\n" + topic + "\\n" + className + "\\n" + source

keyed with a secret shared by the filter server (``uploadSecret``) and the client, sent hex-encoded in the
``Signature`` extField together with ``AccessKey`` (an account the filter server lists in ``uploadAccounts``).
"""

from __future__ import annotations

import hashlib
import hmac
import zlib

__all__ = [
    "ACCESS_KEY_FIELD",
    "SIGNATURE_FIELD",
    "filter_class_crc",
    "sign_upload",
    "signed_fields",
    "verify_upload",
]

SIGNATURE_FIELD = "Signature"
"""extField carrying the hex HMAC-SHA256 of an upload."""
ACCESS_KEY_FIELD = "AccessKey"
"""extField naming the account that signed an upload."""


def _bytes(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def filter_class_crc(source: str | bytes) -> int:
    """``classCRC`` of REGISTER_MESSAGE_FILTER_CLASS: CRC32 of the UTF-8 source, masked with 0x7FFFFFFF.

    For a named function (empty body) the filter server does not check the CRC; clients conventionally send
    the CRC of the ``module:function`` name so that a change of name is a change of CRC.
    """
    return zlib.crc32(_bytes(source)) & 0x7FFFFFFF


def _message(group: str, topic: str, class_name: str, source: str | bytes) -> bytes:
    return f"{group}\n{topic}\n{class_name}\n".encode() + _bytes(source)


def sign_upload(secret: str | bytes, group: str, topic: str, class_name: str, source: str | bytes) -> str:
    """The hex HMAC-SHA256 signature of an upload."""
    return hmac.new(_bytes(secret), _message(group, topic, class_name, source), hashlib.sha256).hexdigest()


def verify_upload(
    secret: str | bytes, group: str, topic: str, class_name: str, source: str | bytes, signature: str
) -> bool:
    """True when ``signature`` is the upload's signature under ``secret`` (constant-time comparison).

    An empty secret never verifies: a filter server without a secret accepts no upload.
    """
    if not secret or not signature:
        return False
    expected = sign_upload(secret, group, topic, class_name, source)
    return hmac.compare_digest(expected, signature.strip().lower())


def signed_fields(
    access_key: str, secret: str | bytes, group: str, topic: str, class_name: str, source: str | bytes
) -> dict[str, str]:
    """The extFields a client adds to its 302 request to have an upload accepted."""
    return {
        ACCESS_KEY_FIELD: access_key,
        SIGNATURE_FIELD: sign_upload(secret, group, topic, class_name, source),
    }
