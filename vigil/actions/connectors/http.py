"""Calling the company's systems over HTTP: one client per system, its arguments placed safely in the path and the
body, retries with back-off where a retry cannot do a thing twice, and every failure turned into a
``ConnectorError`` in one place (``_translated`` and ``_answer``)."""

from __future__ import annotations

import contextlib
import logging
import string
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from vigil.actions.connectors.settings import SystemSettings
from vigil.core.errors import ConnectorError, ConnectorRefused, ConnectorTimeout, ConnectorUnavailable
from vigil.core.retry import Backoff

log = logging.getLogger(__name__)

IDEMPOTENCY_HEADER = "Idempotency-Key"
_DETAIL_CHARS = 300


@dataclass(frozen=True, slots=True)
class Operation:
    """One call an action makes to a system.

    Attributes:
        system: the system's name in the settings (``orders``, ``billing``, ``crm``).
        method: the HTTP method.
        path: a template filled from the arguments, such as ``/orders/{order_id}/refunds``.
        body: the names of the arguments sent as the JSON body (those given; none: no body).
        idempotent: the system honours an ``Idempotency-Key`` for this write, so one must be given, and a call
            that timed out is retried with it.
    """

    system: str
    method: str
    path: str
    body: tuple[str, ...] = ()
    idempotent: bool = False

    @property
    def reads(self) -> bool:
        """A GET: safe to repeat."""
        return self.method.upper() == "GET"

    def url_path(self, arguments: Mapping[str, Any]) -> str:
        """The path with each argument percent-encoded whole (``/`` and ``.`` too), so that no argument can reach
        another path than the template's ("../x" stays one segment)."""
        return fill_path(self.path, arguments)

    def json_body(self, arguments: Mapping[str, Any]) -> dict[str, Any] | None:
        """The body: the given arguments that ``body`` names."""
        if not self.body:
            return None
        return {name: arguments[name] for name in self.body if name in arguments}


def fill_path(template: str, arguments: Mapping[str, Any]) -> str:
    """``template`` with its ``{name}`` fields replaced by the arguments, each percent-encoded as one segment."""
    filled: list[str] = []
    for literal, name, _, _ in string.Formatter().parse(template):
        filled.append(literal)
        if name is None:
            continue
        if name not in arguments or arguments[name] is None:
            raise ValueError(f"the path {template} needs the argument {name!r}")
        value = str(arguments[name])
        if not value:
            raise ValueError(f"the argument {name!r} of the path {template} is empty")
        # quote leaves dots alone, and a segment of dots would climb the path once normalised.
        filled.append(quote(value, safe="").replace(".", "%2E"))
    return "".join(filled)


class Connectors:
    """The clients of the company's systems; ``perform`` runs an action's operation, ``fetch`` reads."""

    def __init__(
        self,
        systems: Mapping[str, SystemSettings],
        *,
        backoff: Backoff,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """One ``httpx.AsyncClient`` per system; ``transport`` replaces the network (for tests of other parts)."""
        self._settings = dict(systems)
        self._backoff = backoff
        self._clients = {name: _client(settings, transport) for name, settings in systems.items()}

    @property
    def systems(self) -> frozenset[str]:
        """The names of the systems configured (an action naming another cannot run)."""
        return frozenset(self._settings)

    async def perform(
        self, op: Operation, arguments: Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """Make the call and return the system's JSON answer.

        A read, and a write sent with its ``idempotency_key``, are retried after a timeout or an outage (the
        system's ``retries``); any other write is sent once, since a retry could do it twice. A 4xx is never retried.

        Raises:
            ValueError: an idempotent operation without a key, or a path argument missing or empty.
            ConnectorTimeout, ConnectorUnavailable, ConnectorRefused, ConnectorError: see ``vigil.core.errors``.
        """
        if op.idempotent and not op.reads and not idempotency_key:
            raise ValueError(f"{op.method} {op.path} on {op.system} needs an idempotency key")
        path = op.url_path(arguments)
        headers = {IDEMPOTENCY_HEADER: idempotency_key} if idempotency_key else {}
        retried = op.reads or bool(op.idempotent and idempotency_key)
        return await self._call(
            op.system, op.method.upper(), path, json=op.json_body(arguments), headers=headers, retried=retried
        )

    async def fetch(
        self,
        system: str,
        path: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Read ``path`` (a template filled from ``arguments`` like an operation's, when given) with the query
        ``params``; retried after a timeout or an outage."""
        filled = fill_path(path, arguments) if arguments is not None else path
        return await self._call(system, "GET", filled, params=params, retried=True)

    async def aclose(self) -> None:
        """Close every client's connections."""
        for client in self._clients.values():
            await client.aclose()

    async def __aenter__(self) -> Connectors:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _call(
        self,
        system: str,
        method: str,
        path: str,
        *,
        json: dict[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        retried: bool,
    ) -> dict[str, Any]:
        settings, client = self._system(system)

        async def once() -> dict[str, Any]:
            with _translated(system, method, path, settings.timeout_s):
                response = await client.request(method, path, json=json, headers=headers, params=params)
            return _answer(system, method, path, response)

        attempts = 1 + settings.retries if retried else 1
        return await self._backoff.retry(f"{method} {path} on {system}", once, attempts=attempts)

    def _system(self, system: str) -> tuple[SystemSettings, httpx.AsyncClient]:
        try:
            return self._settings[system], self._clients[system]
        except KeyError:
            raise ConnectorError(system, f"no system named {system!r} is configured") from None


def _client(settings: SystemSettings, transport: httpx.AsyncBaseTransport | None) -> httpx.AsyncClient:
    headers = {"Accept": "application/json"}
    if settings.token is not None:
        headers["Authorization"] = f"Bearer {settings.token.get_secret_value()}"
    return httpx.AsyncClient(
        base_url=settings.base_url, headers=headers, timeout=settings.timeout_s, transport=transport
    )


@contextlib.contextmanager
def _translated(system: str, method: str, path: str, timeout_s: float) -> Iterator[None]:
    """httpx's errors as vigil's, the way httpx maps httpcore's (``map_httpcore_exceptions``)."""
    try:
        yield
    except httpx.TimeoutException as exc:
        done = "" if method == "GET" else " (the change may have been made)"
        raise ConnectorTimeout(system, f"{system} did not answer {method} {path} within {timeout_s:g} s{done}") from exc
    except httpx.TransportError as exc:
        why = str(exc) or type(exc).__name__
        raise ConnectorUnavailable(system, f"{system} cannot be reached for {method} {path}: {why}") from exc
    except httpx.HTTPError as exc:
        raise ConnectorError(system, f"{system} could not be called for {method} {path}: {exc}") from exc


def _answer(system: str, method: str, path: str, response: httpx.Response) -> dict[str, Any]:
    """The JSON object of a 2xx answer; any other answer as the error it means."""
    status = response.status_code
    if response.is_success:
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise ConnectorError(system, f"{system} answered {method} {path} with {status} but no JSON object")
        return body
    detail = _detail(response)
    if status == 429 or status >= 500:
        message = f"{system} is unavailable for {method} {path}: {status} {detail}"
        raise ConnectorUnavailable(system, message, status=status)
    if 400 <= status < 500:
        message = f"{system} refused {method} {path}: {status} {detail}"
        raise ConnectorRefused(system, message, status=status, detail=detail)
    raise ConnectorError(system, f"{system} answered {method} {path} with an unexpected {status} {detail}")


def _detail(response: httpx.Response) -> str:
    """The system's own words: its JSON ``detail`` (a FastAPI validation error's messages), else its text."""
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    if isinstance(detail, list):
        detail = "; ".join(_validation_message(item) for item in detail)
    text = detail if isinstance(detail, str) and detail else (response.text.strip() or response.reason_phrase)
    return text[:_DETAIL_CHARS]


def _validation_message(item: Any) -> str:
    if not isinstance(item, dict):
        return str(item)
    where = ".".join(str(part) for part in item.get("loc", ())[1:])
    return f"{where}: {item.get('msg', '')}" if where else str(item.get("msg", ""))
