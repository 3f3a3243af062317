"""Upload signing and the class CRC: pure standard library, importable by clients as well as the filter server.

An uploaded filter function is accepted only with an HMAC-SHA256 signature, keyed with a secret shared by the
filter server (``uploadSecret``) and the client, over ``SIGNING_TAG`` and then these fields, each as a 4-byte
big-endian length followed by its bytes (UTF-8 for text, the body as sent for the source)::

    uploadAccessKey, consumerGroup, topic, className, filter server address (ip:port), uploadTimestamp, uploadNonce,
    source

With every field length-prefixed, no two different requests have the same signed content: a character cannot move
from one field into its neighbour. The timestamp (milliseconds since the epoch) and the random nonce let the filter
server refuse a request replayed later or twice (``replay.NonceWindow``); the address binds the request to the one
filter server it was sent to. The field names are not RocketMQ's ACL ones (``AccessKey``, ``Signature``), so a
client that also signs its requests for the ACL does not overwrite them. docs/protocol/filter-server.md §5.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import struct
import time
import zlib
from dataclasses import dataclass

__all__ = [
    "ACCESS_KEY_FIELD",
    "NONCE_FIELD",
    "SIGNATURE_FIELD",
    "SIGNING_TAG",
    "TIMESTAMP_FIELD",
    "Upload",
    "filter_class_crc",
    "is_signature",
    "parse_nonce",
    "parse_timestamp",
    "sign_upload",
    "signed_fields",
    "verify_upload",
]

ACCESS_KEY_FIELD = "uploadAccessKey"
"""extField naming the account that signed an upload."""
SIGNATURE_FIELD = "uploadSignature"
"""extField carrying the hex HMAC-SHA256 of an upload."""
TIMESTAMP_FIELD = "uploadTimestamp"
"""extField: when the client signed the upload, in milliseconds since the epoch (decimal digits)."""
NONCE_FIELD = "uploadNonce"
"""extField: a random value the client never uses twice (16 to 64 of ``A-Z a-z 0-9 _ -``)."""
SIGNING_TAG = b"sievemq-filter-upload-v2"
"""What the signed content starts with (length-prefixed too): no other sievemq signature has it."""

_LEN = struct.Struct(">I")
_HEX_SIGNATURE = re.compile(r"[0-9a-fA-F]{64}")
_NONCE = re.compile(r"[A-Za-z0-9_-]{16,64}")
_TIMESTAMP = re.compile(r"[0-9]{1,16}")


def _bytes(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def filter_class_crc(source: str | bytes) -> int:
    """``classCRC`` of REGISTER_MESSAGE_FILTER_CLASS: CRC32 of the UTF-8 source, masked with 0x7FFFFFFF.

    For a named function (empty body) the filter server does not check the CRC; clients conventionally send
    the CRC of the ``module:function`` name so that a change of name is a change of CRC.
    """
    return zlib.crc32(_bytes(source)) & 0x7FFFFFFF


@dataclass(frozen=True)
class Upload:
    """Everything an upload's signature covers."""

    access_key: str
    group: str
    topic: str
    class_name: str
    filter_server: str
    """The address (``ip:port``, as routes list it) of the filter server the request is sent to."""
    timestamp_ms: int
    nonce: str
    source: bytes

    def content(self) -> bytes:
        """The signed bytes: the tag, then each field as a 4-byte big-endian length and its bytes."""
        fields = (
            SIGNING_TAG,
            self.access_key.encode(),
            self.group.encode(),
            self.topic.encode(),
            self.class_name.encode(),
            self.filter_server.encode(),
            str(self.timestamp_ms).encode(),
            self.nonce.encode(),
            self.source,
        )
        return b"".join(_LEN.pack(len(f)) + f for f in fields)


def sign_upload(secret: str | bytes, upload: Upload) -> str:
    """The hex HMAC-SHA256 signature of ``upload``."""
    return hmac.new(_bytes(secret), upload.content(), hashlib.sha256).hexdigest()


def is_signature(value: str) -> bool:
    """True for 64 ASCII hexadecimal digits (the only form a signature may have)."""
    return _HEX_SIGNATURE.fullmatch(value) is not None


def parse_timestamp(value: str) -> int | None:
    """``uploadTimestamp`` as milliseconds, or None when it is not 1 to 16 ASCII digits."""
    return int(value) if _TIMESTAMP.fullmatch(value) else None


def parse_nonce(value: str) -> str | None:
    """``uploadNonce`` when well formed, else None."""
    return value if _NONCE.fullmatch(value) else None


def verify_upload(secret: str | bytes, upload: Upload, signature: str) -> bool:
    """True when ``signature`` is ``upload``'s signature under ``secret`` (constant-time comparison).

    An empty secret never verifies (a filter server without a secret accepts no upload), nor does a signature that
    is not 64 hexadecimal digits.
    """
    if not secret or not is_signature(signature):
        return False
    return hmac.compare_digest(sign_upload(secret, upload).encode(), signature.lower().encode())


def signed_fields(
    access_key: str,
    secret: str | bytes,
    group: str,
    topic: str,
    class_name: str,
    source: str | bytes,
    filter_server: str,
    *,
    timestamp_ms: int | None = None,
    nonce: str | None = None,
) -> dict[str, str]:
    """The extFields a client adds to a 302 request sent to ``filter_server`` to have an upload accepted.

    Each call signs with the current time and a fresh nonce: a request sent again needs new fields.
    """
    upload = Upload(
        access_key,
        group,
        topic,
        class_name,
        filter_server,
        int(time.time() * 1000) if timestamp_ms is None else timestamp_ms,
        secrets.token_hex(16) if nonce is None else nonce,
        _bytes(source),
    )
    return {
        ACCESS_KEY_FIELD: access_key,
        TIMESTAMP_FIELD: str(upload.timestamp_ms),
        NONCE_FIELD: upload.nonce,
        SIGNATURE_FIELD: sign_upload(secret, upload),
    }
