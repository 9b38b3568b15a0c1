"""A source's secrets (an IMAP password, a token) encrypted with the server's signing secret.

Fernet (AES-128-CBC with HMAC-SHA256, from ``cryptography``) under a key derived from the signing secret by
HKDF, so the one secret operators already keep (``CALYPSO_SIGNING_SECRET``, or the random one in the data
directory) also guards these; processes sharing a PostgreSQL database must share it, as they do for links.
"""

from __future__ import annotations

import base64
import json

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from calypso.errors import CalypsoError


def _fernet(signing_secret: bytes) -> Fernet:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"calypso source secrets").derive(signing_secret)
    return Fernet(base64.urlsafe_b64encode(key))


def seal(signing_secret: bytes, secrets: dict[str, str]) -> str | None:
    """The secrets as one token to store; None when there are none."""
    if not secrets:
        return None
    return _fernet(signing_secret).encrypt(json.dumps(secrets).encode()).decode("ascii")


def unseal(signing_secret: bytes, token: str | None) -> dict[str, str]:
    """The secrets a token holds; an error that says what to fix when the signing secret changed since."""
    if not token:
        return {}
    try:
        opened: dict[str, str] = json.loads(_fernet(signing_secret).decrypt(token.encode("ascii")))
    except (InvalidToken, ValueError) as exc:
        raise CalypsoError(
            "This source's stored password cannot be read: the signing secret changed since it was stored. "
            "Delete the source and add it again with its password."
        ) from exc
    return opened
