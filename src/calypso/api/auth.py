"""Who is calling: API keys map to workspaces; the admin key manages keys.

Every /v1 route takes ``current_workspace``; with auth off (local use) every
request is in the ``default`` workspace.
"""

from __future__ import annotations

import hmac
import ipaddress

from fastapi import Request

from calypso.config import Settings
from calypso.errors import AuthenticationFailed, PermissionDenied
from calypso.knowledge import DEFAULT_WORKSPACE
from calypso.store.keys import KeyStore


def auth_enabled(settings: Settings) -> bool:
    if settings.auth != "auto":
        return settings.auth == "on"
    host = settings.host.strip("[]")
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True  # a host name we cannot judge: require keys


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization")
    if not header:
        raise AuthenticationFailed("Missing API key: send 'Authorization: Bearer <key>' (create one with `calypso keys create`).")
    scheme, _, key = header.partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key or " " in key:
        raise AuthenticationFailed("Malformed Authorization header: expected 'Bearer <key>'.")
    return key


def current_workspace(request: Request) -> str:
    """The caller's workspace (FastAPI dependency); 401 for a missing, malformed, unknown or revoked key."""
    if not request.app.state.auth_enabled:
        return DEFAULT_WORKSPACE
    key = _bearer(request)
    workspace = KeyStore(request.app.state.kb.store).workspace_for(key)
    if workspace is None:
        raise AuthenticationFailed("Invalid or revoked API key; ask your administrator for a new one.")
    return workspace


def require_admin(request: Request) -> None:
    """Admin routes need CALYPSO_ADMIN_KEY; with auth off and no admin key set, local use is allowed."""
    admin_key = request.app.state.settings.admin_key
    if not admin_key:
        if request.app.state.auth_enabled:
            raise PermissionDenied("The admin API is disabled: set CALYPSO_ADMIN_KEY to enable it.")
        return
    if not hmac.compare_digest(_bearer(request), admin_key):
        raise AuthenticationFailed("This route needs the admin key (CALYPSO_ADMIN_KEY).")
