"""vigil's errors.

    VigilError
    ├── SettingsError        a setting is missing or invalid (stops start-up)
    ├── Rejected             an input record is not a valid v1 event (goes to the dead-letter topic)
    ├── Unavailable          a dependency cannot be reached now but may come back (retried with back-off; a skill
    │                        that needs it is asked a few times, then silent)
    ├── StoreError           the database refused or failed a write
    │   ├── StoreUnavailable     the database cannot be reached (also an Unavailable, ``database``)
    │   └── EventConflict        the event contradicts what is stored (dead-lettered)
    ├── KnowledgeError       the knowledge store's database or vector index (Chroma) failed a read or write
    │   ├── KnowledgeUnavailable the knowledge database or Chroma cannot be reached (also an Unavailable, ``knowledge``)
    │   └── EntryConflict        an import would take another tenant's entry by its id (nothing is imported)
    ├── TransportError       the broker failed a request
    │   ├── TransportUnavailable the broker cannot take or answer the request now (also an Unavailable, ``broker``)
    │   └── RecordRefused        the broker refuses the record itself, too large or invalid (never retried)
    ├── ConnectorError       a company system (orders, billing, CRM) failed a call from an action's connector
    │   ├── ConnectorTimeout     the system did not answer in time (also an Unavailable, named by the system; a
    │   │                        write may have been done: retried only with its idempotency key)
    │   ├── ConnectorUnavailable the system cannot be reached or answered 5xx/429 (also an Unavailable, the system)
    │   └── ConnectorRefused     the system said no (a 4xx and its detail): permanent, never retried
    ├── StartupError         a part did not start in time
    ├── Overrun              vigil's own work in a transaction outran its time limit (not the database: never retried)
    ├── LeaseLost            work's lease passed to another replica before its results were written (none were)
    ├── Fenced               the partition a record was read from has been given to another consumer since; what the
    │                        record's handling would have written was not (the new owner handles the record)
    ├── InvalidCursor        a page cursor vigil did not give out (the API answers 422)
    ├── AuthError            a panel sign-in was refused or failed (the message may be shown to the person)
    │   └── AuthUnavailable      the sign-in provider cannot be reached or answered nonsense (try again later)
    ├── RulebookError        a rulebook's actions, policy or risk patterns are invalid (names file, rule, field)
    └── InvalidArguments     an action request names an unknown action or breaks its arguments' schema (denied)

Third-party errors are translated into these at the module that talks to the library, with ``raise ... from``.
"""

from __future__ import annotations


class VigilError(Exception):
    """Base of every error vigil raises on purpose."""


class SettingsError(VigilError):
    """A setting is missing or invalid; ``setting`` names the environment variable."""

    def __init__(self, setting: str, problem: str) -> None:
        super().__init__(f"invalid setting {setting}: {problem}")
        self.setting = setting
        self.problem = problem


class Rejected(VigilError):
    """An input record that is not a valid v1 event.

    ``reason`` is a short stable code (used as a metric label and a dead-letter header);
    ``detail`` says what exactly is wrong, for a person.
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class Unavailable(VigilError):
    """A dependency cannot be reached right now and may come back: the operation may be retried.

    ``dependency`` names it (the label of ``vigil_retries_total``); ``reason`` is why work that needed it was left
    undone (the label of ``vigil_suggestions_suppressed_total`` when a skill stays silent).
    """

    dependency = "dependency"

    @property
    def reason(self) -> str:
        """``<dependency>_unavailable``."""
        return f"{self.dependency}_unavailable"


class StoreError(VigilError):
    """The database refused or failed a write."""


class StoreUnavailable(StoreError, Unavailable):
    """The database cannot be reached right now; the operation may be retried."""

    dependency = "database"


class EventConflict(StoreError, Rejected):
    """The event contradicts stored state (for example another tenant's conversation id)."""

    def __init__(self, reason: str, detail: str) -> None:
        Rejected.__init__(self, reason, detail)


class KnowledgeError(VigilError):
    """The knowledge store's database or its vector index (Chroma) failed a read or a write."""


class KnowledgeUnavailable(KnowledgeError, Unavailable):
    """The knowledge database or Chroma cannot be reached right now; the operation may be retried."""

    dependency = "knowledge"


class EntryConflict(KnowledgeError):
    """An import would put one tenant's entry in the place of another tenant's (entry ids are shared by all)."""


class TransportError(VigilError):
    """The broker failed a request."""


class TransportUnavailable(TransportError, Unavailable):
    """The broker cannot take or answer a request right now; the operation may be retried."""

    dependency = "broker"


class RecordRefused(TransportError):
    """The broker refuses the record itself (too large, invalid): sending it again cannot succeed."""


class ConnectorError(VigilError):
    """A company system (the order system, billing, the CRM) failed a call; ``system`` names it as configured."""

    def __init__(self, system: str, message: str) -> None:
        super().__init__(message)
        self.system = system


class ConnectorTimeout(ConnectorError, Unavailable):
    """The system did not answer within the connector's timeout. A write may have been done all the same: it is
    retried only with the same idempotency key, so that the system answers the retry without doing it twice."""

    def __init__(self, system: str, message: str) -> None:
        super().__init__(system, message)
        self.dependency = system


class ConnectorUnavailable(ConnectorError, Unavailable):
    """The system cannot be reached, or answered that it cannot serve now (5xx, 429); the call may be retried."""

    def __init__(self, system: str, message: str, *, status: int | None = None) -> None:
        super().__init__(system, message)
        self.dependency = system
        self.status = status


class ConnectorRefused(ConnectorError):
    """The system said no (a 4xx: unknown order, refund over what is left, a bad token): asking again cannot
    succeed. ``status`` is the HTTP status and ``detail`` the system's own words."""

    def __init__(self, system: str, message: str, *, status: int, detail: str) -> None:
        super().__init__(system, message)
        self.status = status
        self.detail = detail


class Overrun(VigilError):
    """Work inside a database transaction outran the transaction's time limit while vigil itself kept the event loop
    busy: the database was not what was slow, so this is neither ``StoreUnavailable`` nor worth a retry."""


class StartupError(VigilError):
    """A part of the daemon did not start."""


class InvalidCursor(VigilError):
    """A cursor for a page of a conversation that is not one vigil gave out (garbled, or made up)."""


class AuthError(VigilError):
    """A panel sign-in was refused or failed; the message says why and is safe to show to the person signing in."""


class AuthUnavailable(AuthError):
    """The sign-in provider cannot be reached or gave an unusable answer; signing in may work later."""


class LeaseLost(VigilError):
    """Work held a named lease (vigil/flow/leases.py) that ran out and passed to another holder before the work
    wrote its results: the transaction that would have written them is rolled back, the other holder does the work."""

    def __init__(self, name: str, owner: str) -> None:
        super().__init__(f"{owner} no longer holds the lease {name!r}; another holder has taken it")
        self.name = name
        self.owner = owner


class Fenced(VigilError):
    """A record's partition was given to another consumer (a later tenure of it exists, vigil/flow/tenure.py) while
    this one was still handling it: the transaction that would have written for it is rolled back, and the record is
    left to the new owner, which reads it again."""

    def __init__(self, latest: dict[str, int]) -> None:
        super().__init__(f"{', '.join(sorted(latest))} moved to another consumer; leaving its records to the new owner")
        self.latest = latest
        """The latest epoch of each partition (scope) found moved."""

    def fences(self, scope: str, epoch: int) -> bool:
        """Whether a write under the tenure (``scope``, ``epoch``) is refused."""
        return epoch < self.latest.get(scope, epoch)


class RulebookError(VigilError):
    """A rulebook (actions, policy, risk patterns) cannot be read or is invalid; the message names the file, the
    action or rule, and the field (stops start-up, or fails ``vigil policy check``)."""


class InvalidArguments(VigilError):
    """An action request vigil cannot decide on: an action the rulebook does not know, or arguments its schema
    refuses. ``reason`` is ``unknown_action`` or ``invalid_arguments``; the request is denied under that name."""

    def __init__(self, action: str, reason: str, detail: str) -> None:
        super().__init__(f"{action}: {detail}")
        self.action = action
        self.reason = reason
        self.detail = detail
