"""Wire format v1: the one place where records become events.

Input records carry one JSON object each (UTF-8; Kafka key = ``conversation_id``) of one of three types:
``message``, ``case`` and ``feedback``. vigil's output is a ``suggestion``. ``parse`` turns raw bytes into an
event or raises ``Rejected`` with a stable reason code; nothing else in vigil parses the wire format.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from vigil.core.errors import Rejected

SCHEMA_VERSION = 1
EVENT_TYPES = ("message", "case", "feedback")
MAX_DEPTH = 64
"""The deepest nesting of objects and arrays accepted (the record itself is level 1): far deeper than any real
event, and far below Python's recursion limit (1,000) on every supported version."""
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
"""Timestamps are accepted from ``EARLIEST`` to ``LATEST``, compared as instants: within that range converting one
to UTC cannot overflow (``0001-01-01T00:00:00+01:00`` would be in year 0)."""

# RFC 3339's date-time, with its zone: pydantic alone would take a number of seconds (or, past 2e10, milliseconds),
# a minute without its seconds, or an offset without its colon.
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", re.ASCII)
_AWARE = TypeAdapter[datetime](AwareDatetime)


def rfc3339(value: object) -> object:
    """The aware ``datetime`` an RFC 3339 date-time with its zone names (a ``datetime`` given in code passes as it
    is). Parsed here, not by the field: a strict model's field would take no string from a validator."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        raise ValueError("an RFC 3339 date-time with its zone, e.g. 2026-11-02T09:00:00Z")
    try:
        return _AWARE.validate_strings(value)
    except ValidationError as exc:  # a field out of its range: month 13, second 60, an offset of 24 hours
        raise ValueError(exc.errors(include_url=False)[0]["msg"]) from None


Timestamp = Annotated[AwareDatetime, BeforeValidator(rfc3339)]
"""An aware date-time, written RFC 3339 with its zone."""
Id = Annotated[str, StringConstraints(min_length=1, max_length=256)]
Name = Annotated[str, StringConstraints(max_length=256)]
Role = Literal["customer", "analyst", "bot", "system"]
CaseChange = Literal["opened", "assigned", "escalated", "status", "closed", "reopened"]
Verdict = Literal["accepted", "edited", "dismissed", "approved", "rejected"]
ApproverRole = Literal["analyst", "lead", "admin"]
SuggestionKind = Annotated[str, StringConstraints(min_length=1, max_length=32, pattern=r"^[a-z][a-z0-9_]*$")]
"""What a suggestion is: lower-case snake case, named by the capability that makes it (``answer``, ...). The kinds
vigil knows are listed in docs/wire-format.md; a consumer should show one it does not know as plain text."""


ALL_TENANTS = "*"
"""Not a tenant: the panel's grant of every tenant, so no event may name it."""


def _not_all_tenants(value: str | None) -> str | None:
    if value == ALL_TENANTS:
        raise ValueError(f"{ALL_TENANTS!r} means every tenant; it cannot be one")
    return value


class _Wire(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, extra="ignore")

    schema_version: Literal[1] = Field(description="Always 1 for this format.")

    @field_validator("tenant", check_fields=False)
    @classmethod
    def _a_tenant(cls, value: str | None) -> str | None:
        return _not_all_tenants(value)


class Message(_Wire):
    """A chat message from the customer, the analyst, a bot or the system."""

    type: Literal["message"]
    message_id: Id
    conversation_id: Id
    tenant: Id | None = None
    sent_at: Timestamp
    role: Role
    author: Name | None = None
    text: str
    metadata: dict[str, Any] | None = None

    @property
    def id(self) -> str:
        """The event's idempotency key."""
        return self.message_id

    @property
    def occurred_at(self) -> datetime:
        """When it happened, by the sender's clock."""
        return self.sent_at


class Resolution(BaseModel):
    """How a closed case was resolved."""

    model_config = ConfigDict(strict=True, frozen=True, extra="ignore")

    resolved_by: Literal["human", "bot", "customer"]
    summary: str | None = None
    csat: Annotated[int, Field(ge=1, le=5)] | None = None


class CaseEvent(_Wire):
    """A change in the case's life: opened, assigned, escalated, status, closed, reopened."""

    type: Literal["case"]
    event_id: Id
    conversation_id: Id
    tenant: Id | None = None
    at: Timestamp
    event: CaseChange
    assignee: Name | None = None
    priority: Name | None = None
    status: Name | None = None
    category: Name | None = Field(
        default=None, description="On `opened`: the platform's category of the case (which procedure it follows)."
    )
    resolution: Resolution | None = None

    @model_validator(mode="after")
    def _says_what_changed(self) -> CaseEvent:
        if self.event == "status" and not self.status:
            raise ValueError("a status event needs status")
        if self.event == "assigned" and not self.assignee:
            raise ValueError("an assigned event needs assignee")
        return self

    @property
    def id(self) -> str:
        return self.event_id

    @property
    def occurred_at(self) -> datetime:
        return self.at


class Feedback(_Wire):
    """An analyst's verdict on a suggestion."""

    type: Literal["feedback"]
    feedback_id: Id
    suggestion_id: Id
    conversation_id: Id
    tenant: Id | None = None
    verdict: Verdict
    by: Name | None = None
    at: Timestamp
    text: str | None = None
    role: ApproverRole | None = Field(
        default=None,
        description="For `approved` and `rejected` of an action: the role of `by`, as the platform vouches for it "
        "(an action the policy holds for a lead runs only on a lead's approval).",
    )
    arguments_hash: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")] | None = Field(
        default=None,
        description="For `approved`: the `arguments_hash` of the action as the approver saw it; an approval of "
        "arguments that have changed since is refused.",
    )
    action_id: Id | None = Field(
        default=None,
        description="For `approved` and `rejected` of an action: the action decided (the panel's API sets it). "
        "Without it, the action is the one the judged `action` suggestion shows.",
    )
    proof: Annotated[str, StringConstraints(max_length=4096)] | None = Field(
        default=None,
        description="For `approved` and `rejected` of an action: the signed statement of the decision (a JWT, "
        "docs/actions.md); a decision without a valid one is refused. The panel's API signs it.",
    )

    @property
    def id(self) -> str:
        return self.feedback_id

    @property
    def occurred_at(self) -> datetime:
        return self.at


Event: TypeAlias = Message | CaseEvent | Feedback
"""Any v1 event: what a source delivers and the pipeline handles."""
_EVENT = TypeAdapter[Event](Annotated[Event, Field(discriminator="type")])


class SourceRef(BaseModel):
    """What a suggestion is based on: an article, an FAQ, a mined case, a policy rule."""

    model_config = ConfigDict(frozen=True)

    kind: str
    id: str
    title: str | None = None
    score: float | None = None


class Action(BaseModel):
    """What an action suggestion would do if the analyst approved it: the operation and its arguments."""

    model_config = ConfigDict(frozen=True, extra="allow")

    name: Annotated[str, Field(min_length=1, description="The operation, as the system that runs it names it.")]
    arguments: dict[str, Any] = Field(default_factory=dict, description="Its arguments, by name.")


class StepRef(BaseModel):
    """Where a ``next_step`` suggestion sits: the procedure and the label of the step it suggests."""

    model_config = ConfigDict(frozen=True)

    procedure: str
    label: str


DRAFT_MARK = "Drafted by AI from the sources"
"""How a suggestion's ``why`` begins when a language model wrote its text; the panel labels such cards as
machine-written."""


class Suggestion(BaseModel):
    """vigil's output: what it suggests to the analyst, with its sources."""

    model_config = ConfigDict(frozen=True)

    type: Literal["suggestion"] = "suggestion"
    schema_version: Literal[1] = 1
    suggestion_id: Id
    conversation_id: Id
    tenant: Id
    in_reply_to: Id | None = None
    created_at: AwareDatetime
    kind: SuggestionKind = Field(
        description="What kind of suggestion, in snake case; docs/wire-format.md lists the kinds vigil makes."
    )
    text: str
    why: str | None = Field(default=None, description="Why vigil spoke, for the analyst.")
    confidence: Annotated[float, Field(ge=0.0, le=1.0)]
    sources: list[SourceRef] = []
    action: Action | None = None
    step: StepRef | None = Field(default=None, description="For `next_step`: the procedure and the step suggested.")
    latency_ms: Annotated[float, Field(ge=0.0)]

    def to_json(self) -> bytes:
        """The suggestion as a v1 wire record."""
        return self.model_dump_json(exclude_none=True).encode()


def parse(raw: bytes | None, *, max_event_bytes: int, max_text_bytes: int) -> Event:
    """Decode one input record.

    Raises:
        Rejected: with ``reason`` one of ``empty``, ``too_large``, ``invalid_utf8``, ``invalid_json``,
            ``too_deep``, ``not_an_object``, ``unknown_type``, ``unsupported_schema_version``,
            ``invalid_field``, ``timestamp_out_of_range``, ``text_too_long``.
    """
    if not raw:
        raise Rejected("empty", "the record has no value")
    if len(raw) > max_event_bytes:
        raise Rejected("too_large", f"{len(raw)} bytes, more than the limit of {max_event_bytes}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Rejected("invalid_utf8", f"byte {exc.start}: {exc.reason}") from exc
    obj, overflowed = _load_json(text)
    if not isinstance(obj, dict):
        raise Rejected("not_an_object", f"the value is a JSON {type(obj).__name__}, not an object")
    _check_envelope(obj)
    if overflowed or _may_hold_refused_values(text):
        _check_values(obj)
    try:
        event = _EVENT.validate_json(text, strict=True)
    except ValidationError as exc:
        raise Rejected("invalid_field", _describe(exc)) from exc
    _check_time(event)
    for field, value in _texts(event):
        size = len(value.encode())
        if size > max_text_bytes:
            raise Rejected("text_too_long", f"{field} is {size} bytes, more than the limit of {max_text_bytes}")
    return event


def addressed(event: Event, *, tenant: str | None, conversation_id: str | None) -> Event:
    """``event`` as its transport addressed it (an MQTT topic names tenant and conversation): a tenant the event
    leaves out is taken from the address; an event that contradicts its address is refused.

    Raises:
        Rejected: ``invalid_field`` for a tenant no event could hold (see ``check_id``); ``address_mismatch``,
            naming the field. (A conversation id that is not the event's, valid or not, is a mismatch: one that is
            the event's was checked with it.)
    """
    if tenant is not None:
        check_id(tenant, field="the topic's tenant", tenant=True)
    if conversation_id is not None and conversation_id != event.conversation_id:
        raise Rejected(
            "address_mismatch",
            f"conversation_id {event.conversation_id!r} but the record's topic or key names {conversation_id!r}",
        )
    if tenant is None:
        return event
    if event.tenant is None:
        return event.model_copy(update={"tenant": tenant})
    if event.tenant != tenant:
        raise Rejected("address_mismatch", f"tenant {event.tenant!r} but the topic names {tenant!r}")
    return event


_ID = TypeAdapter[str](Id)


def check_id(value: str, *, field: str, tenant: bool = False) -> None:
    """Refuse an id an event could not hold, for ids read from elsewhere than the payload (an MQTT topic level):
    the rules of ``parse`` (no NUL character or lone surrogate, 1 to 256 characters; a tenant is not ``*``).

    Raises:
        Rejected: ``invalid_field``, naming ``field``.
    """
    try:
        _walk(value, 1)
    except _Refused as refused:
        raise Rejected(refused.reason, f"{field}: {refused.problem}") from None
    try:
        _ID.validate_python(value, strict=True)
        if tenant:
            _not_all_tenants(value)
    except (ValidationError, ValueError) as exc:
        problem = exc.errors(include_url=False)[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise Rejected("invalid_field", f"{field}: {problem}") from exc


class _Overflow(Exception):
    """A number too large for a float: it would read as infinite."""


def _no_constants(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise _Overflow
    return value


# Built once: json.loads with options builds a decoder per call.
_DECODER = json.JSONDecoder(parse_constant=_no_constants, parse_float=_finite)
_OVERFLOWING_DECODER = json.JSONDecoder(parse_constant=_no_constants)


def _load_json(text: str) -> tuple[object, bool]:
    """The JSON value of ``text``, and whether a number in it was too large for a float (it reads as infinite)."""
    try:
        try:
            return _DECODER.decode(text), False
        except _Overflow:
            return _OVERFLOWING_DECODER.decode(text), True
    except RecursionError as exc:
        # json.loads recurses once per level, up to the interpreter's limit (about 1,000 levels on 3.11 and 3.12,
        # about 10,000 on 3.13): deeper than that is too deep by any measure.
        raise Rejected("too_deep", f"objects and arrays nested more than {MAX_DEPTH} deep") from exc
    except ValueError as exc:
        raise Rejected("invalid_json", str(exc)[:200] or type(exc).__name__) from exc


def _check_envelope(obj: dict[str, Any]) -> None:
    kind = obj.get("type")
    if kind not in EVENT_TYPES:
        shown = json.dumps(kind)[:60] if "type" in obj else "missing"
        raise Rejected("unknown_type", f"type {shown}; expected one of {', '.join(EVENT_TYPES)}")
    version = obj.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        shown = json.dumps(version)[:60] if "schema_version" in obj else "missing"
        raise Rejected("unsupported_schema_version", f"schema_version {shown}; this vigil reads {SCHEMA_VERSION}")


class _Refused(Exception):
    """A value ``_walk`` refuses; ``path`` collects the keys and indexes above it as the walk unwinds."""

    def __init__(self, reason: str, problem: str) -> None:
        super().__init__(problem)
        self.reason = reason
        self.problem = problem
        self.path: list[str | int] = []


def _may_hold_refused_values(text: str) -> bool:
    """Whether the JSON ``text`` (decoded from valid UTF-8, its numbers finite) could hold what ``_check_values``
    refuses. Its strings can hold a NUL or a lone surrogate only as a ``\\u`` escape (UTF-8 has no surrogates, and
    JSON no raw control characters), and it nests at most as deep as it has ``{`` and ``[``: without either, there
    is nothing to walk."""
    return "\\u" in text or text.count("{") + text.count("[") > MAX_DEPTH


def _check_values(obj: dict[str, Any]) -> None:
    """Refuse nesting deeper than ``MAX_DEPTH`` and values no database column can hold: NUL characters, lone
    surrogates, numbers that are not finite."""
    try:
        _walk(obj, 1)
    except _Refused as refused:
        raise Rejected(refused.reason, f"{_path(reversed(refused.path)) or 'value'}: {refused.problem}") from None


def _walk(value: object, depth: int) -> None:
    # Only a refusal builds the path to its value: building it on the way down costs memory quadratic in the depth.
    if isinstance(value, str):
        if "\x00" in value:
            raise _Refused("invalid_field", "contains a NUL character")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _Refused("invalid_field", "contains a lone surrogate") from None
    elif isinstance(value, dict | list):
        if depth > MAX_DEPTH:
            raise _Refused("too_deep", f"objects and arrays nested more than {MAX_DEPTH} deep")
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            _walk(key, depth)  # a bad key is reported at its object's path, and never shown itself
            try:
                _walk(item, depth + 1)
            except _Refused as refused:
                refused.path.append(key)
                raise
    elif isinstance(value, float) and not math.isfinite(value):
        raise _Refused("invalid_field", "not a finite number")


def _path(steps: Iterable[str | int]) -> str:
    """``metadata.tags[2]``, each key cut to 40 characters, the whole to 200."""
    text = "".join(f"[{step}]" if isinstance(step, int) else f".{step[:40]}" for step in steps)
    return text.removeprefix(".")[:200]


def _check_time(event: Event) -> None:
    # Comparing aware datetimes subtracts them as timedeltas, which cannot overflow where a conversion to UTC can.
    if not EARLIEST <= event.occurred_at <= LATEST:
        field = "sent_at" if isinstance(event, Message) else "at"
        raise Rejected(
            "timestamp_out_of_range",
            f"{field} {event.occurred_at.isoformat()} is not between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d} (UTC)",
        )


def _texts(event: Event) -> Iterator[tuple[str, str]]:
    if isinstance(event, CaseEvent):
        summary = event.resolution.summary if event.resolution else None
        if summary is not None:
            yield "resolution.summary", summary
    elif event.text is not None:
        yield "text", event.text


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False)[:3]:
        loc = ".".join(str(p) for p in error["loc"][1:]) or "value"
        parts.append(f"{loc}: {error['msg']}")
    return "; ".join(parts)


def json_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema of each v1 type, as published in ``docs/wire-format.md``."""
    return {
        "message": Message.model_json_schema(),
        "case": CaseEvent.model_json_schema(),
        "feedback": Feedback.model_json_schema(),
        "suggestion": Suggestion.model_json_schema(mode="serialization"),
    }
