"""The demo systems' HTTP API: the order system, billing and the CRM of a small web shop, in one service.

Every write needs an ``Idempotency-Key`` header (400 without one). The same key with the same request is answered
with the first answer again, marked ``Idempotent-Replayed: true``, and nothing is done twice; the same key with a
different request is refused with 422. Business refusals are JSON ``{"detail": ...}`` with 404, 409 or 422.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from vigil.core.clock import Clock, SystemClock
from vigil.dev.systems import records, writes
from vigil.dev.systems.faults import FaultInjection, Faults
from vigil.dev.systems.store import Answer, Effect, Refusal, Store

Text = Annotated[str, Field(min_length=1, max_length=500)]
Cents = Annotated[int, Field(gt=0, le=100_000_000)]
IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", max_length=255)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Cancel(_Body):
    reason: Text


class Refund(_Body):
    amount_cents: Cents
    payment_method_id: Text
    reason: Text


class Credit(_Body):
    amount_cents: Cents
    reason: Text


class PostalAddress(_Body):
    """An address as the order system and the CRM keep it."""

    line1: Text
    line2: Text | None = None
    city: Text
    postcode: Text

    def one_line(self) -> str:
        return ", ".join(part for part in (self.line1, self.line2, f"{self.city} {self.postcode}") if part)


class Address(_Body):
    address: PostalAddress


class Email(_Body):
    email: Text


class PaymentMethod(_Body):
    kind: Literal["card", "paypal", "gift_card"]
    label: Text


def create_app(
    path: Path, *, token: str | None = None, faults: Faults | None = None, clock: Clock | None = None
) -> FastAPI:
    """The service on the SQLite file at ``path`` (its tables are created if missing; ``seed`` fills it).

    Args:
        token: when set, every request needs ``Authorization: Bearer <token>`` (401 otherwise).
        faults: the faults a test switches on; never given outside tests.
        clock: stamps refunds, credits and changes (the system clock by default).
    """
    clock = clock or SystemClock()
    store = Store(path, clock=clock)
    store.create()
    app = FastAPI(title="vigil demo systems: orders, billing, CRM", dependencies=[Depends(_bearer(token))])
    app.state.store = store

    @app.exception_handler(Refusal)
    async def refused(request: Request, exc: Refusal) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status)

    _reads(app, store)
    _writes(app, store)
    if faults is not None:
        app.add_middleware(FaultInjection, faults=faults, clock=clock)
    return app


def _bearer(token: str | None) -> Callable[..., None]:
    def check(authorization: Annotated[str | None, Header()] = None) -> None:
        if token is None:
            return
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(given.encode(), token.encode()):
            raise HTTPException(401, "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"})

    return check


def _reads(app: FastAPI, store: Store) -> None:
    @app.get("/customers/{customer_id}")
    def customer(customer_id: str) -> dict[str, Any]:
        with store.reading() as conn:
            return records.customer(conn, customer_id)

    @app.get("/customers")
    def customers(email: Annotated[str, Query(min_length=1)]) -> dict[str, Any]:
        with store.reading() as conn:
            return {"customers": records.customers_by_email(conn, email)}

    @app.get("/customers/{customer_id}/orders")
    def orders(customer_id: str) -> dict[str, Any]:
        with store.reading() as conn:
            return {"customer_id": customer_id, "orders": records.orders_of(conn, customer_id)}

    @app.get("/customers/{customer_id}/credits")
    def credits(customer_id: str) -> dict[str, Any]:
        with store.reading() as conn:
            return records.credits_of(conn, customer_id)

    @app.get("/orders/{order_id}")
    def order(order_id: str) -> dict[str, Any]:
        with store.reading() as conn:
            return records.order(conn, order_id)


def _writes(app: FastAPI, store: Store) -> None:
    def run(request: Request, key: str | None, body: BaseModel | None, effect: Effect) -> JSONResponse:
        if not key:
            raise HTTPException(400, "this request changes something and needs an Idempotency-Key header")
        answer = store.write(key, _fingerprint(request, body), effect)
        return _respond(answer)

    @app.post("/orders/{order_id}/cancel")
    def cancel(order_id: str, body: Cancel, request: Request, key: IdempotencyKey = None) -> JSONResponse:
        return run(request, key, body, lambda c, now: writes.cancel_order(c, now, order_id, body.reason))

    @app.post("/orders/{order_id}/refunds", status_code=201)
    def refund(order_id: str, body: Refund, request: Request, key: IdempotencyKey = None) -> JSONResponse:
        return run(
            request,
            key,
            body,
            lambda c, now: writes.refund(c, now, order_id, body.amount_cents, body.payment_method_id, body.reason),
        )

    @app.put("/orders/{order_id}/address")
    def address(order_id: str, body: Address, request: Request, key: IdempotencyKey = None) -> JSONResponse:
        return run(request, key, body, lambda c, now: writes.change_address(c, now, order_id, body.address.one_line()))

    @app.put("/customers/{customer_id}/address")
    def customer_address(customer_id: str, body: Address, request: Request, key: IdempotencyKey = None) -> JSONResponse:
        return run(
            request,
            key,
            body,
            lambda c, now: writes.change_customer_address(c, now, customer_id, body.address.one_line()),
        )

    @app.post("/customers/{customer_id}/credits", status_code=201)
    def credit(customer_id: str, body: Credit, request: Request, key: IdempotencyKey = None) -> JSONResponse:
        return run(
            request, key, body, lambda c, now: writes.add_credit(c, now, customer_id, body.amount_cents, body.reason)
        )

    @app.put("/customers/{customer_id}/email")
    def email(customer_id: str, body: Email, request: Request, key: IdempotencyKey = None) -> JSONResponse:
        return run(request, key, body, lambda c, now: writes.change_email(c, now, customer_id, body.email))

    @app.post("/customers/{customer_id}/two-factor/reset")
    def two_factor(customer_id: str, request: Request, key: IdempotencyKey = None) -> JSONResponse:
        return run(request, key, None, lambda c, now: writes.reset_two_factor(c, now, customer_id))

    @app.post("/customers/{customer_id}/payment-methods", status_code=201)
    def payment_method(
        customer_id: str, body: PaymentMethod, request: Request, key: IdempotencyKey = None
    ) -> JSONResponse:
        return run(
            request, key, body, lambda c, now: writes.add_payment_method(c, now, customer_id, body.kind, body.label)
        )


def _fingerprint(request: Request, body: BaseModel | None) -> str:
    """What makes two requests the same request: the method, the path and the body's content."""
    content = json.dumps(body.model_dump() if body is not None else None, sort_keys=True)
    return hashlib.sha256(f"{request.method} {request.url.path}\n{content}".encode()).hexdigest()


def _respond(answer: Answer) -> JSONResponse:
    headers = {"Idempotent-Replayed": "true"} if answer.replayed else {}
    return JSONResponse(answer.body, status_code=answer.status, headers=headers)
