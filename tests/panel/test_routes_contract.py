"""The API keeps its OpenAPI contract: schemathesis fuzzes every /api operation in process, signed in with a bearer
token, against a real (SQLite) store, and checks that nothing is a 5xx and that every status, content type, header
and body is one the document declares."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from prometheus_client import CollectorRegistry

from tests.conftest import case_store, make_settings
from tests.panel.test_routes import bearer, panel_app, say, suggest
from vigil.cases.store import CaseStore
from vigil.transport.memory import MemoryOutbox

if os.environ.get("CI"):  # make test installs the dev extras: there, a missing schemathesis is a failure
    import schemathesis
else:
    schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is in the dev extras (make dev)")
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


# Invalid requests are refused. (Not "every valid request is taken": a cursor no page gave is schema-valid, and a 422.)
CHECK_BY_MODE: dict[GenerationMode, list[Any]] = {
    GenerationMode.POSITIVE: [],
    GenerationMode.NEGATIVE: [negative_data_rejection],
}


class VigilOnSqlite:
    """vigil's app and its migrated SQLite store, both made in the event loop that serves them: schemathesis runs
    an in-process app in a loop of its own, which a store's connections cannot leave. Made at lifespan startup."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.store: CaseStore | None = None
        self.app: Any = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        await receive()  # startup
        url = f"sqlite+aiosqlite:///{self.data / 'vigil.db'}"
        self.store = case_store(make_settings(tmp_path=self.data, db_url=url))
        await self.store.migrate()
        await say(self.store, "acme-1", "acme", 1, "When do you take the money?")
        await suggest(self.store, "acme-1", "acme", "s-acme")
        self.app = panel_app(self.store, MemoryOutbox(), CollectorRegistry())
        await send({"type": "lifespan.startup.complete"})
        await receive()  # shutdown
        await self.store.close()
        await send({"type": "lifespan.shutdown.complete"})


@pytest.fixture
def api_schema(tmp_path: Path) -> Iterator[Any]:
    app = VigilOnSqlite(tmp_path)
    try:
        # The live stream never ends by itself; its contract is tested in test_panel.py.
        yield schemathesis.openapi.from_asgi("/openapi.json", app).exclude(path="/api/live")
    finally:
        asgi.shutdown_lifespans()


SEEDED = {"conversation_id": "acme-1", "suggestion_id": "s-acme"}  # so that cases reach past the 404


def test_every_api_answer_is_one_the_openapi_declares(api_schema: Any) -> None:
    # Each operation in turn, with hypothesis directly: schemathesis' pytest loader does not run on pytest 9.
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/api/queue", "/api/conversations/{conversation_id}/read"}
    for operation in operations:
        names = {p.name for p in operation.path_parameters}
        for path_parameters in ({}, {k: v for k, v in SEEDED.items() if k in names}) if names else ({},):
            for mode in GenerationMode.POSITIVE, GenerationMode.NEGATIVE:
                if mode is GenerationMode.NEGATIVE and not negatable(operation, path_parameters):
                    continue
                strategy = operation.as_strategy(mode, path_parameters=path_parameters or None)
                fuzz(strategy, headers=bearer("root"), checks=[*CHECKS, *CHECK_BY_MODE[mode]], examples=25)
        fuzz(operation.as_strategy(), headers={}, checks=CHECKS, examples=10)  # nobody signed in: a documented 401


def negatable(operation: Any, fixed: dict[str, str]) -> bool:
    """Whether the operation takes anything an invalid request could get wrong (a query, a body, a free path id)."""
    free_path = {p.name for p in operation.path_parameters} - set(fixed)
    return bool(list(operation.query) or list(operation.body) or free_path)


def fuzz(strategy: Any, *, headers: dict[str, str], checks: list[Any], examples: int) -> None:
    @given(case=strategy)
    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def conforms(case: Any) -> None:
        case.call_and_validate(headers=headers, checks=checks)

    conforms()
