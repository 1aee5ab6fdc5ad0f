"""One request to Anthropic's Messages API within a hard time budget, its failures mapped to one outcome.

Every LLM path in vigil is optional and never in the way: its caller has a fallback (the extractive answer, the
extractive entry), so a request is made once (the SDK's retries are off: a retry would not fit in the budget), under
one deadline over the whole request (``asyncio.timeout``, which also covers a server that sends headers and stalls),
and whatever goes wrong comes back as an outcome, never as an exception:

- ``ok``: a reply the caller's ``accept`` took;
- ``timeout``: no reply within the budget;
- ``rate_limited`` (429) and ``server_error`` (5xx, 529);
- ``unusable``: a reply that arrived but cannot be used (malformed, cut off, or refused by ``accept``, which raises
  ``Unusable``);
- ``ungrounded``: a reply stating a fact its input does not (``accept`` raises ``Ungrounded``; see ``grounding``);
- ``error``: anything else (another 4xx, a connection that failed).

Each outcome is counted (``<prefix>_requests_total{outcome}``), with the request's latency and, for every reply that
arrived, its tokens and estimated cost, usable or not. The caller logs the failure, once, in its own words.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from vigil.core.clock import Clock
from vigil.llm.metrics import LlmMetrics
from vigil.llm.settings import LlmSettings

if TYPE_CHECKING:  # the SDK takes seconds to import: only a client with an API key loads it
    import anthropic

T = TypeVar("T")


class Unusable(Exception):
    """The reply arrived but cannot be used; the message says why (and holds no customer text: it is logged)."""


class Ungrounded(Unusable):
    """The reply states facts (a URL, a phone number, an amount...) that its input does not."""


@dataclass(frozen=True, slots=True)
class Reply(Generic[T]):
    """What one request came to: the accepted value (only when ``outcome`` is ``ok``), the outcome, and why not."""

    value: T | None
    outcome: str
    detail: str = ""


class LlmClient:
    """Anthropic's Messages API, one request at a time within ``settings.timeout_s``; off without an API key."""

    def __init__(
        self,
        settings: LlmSettings,
        *,
        metrics: LlmMetrics,
        clock: Clock,
        client: anthropic.AsyncAnthropic | None = None,
    ) -> None:
        """Build the client; no network traffic until the first request.

        Args:
            settings: the LLM settings; without ``api_key`` the client is disabled. Its ``timeout_s`` is the budget
                of every request, its ``model`` and ``max_tokens`` what each asks for.
            metrics: where requests, tokens, cost and latency are counted.
            clock: measures request latency.
            client: an Anthropic client to use instead of one built from ``settings`` (it is closed by ``aclose``).
        """
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._client = client
        if client is None and settings.api_key is not None:
            import anthropic  # noqa: PLC0415

            self._client = anthropic.AsyncAnthropic(
                api_key=settings.api_key.get_secret_value(),
                base_url=settings.base_url,
                max_retries=0,  # a retry would not fit in the budget; the caller's fallback is the retry
                timeout=settings.timeout_s,
            )

    @property
    def enabled(self) -> bool:
        """Whether the LLM is on (an API key is set)."""
        return self._client is not None

    @property
    def budget_s(self) -> float:
        """The hard time budget of one request, in seconds."""
        return self._settings.timeout_s

    async def aclose(self) -> None:
        """Close the HTTP client."""
        if self._client is not None:
            await self._client.close()

    async def request(self, accept: Callable[[Any], T], **params: Any) -> Reply[T]:
        """Send one Messages API request and hand the reply to ``accept``.

        Args:
            accept: makes the caller's value of the reply (an ``anthropic.types.Message``, perhaps malformed: the
                SDK does not validate it), or raises ``Unusable`` (or ``Ungrounded``) when it cannot be used.
            params: the request's ``system``, ``messages``, ``tools``...; ``model`` and ``max_tokens`` come from
                the settings unless given.

        Returns a ``Reply`` whatever happens (never raises, except on cancellation); a disabled client returns
        ``error`` without sending anything (callers check ``enabled`` first).
        """
        if self._client is None:
            return Reply(None, "error", "no API key")
        import anthropic  # noqa: PLC0415  (loaded already by the client)

        params = {"model": self._settings.model, "max_tokens": self._settings.max_tokens, **params}
        started = self._clock.monotonic()
        outcome, detail, value = "error", "", None
        try:
            async with asyncio.timeout(self._settings.timeout_s):
                message = await self._client.messages.create(**params)
            self._count_usage(getattr(message, "usage", None))
            value = accept(message)
            outcome = "ok"
        except (TimeoutError, anthropic.APITimeoutError):
            outcome, detail = "timeout", f"no reply within {self._settings.timeout_s:g} s"
        except anthropic.RateLimitError as exc:
            outcome, detail = "rate_limited", _status(exc)
        except anthropic.InternalServerError as exc:
            outcome, detail = "server_error", _status(exc)
        except anthropic.APIResponseValidationError as exc:
            outcome, detail = "unusable", f"malformed response: {exc.message}"
        except Ungrounded as exc:
            outcome, detail = "ungrounded", str(exc)
        except Unusable as exc:
            outcome, detail = "unusable", str(exc)
        except anthropic.APIStatusError as exc:
            detail = _status(exc)
        except anthropic.APIConnectionError as exc:
            detail = f"connection failed: {exc.message}"
        except (anthropic.AnthropicError, ValueError, TypeError, AttributeError) as exc:
            # ValueError covers a body that is not JSON; the others a JSON body of the wrong shape, which the SDK
            # hands over unvalidated.
            outcome, detail = "unusable", f"malformed response: {type(exc).__name__}: {exc}"
        finally:
            self._metrics.latency.observe(self._clock.monotonic() - started)
        self._metrics.requests.labels(outcome=outcome).inc()
        return Reply(value, outcome, detail)

    def _count_usage(self, usage: Any) -> None:
        input_tokens, output_tokens = tokens(usage)
        self._metrics.tokens.labels(direction="input").inc(input_tokens)
        self._metrics.tokens.labels(direction="output").inc(output_tokens)
        cost = (
            input_tokens * self._settings.input_usd_per_mtok + output_tokens * self._settings.output_usd_per_mtok
        ) / 1_000_000
        self._metrics.cost.inc(cost)


def tokens(usage: Any) -> tuple[int, int]:
    """The input and output tokens a reply's ``usage`` reports (0 for what it does not, or reports wrongly)."""
    return _count(getattr(usage, "input_tokens", 0)), _count(getattr(usage, "output_tokens", 0))


def _count(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def _status(exc: anthropic.APIStatusError) -> str:
    retry_after = exc.response.headers.get("retry-after")
    return f"HTTP {exc.status_code}" + (f" (retry after {retry_after} s)" if retry_after else "")
