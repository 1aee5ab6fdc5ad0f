"""The analyst panel: pages, live updates, sign-in and the lead overview, served on the daemon's HTTP port."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING

from vigil.flow.capability import Capability, Platform, Step

if TYPE_CHECKING:
    from fastapi import APIRouter

    from vigil.cases.views import CaseViews
    from vigil.core.clock import Clock
    from vigil.flow.feed import LiveFeed
    from vigil.knowledge.store import KnowledgeStore
    from vigil.panel.goodwill import GoodwillBudgets
    from vigil.panel.oidc import OidcClient
    from vigil.panel.settings import PanelSettings
    from vigil.transport.base import Outbox
    from vigil.wire.proof import Proofs

# Like every capability's, this setup imports what it builds when it runs, so that importing the panel's settings
# (or its display rules) stays light.


def setup(
    settings: PanelSettings,
    platform: Platform,
    *,
    views: CaseViews,
    knowledge: KnowledgeStore | None,
    feed: LiveFeed,
    outboxes: Sequence[Outbox],
    proofs: Proofs,
    budgets: GoodwillBudgets | None = None,
) -> Capability:
    """The JSON API, and the pages when the panel is enabled; with OIDC sign-in, its client started and closed.
    ``budgets``: each tenant's goodwill against its concession budget, for the lead's overview (given by the
    composition root when actions are on; see ``vigil.panel.goodwill``); ``proofs`` signs each decision on an action
    the API puts on the stream."""
    from vigil.panel.oidc import OidcClient

    oidc = OidcClient(settings.oidc, clock=platform.clock) if settings.auth == "oidc" else None
    return Capability(
        name="panel",
        routers=routers(
            settings,
            clock=platform.clock,
            views=views,
            knowledge=knowledge,
            feed=feed,
            outboxes=outboxes,
            proofs=proofs,
            oidc=oidc,
            budgets=budgets,
        ),
        starting=[Step("starting the OIDC client", oidc.start)] if oidc else [],
        closing=[oidc.close] if oidc else [],
    )


def routers(
    settings: PanelSettings,
    *,
    clock: Clock,
    views: CaseViews,
    knowledge: KnowledgeStore | None,
    feed: LiveFeed,
    outboxes: Sequence[Outbox],
    proofs: Proofs,
    oidc: OidcClient | None,
    budgets: GoodwillBudgets | None = None,
) -> list[APIRouter]:
    """The ``/api`` routes, then (when the panel is enabled) the pages and their static files."""
    from fastapi import APIRouter
    from fastapi.staticfiles import StaticFiles

    from vigil.panel.auth import Authenticator
    from vigil.panel.pages import page_routes
    from vigil.panel.routes import Caller, api_routes
    from vigil.panel.sessions import SessionRegistry

    auth = Authenticator(settings, sessions=SessionRegistry(views, clock=clock))
    api = api_routes(
        views=views,
        feed=feed,
        outboxes=outboxes,
        proofs=proofs,
        caller=Caller(auth),
        clock=clock,
        knowledge=knowledge,
    )
    if not settings.enabled:
        return [api]
    pages = page_routes(
        views=views,
        knowledge=knowledge,
        auth=auth,
        oidc=oidc,
        clock=clock,
        displays=settings.displays,
        budgets=budgets,
    )
    static = APIRouter()
    static.mount("/panel/static", StaticFiles(directory=str(resources.files("vigil.panel") / "static")), "static")
    return [api, pages, static]
