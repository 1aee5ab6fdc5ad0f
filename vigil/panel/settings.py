"""The panel section of the settings (``VIGIL_PANEL__*``): who may sign in, and how times are shown."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator

from vigil.core.money import currency_problem
from vigil.core.settings import checked
from vigil.panel.display import Display, Displays, locale_problem, zone_problem

PanelRole = Literal["analyst", "lead", "admin"]


class PanelUser(BaseModel):
    """A person who may sign in to the panel with a bearer token."""

    name: str = Field(min_length=1, max_length=256)
    role: PanelRole = "analyst"
    tenants: list[str] = Field(min_length=1, description='Tenants whose conversations they see; ["*"] for all.')
    token_sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 (hex) of their token; `vigil token`.")


class OidcSettings(BaseModel):
    """Sign-in through an OpenID Connect provider (authorization code flow with PKCE)."""

    issuer: str | None = Field(default=None, description="The provider's issuer URL (discovery is read from it).")
    client_id: str | None = None
    client_secret: SecretStr | None = None
    redirect_url: str | None = Field(
        default=None, description="This panel's callback as the provider knows it: https://HOST/auth/oidc/callback"
    )
    scopes: str = "openid email profile"
    name_claim: str = "email"
    tenant_claim: str = Field(default="tenant", description="Claim holding the tenant (a string or a list).")
    role_claim: str = Field(default="vigil_role", description="Claim holding analyst, lead or admin.")
    default_role: PanelRole = "analyst"
    timeout_s: float = Field(default=5.0, gt=0)
    session_max_age_s: float = Field(
        default=3600.0,
        gt=0,
        description="An OIDC sign-in lasts this long at most; then role and tenants are read again.",
    )


class TenantDisplay(BaseModel):
    """How one tenant's times are shown; a part left out is the panel's default (``VIGIL_PANEL__LOCALE`` or
    ``VIGIL_PANEL__TIME_ZONE``)."""

    model_config = {"extra": "forbid"}

    locale: str | None = Field(default=None, description="BCP 47 tag, e.g. en-GB (24-hour) or en-US (12-hour).")
    time_zone: str | None = Field(default=None, description="IANA time zone, e.g. Europe/London.")
    currency: str | None = Field(default=None, description="ISO 4217 code of the tenant's money, e.g. GBP.")

    _locale = field_validator("locale")(checked(locale_problem))
    _zone = field_validator("time_zone")(checked(zone_problem))
    _currency = field_validator("currency")(checked(currency_problem))


class PanelSettings(BaseModel):
    """The analyst panel served on the HTTP port, and who may use it."""

    enabled: bool = True
    auth: Literal["none", "tokens", "oidc"] = Field(
        default="none", description="none (only on a loopback host), tokens (PANEL__USERS) or oidc."
    )
    users: list[PanelUser] = Field(default_factory=list)
    session_secret: SecretStr | None = Field(
        default=None, description="Signs session cookies; unset: random at start (sign-ins end with the process)."
    )
    session_max_age_s: float = Field(default=12 * 3600, gt=0, description="A sign-in lasts this long at most.")
    secure_cookies: bool = Field(default=False, description="Send cookies over HTTPS only (set behind TLS).")
    fanout: bool = Field(
        default=True, description="On PostgreSQL, relay live updates between replicas (LISTEN/NOTIFY)."
    )
    oidc: OidcSettings = OidcSettings()
    locale: str = Field(
        default="en-GB", description="How times are written for tenants not in TENANT_DISPLAY (BCP 47 tag)."
    )
    time_zone: str = Field(default="UTC", description="The time zone of tenants not in TENANT_DISPLAY (IANA name).")
    currency: str | None = Field(
        default=None,
        description="The money of tenants not in TENANT_DISPLAY (ISO 4217 code); unset: amounts without a currency.",
    )
    tenant_display: dict[str, TenantDisplay] = Field(
        default_factory=dict,
        description='Per tenant: {"acme-uk": {"locale": "en-GB", "time_zone": "Europe/London", "currency": "GBP"}}.',
    )

    _locale = field_validator("locale")(checked(locale_problem))
    _zone = field_validator("time_zone")(checked(zone_problem))
    _currency = field_validator("currency")(checked(currency_problem))

    @property
    def displays(self) -> Displays:
        """Each tenant's display, with the default for the rest."""
        default = Display(self.locale, self.time_zone, self.currency)
        tenants = {
            tenant: Display(
                d.locale or default.locale, d.time_zone or default.time_zone, d.currency or default.currency
            )
            for tenant, d in self.tenant_display.items()
        }
        return Displays(default, tenants)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable only from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
