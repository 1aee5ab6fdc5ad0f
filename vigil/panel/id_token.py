"""OpenID Connect ID tokens: checking one against the provider's key, and the panel ``Identity`` it names.

Only asymmetric signatures are accepted: ``alg: none`` and HMAC (which would take the provider's *public* key as a
shared secret) are refused before any key is looked at, and each key verifies only with its own algorithm. Times are
judged by the caller's clock, with ``LEEWAY_S`` of tolerance for clock skew.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

import jwt

from vigil.core.errors import AuthError
from vigil.panel.identity import ALL_TENANTS, ROLES, Identity
from vigil.panel.settings import OidcSettings, PanelRole

# The algorithms accepted, with the key type each needs.
KEY_TYPES = {"RS256": "RSA", "RS384": "RSA", "RS512": "RSA", "PS256": "RSA", "PS384": "RSA", "PS512": "RSA"}
KEY_TYPES |= {"ES256": "EC", "ES384": "EC", "ES512": "EC"}
LEEWAY_S = 60.0
REQUIRED_CLAIMS = ["iss", "sub", "aud", "exp", "iat"]


def signed_with(id_token: str) -> tuple[str, str | None]:
    """The algorithm and key id an ID token's header names, refusing algorithms vigil does not accept."""
    try:
        header = jwt.get_unverified_header(id_token)
    except jwt.PyJWTError as exc:
        raise AuthError("the ID token is malformed") from exc
    alg, kid = header.get("alg"), header.get("kid")
    if alg not in KEY_TYPES:
        raise AuthError(f"the ID token is signed with {alg!r}, which vigil does not accept")
    return alg, kid if isinstance(kid, str) else None


def public_key(jwk: Mapping[str, Any] | None, alg: str) -> jwt.PyJWK:
    """The provider's key (a JWK, None if it publishes none by that id) bound to ``alg``."""
    if jwk is None:
        raise AuthError("the ID token is signed with a key the sign-in provider does not publish")
    if jwk.get("kty") != KEY_TYPES[alg] or jwk.get("alg", alg) != alg:
        raise AuthError(f"the ID token's algorithm {alg} does not fit the provider's key")
    try:
        return jwt.PyJWK(dict(jwk), algorithm=alg)
    except jwt.PyJWTError as exc:
        raise AuthError("the sign-in provider's key is not usable") from exc


def verify(id_token: str, key: jwt.PyJWK, *, issuer: str, client_id: str, nonce: str, now: float) -> dict[str, Any]:
    """The claims of ``id_token`` once its signature, issuer, audience, times and nonce hold.

    Args:
        key: the provider's key the token names (``public_key``).
        nonce: the nonce this sign-in sent to the provider.
        now: the current time in seconds since the epoch.
    """
    claims = _decode(id_token, key, issuer=issuer, client_id=client_id)
    _check_times(claims, now)
    azp = claims.get("azp")
    if isinstance(claims["aud"], list) and len(claims["aud"]) > 1 and azp is None:
        raise AuthError("the ID token names several audiences but no authorized party")
    if azp is not None and azp != client_id:
        raise AuthError("the ID token was issued to another client")
    if not isinstance(claims.get("nonce"), str) or not hmac.compare_digest(claims["nonce"], nonce):
        raise AuthError("the ID token does not belong to this sign-in (nonce)")
    return claims


def identity_from_claims(claims: Mapping[str, Any], settings: OidcSettings) -> Identity:
    """The panel identity of verified ID-token claims, mapped by the settings' claim names.

    The name falls back to ``sub``; the tenants are a string or a list of strings; the role is one of the panel's roles
    (the highest, if a list) or else ``settings.default_role``. A tenant claim naming ``*`` (every tenant) refuses the
    sign-in, rather than dropping the ``*`` and going on with less than the provider meant: every tenant is granted
    only by vigil's own settings (a token user in ``VIGIL_PANEL__USERS``), never by a provider's claim.

    Raises:
        AuthError: the tenant claim names no tenant, or ``*``.
    """
    name = claims.get(settings.name_claim)
    tenants = list(dict.fromkeys(t for t in _strings(claims.get(settings.tenant_claim)) if t))
    if not tenants:
        raise AuthError("no tenant: your account at the sign-in provider is not assigned to any tenant")
    if ALL_TENANTS in tenants:
        raise AuthError(
            "your account at the sign-in provider names the tenant '*' (every tenant), which vigil does not take from "
            "a sign-in provider: list your tenants there instead"
        )
    return Identity(
        name=name if isinstance(name, str) and name else str(claims["sub"]),
        role=_role(claims.get(settings.role_claim), settings.default_role),
        tenants=tuple(tenants),
    )


def _decode(id_token: str, key: jwt.PyJWK, *, issuer: str, client_id: str) -> dict[str, Any]:
    # PyJWT would judge the times by the machine's clock; _check_times uses the caller's.
    options: jwt.types.Options = {"verify_exp": False, "verify_iat": False, "verify_nbf": False}
    options |= {"require": REQUIRED_CLAIMS, "enforce_minimum_key_length": True}
    try:
        claims: dict[str, Any] = jwt.decode(
            id_token, key, algorithms=[key.algorithm_name], audience=client_id, issuer=issuer, options=options
        )
    except jwt.InvalidSignatureError as exc:
        raise AuthError("the ID token's signature is not valid") from exc
    except jwt.InvalidAudienceError as exc:
        raise AuthError("the ID token is meant for another client") from exc
    except jwt.InvalidIssuerError as exc:
        raise AuthError("the ID token comes from another issuer") from exc
    except jwt.MissingRequiredClaimError as exc:
        raise AuthError(f"the ID token has no {exc.claim!r} claim") from exc
    except jwt.PyJWTError as exc:
        raise AuthError("the ID token is not valid") from exc
    return claims


def _check_times(claims: Mapping[str, Any], now: float) -> None:
    if now > _seconds(claims, "exp") + LEEWAY_S:
        raise AuthError("the ID token has expired")
    if _seconds(claims, "iat") > now + LEEWAY_S:
        raise AuthError("the ID token was issued in the future (check this machine's clock)")
    if "nbf" in claims and _seconds(claims, "nbf") > now + LEEWAY_S:
        raise AuthError("the ID token is not valid yet (check this machine's clock)")


def _seconds(claims: Mapping[str, Any], name: str) -> float:
    value = claims.get(name)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise AuthError(f"the ID token's {name!r} claim is not a time")
    return float(value)


def _strings(value: object) -> list[str]:
    """A claim that is a string or a list of strings, as a list (anything else: empty)."""
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _role(value: object, default: PanelRole) -> PanelRole:
    names = _strings(value)
    known = [role for role in ROLES if role in names]
    return known[-1] if known else default
