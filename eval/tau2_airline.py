"""τ²-bench airline: each gold write action as a request to the ``tau2-airline`` rulebook, and variants of it that
each break one rule of the airline's policy (the cases and their variants: ``eval.tau2_airline_variants``).

The facts are the ones ``knowledge/rulebooks/tau2-airline/policy.cedar`` documents, computed from the airline's
database as it is when the action runs: the task's earlier gold actions are applied first (a basic economy
reservation upgraded to business can then be cancelled; a gift card that paid has less on it). "Now" is the
policy's current time, 2024-05-15 15:00 EST. The conversation facts are those a correct agent has established: the
user gave their user id and said yes. The reason for a cancellation is read from the user's instructions: feeling
sick or unwell is ``health``, weather is ``weather``, anything else is a ``change_of_plan``.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from eval.tau2_data import cents

NOW = datetime(2024, 5, 15, 15, 0, 0)
"""policy.md: "The current time is 2024-05-15 15:00:00 EST." """
WRITES = frozenset(
    {
        "book_reservation",
        "cancel_reservation",
        "update_reservation_baggages",
        "update_reservation_flights",
        "update_reservation_passengers",
        "send_certificate",
    }
)
BAG_CENTS, INSURANCE_CENTS = 5000, 3000
HEALTH = re.compile(r"\b(sick|unwell|ill|illness|health|hospital|medical|injur\w*)\b", re.IGNORECASE)
WEATHER = re.compile(r"\b(weather|storm|snow|hurricane)\b", re.IGNORECASE)


class Airline:
    """The airline's database, with the indexes the facts need."""

    def __init__(self, db: dict[str, Any]) -> None:
        self.users: dict[str, Any] = db["users"]
        self.flights: dict[str, Any] = db["flights"]
        self.reservations: dict[str, Any] = db["reservations"]
        self.methods = {pm_id: pm for user in self.users.values() for pm_id, pm in user["payment_methods"].items()}

    def day(self, flight: dict[str, Any]) -> dict[str, Any]:
        """The flight's record on its date (``{}`` when it does not fly that day)."""
        record: dict[str, Any] = self.flights.get(flight["flight_number"], {}).get("dates", {}).get(flight["date"], {})
        return record

    def bookable(self, flight: dict[str, Any], cabin: str, passengers: int) -> bool:
        """policy.md: only an ``available`` flight can be booked, with a seat for each passenger."""
        day = self.day(flight)
        return day.get("status") == "available" and day["available_seats"][cabin] >= passengers

    def price(self, flight: dict[str, Any], cabin: str) -> int:
        """The flight's price in ``cabin`` today, in cents (0 when it is not for sale)."""
        return cents(self.day(flight).get("prices", {}).get(cabin, 0))


def vigil_args(action: str, args: dict[str, Any]) -> dict[str, Any]:
    """tau2's arguments as the rulebook's actions take them: money in integer cents."""
    out = dict(args)
    if action == "book_reservation":
        out["payment_methods"] = [
            {"payment_id": p["payment_id"], "amount_cents": cents(p["amount"])} for p in args["payment_methods"]
        ]
    if action == "send_certificate":
        out["amount_cents"] = cents(out.pop("amount"))
    return out


def cancellation_reason(instructions: str) -> str:
    """The reason a user with these instructions gives for cancelling."""
    if HEALTH.search(instructions):
        return "health"
    if WEATHER.search(instructions):
        return "weather"
    return "change_of_plan"


def facts(world: Airline, user_id: str, action: str, args: dict[str, Any], reason: str) -> dict[str, Any]:
    """The facts ``policy.cedar`` reads, for ``action`` with ``args``, asked by ``user_id``, in ``world``'s state."""
    user = world.users[user_id]
    context: dict[str, Any] = {
        "identity_verified": True,
        "confirmed": True,
        "user_id": user_id,
        "membership": user["membership"],
        "user_payment_ids": sorted(user["payment_methods"]),
    }
    if "payment_id" in args:
        context["payment_source"] = args["payment_id"].rsplit("_", 1)[0]
        method = world.methods.get(args["payment_id"], {})
        if "amount" in method:
            context["payment_balance_cents"] = cents(method["amount"])
    reservation = world.reservations.get(args.get("reservation_id", ""))
    if reservation is not None:
        context |= _reservation_facts(world, reservation, reason)
        context["membership"] = world.users[reservation["user_id"]]["membership"]
    if action == "update_reservation_flights" and reservation is not None:
        context |= _new_flight_facts(world, reservation, args)
    if action in ("book_reservation", "update_reservation_passengers"):
        context["passenger_count"] = len(args["passengers"])
    if action == "book_reservation":
        context |= _booking_facts(world, args)
    return context


def _reservation_facts(world: Airline, reservation: dict[str, Any], reason: str) -> dict[str, Any]:
    statuses = [world.day(flight).get("status") for flight in reservation["flights"]]
    created = datetime.fromisoformat(reservation["created_at"])
    return {
        "reservation_user_id": reservation["user_id"],
        "reservation_status": reservation.get("status") or "active",
        "reservation_cabin": reservation["cabin"],
        "reservation_flights": [
            {"flight_number": f["flight_number"], "date": f["date"]} for f in reservation["flights"]
        ],
        "reservation_origin": reservation["origin"],
        "reservation_destination": reservation["destination"],
        "reservation_flight_type": reservation["flight_type"],
        "reservation_passenger_count": len(reservation["passengers"]),
        "reservation_total_baggages": reservation["total_baggages"],
        "reservation_insurance": reservation["insurance"] == "yes",
        "minutes_since_booking": int((NOW - created).total_seconds() // 60),
        "flown": any(status in ("flying", "landed") for status in statuses),
        "airline_cancelled": "cancelled" in statuses,
        "delayed": "delayed" in statuses,
        "cancellation_reason": reason,
    }


def _kept(reservation: dict[str, Any], cabin: str) -> dict[tuple[str, str], int]:
    """The reservation's flights that keep their price under ``cabin`` (tau2: same flight, date and cabin)."""
    if cabin != reservation["cabin"]:
        return {}
    return {(f["flight_number"], f["date"]): cents(f["price"]) for f in reservation["flights"]}


def _new_flight_facts(world: Airline, reservation: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    flights, cabin, count = args["flights"], args["cabin"], len(reservation["passengers"])
    kept = _kept(reservation, cabin)
    new_price = sum(kept.get((f["flight_number"], f["date"])) or world.price(f, cabin) for f in flights)
    old_price = sum(cents(f["price"]) for f in reservation["flights"])
    legs = [world.flights.get(f["flight_number"], {}) for f in flights]
    return {
        "new_origin": legs[0].get("origin", ""),
        "new_end": legs[-1].get("destination", ""),
        "new_airports": sorted({leg.get(end, "") for leg in legs for end in ("origin", "destination")}),
        "new_flights_bookable": all(
            world.bookable(f, cabin, count) for f in flights if (f["flight_number"], f["date"]) not in kept
        ),
        "price_difference_cents": (new_price - old_price) * count,
    }


def _booking_facts(world: Airline, args: dict[str, Any]) -> dict[str, Any]:
    count, cabin, payments = len(args["passengers"]), args["cabin"], args["payment_methods"]
    sources = [p["payment_id"].rsplit("_", 1)[0] for p in payments]
    price = sum(world.price(f, cabin) for f in args["flights"]) * count + BAG_CENTS * args["nonfree_baggages"]
    return {
        "payment_ids": sorted({p["payment_id"] for p in payments}),
        "certificates": sources.count("certificate"),
        "gift_cards": sources.count("gift_card"),
        "credit_cards": sources.count("credit_card"),
        "payments_total_cents": sum(p["amount_cents"] for p in payments),
        "price_cents": price + (INSURANCE_CENTS * count if args["insurance"] == "yes" else 0),
        "payments_over_balance": any(
            p["amount_cents"] > cents(world.methods[p["payment_id"]]["amount"])
            for p in payments
            if "amount" in world.methods.get(p["payment_id"], {})
        ),
        "flights_bookable": all(world.bookable(f, cabin, count) for f in args["flights"]),
    }


def apply(world: Airline, action: str, args: dict[str, Any]) -> None:
    """What the airline's tool does to the database (tau2's airline tools), so later actions see it."""
    if action == "book_reservation":
        _book(world, args)
        return
    if action == "send_certificate":
        return
    reservation = world.reservations[args["reservation_id"]]
    if action == "cancel_reservation":
        reservation["status"] = "cancelled"
        for payment in reservation["payment_history"]:
            _pay(world, payment["payment_id"], -cents(payment["amount"]))
    elif action == "update_reservation_flights":
        kept = _kept(reservation, args["cabin"])
        facts_ = _new_flight_facts(world, reservation, args)
        reservation["flights"] = [
            {**f, "price": (kept.get((f["flight_number"], f["date"])) or world.price(f, args["cabin"])) / 100}
            for f in args["flights"]
        ]
        reservation["cabin"] = args["cabin"]
        _pay(world, args["payment_id"], facts_["price_difference_cents"])
    elif action == "update_reservation_baggages":
        extra = max(0, args["nonfree_baggages"] - reservation["nonfree_baggages"])
        reservation |= {"total_baggages": args["total_baggages"], "nonfree_baggages": args["nonfree_baggages"]}
        _pay(world, args["payment_id"], BAG_CENTS * extra)
    elif action == "update_reservation_passengers":
        reservation["passengers"] = args["passengers"]


def _book(world: Airline, args: dict[str, Any]) -> None:
    number = f"NEW{len(world.reservations) % 1000:03d}"
    world.reservations[number] = {
        **{k: args[k] for k in ("user_id", "origin", "destination", "flight_type", "cabin", "passengers")},
        "reservation_id": number,
        "flights": [{**f, "price": world.price(f, args["cabin"]) / 100} for f in args["flights"]],
        "payment_history": [
            {"payment_id": p["payment_id"], "amount": p["amount_cents"] / 100} for p in args["payment_methods"]
        ],
        "created_at": NOW.isoformat(),
        "total_baggages": args["total_baggages"],
        "nonfree_baggages": args["nonfree_baggages"],
        "insurance": args["insurance"],
    }
    for payment in args["payment_methods"]:
        _pay(world, payment["payment_id"], payment["amount_cents"])
    for flight in args["flights"]:
        seats = world.day(flight).get("available_seats")
        if seats:
            seats[args["cabin"]] -= len(args["passengers"])


def _pay(world: Airline, method: str, amount_cents: int) -> None:
    """Take ``amount_cents`` from a gift card or certificate (a negative amount refunds it); cards are not tracked."""
    card = world.methods.get(method)
    if card is not None and "amount" in card:
        card["amount"] = (cents(card["amount"]) - amount_cents) / 100
