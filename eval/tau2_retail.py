"""τ²-bench retail: each gold write action as a request to the ``tau2-retail`` rulebook, and variants of it that
each break one rule of the store's policy.

The facts are the ones ``knowledge/rulebooks/tau2-retail/policy.cedar`` documents, computed from the store's
database as it is when the action runs: the task's earlier gold actions are applied first (an order whose items
were modified is ``pending (item modified)``; a gift card that paid a difference has less on it). The conversation
facts are those a correct agent has established: the user is authenticated and said yes. The authenticated user is
the owner of the first order the gold actions touch (or the user whose address they change).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from eval.tau2_data import PASS, Case, Task, cents, chooser, fresh, gold_writes, request, variant

WRITES = frozenset(
    {
        "cancel_pending_order",
        "modify_pending_order_address",
        "modify_pending_order_payment",
        "modify_pending_order_items",
        "modify_user_address",
        "return_delivered_order_items",
        "exchange_delivered_order_items",
    }
)
SWAPS = frozenset({"modify_pending_order_items", "exchange_delivered_order_items"})
ITEM_ACTIONS = SWAPS | {"return_delivered_order_items"}
STATUS_RULE = {
    "cancel_pending_order": "cancel_only_pending",
    "modify_pending_order_address": "modify_only_pending",
    "modify_pending_order_payment": "modify_only_pending",
    "modify_pending_order_items": "modify_only_pending",
    "return_delivered_order_items": "return_only_delivered",
    "exchange_delivered_order_items": "exchange_only_delivered",
}
TOOL_STATUS = {name: "delivered" if "delivered" in name else "pending" for name in STATUS_RULE}
"""The status tau2's own tool requires of the order (it raises an error otherwise, and changes nothing)."""
REJECTED = "gold the tool rejects"
ADDRESS = ("address1", "address2", "city", "state", "country", "zip")


class Store:
    """The store's database, with the indexes the facts need."""

    def __init__(self, db: dict[str, Any]) -> None:
        self.users: dict[str, Any] = db["users"]
        self.orders: dict[str, Any] = db["orders"]
        self.items = {
            item_id: (product["product_id"], item)
            for product in db["products"].values()
            for item_id, item in product["variants"].items()
        }
        self.products: dict[str, Any] = db["products"]
        self.methods = {pm_id: pm for user in self.users.values() for pm_id, pm in user["payment_methods"].items()}


def cases(task: Task, db: dict[str, Any]) -> Iterator[Case]:
    """The task's gold write actions and their variants, in the task's order, each action applied after."""
    store = Store(fresh(db))
    writes = list(gold_writes(task, WRITES))
    if not writes:
        return
    user = _authenticated(store, writes[0][1]["arguments"])
    for position, action in writes:
        name, args = action["name"], action["arguments"]
        context = facts(store, user, name, args)
        if name in STATUS_RULE and context["order_status"] != TOOL_STATUS[name]:
            # tau2's gold lists a call its own tool refuses (an exchange of a pending order, task 64): it changes
            # nothing, and the gate must refuse it too.
            yield Case(task.id, REJECTED, STATUS_RULE[name], request(name, args, context))
            continue
        gold = Case(task.id, "gold", PASS, request(name, args, context))
        yield gold
        yield from variants(store, user, gold, f"{task.id}/{position}")
        apply(store, name, args)


def _authenticated(store: Store, args: dict[str, Any]) -> str:
    if "order_id" in args:
        return str(store.orders[args["order_id"]]["user_id"])
    return str(args["user_id"])


def facts(store: Store, user_id: str, action: str, args: dict[str, Any]) -> dict[str, Any]:
    """The facts ``policy.cedar`` reads, for ``action`` with ``args``, asked by ``user_id``, in ``store``'s state."""
    user = store.users[user_id]
    context: dict[str, Any] = {
        "identity_verified": True,
        "confirmed": True,
        "user_id": user_id,
        "user_payment_method_ids": sorted(user["payment_methods"]),
    }
    order = store.orders.get(args.get("order_id", ""))
    if order is not None:
        context |= {
            "order_user_id": order["user_id"],
            "order_status": order["status"],
            "order_item_ids": sorted({item["item_id"] for item in order["items"]}),
            "order_payment_method_id": order["payment_history"][0]["payment_method_id"],
            "order_total_cents": sum(cents(item["price"]) for item in order["items"]),
        }
    method = args.get("payment_method_id")
    if method is not None:
        context["payment_method_source"] = method.rsplit("_", 1)[0]
        if method in store.methods and "balance" in store.methods[method]:
            context["gift_card_balance_cents"] = cents(store.methods[method]["balance"])
    if action in SWAPS and order is not None:
        context |= _swap_facts(store, order, args["item_ids"], args["new_item_ids"])
    return context


def _swap_facts(store: Store, order: dict[str, Any], old_ids: list[str], new_ids: list[str]) -> dict[str, Any]:
    if len(old_ids) != len(new_ids) or any(new not in store.items for new in new_ids):
        return {"new_items_same_product": False, "new_items_differ": False, "new_items_available": False}
    olds = [store.items.get(old, ("", {"price": 0})) for old in old_ids]
    news = [store.items[new] for new in new_ids]
    return {
        "new_items_same_product": all(o[0] == n[0] for o, n in zip(olds, news, strict=True)),
        "new_items_differ": all(old != new for old, new in zip(old_ids, new_ids, strict=True)),
        "new_items_available": all(n[1]["available"] for n in news),
        "price_difference_cents": sum(cents(n[1]["price"]) for n in news)
        - sum(cents(_price_in(order, old, o[1]["price"])) for old, o in zip(old_ids, olds, strict=True)),
    }


def _price_in(order: dict[str, Any], item_id: str, default: float) -> float:
    return next((float(item["price"]) for item in order["items"] if item["item_id"] == item_id), default)


def apply(store: Store, action: str, args: dict[str, Any]) -> None:
    """What the store's tool does to the database (tau2's retail tools), so later actions see it."""
    if action == "modify_user_address":
        store.users[args["user_id"]]["address"] = {key: args[key] for key in ADDRESS}
        return
    order = store.orders[args["order_id"]]
    total = sum(float(item["price"]) for item in order["items"])
    if action == "cancel_pending_order":
        order["status"] = "cancelled"
        _credit(store, order["payment_history"][0]["payment_method_id"], total)
    elif action == "modify_pending_order_address":
        order["address"] = {key: args[key] for key in ADDRESS}
    elif action == "modify_pending_order_payment":
        _credit(store, args["payment_method_id"], -total)
        _credit(store, order["payment_history"][0]["payment_method_id"], total)
        order["payment_history"].append(
            {"transaction_type": "payment", "amount": total, "payment_method_id": args["payment_method_id"]}
        )
    elif action == "modify_pending_order_items":
        difference = 0.0
        for old, new in zip(args["item_ids"], args["new_item_ids"], strict=True):
            slot = next(item for item in order["items"] if item["item_id"] == old)
            variant_ = store.items[new][1]
            difference += float(variant_["price"]) - float(slot["price"])
            slot |= {"item_id": new, "price": variant_["price"], "options": variant_["options"]}
        _credit(store, args["payment_method_id"], -difference)
        order["status"] = "pending (item modified)"
    elif action == "exchange_delivered_order_items":
        order["status"] = "exchange requested"
    elif action == "return_delivered_order_items":
        order["status"] = "return requested"


def _credit(store: Store, method: str, dollars: float) -> None:
    card = store.methods.get(method)
    if card is not None and "balance" in card:
        card["balance"] = round(float(card["balance"]) + dollars, 2)


def variants(store: Store, user_id: str, gold: Case, key: str) -> Iterator[Case]:
    """Changes of ``gold`` that each break one rule, labelled with it (none where the data offers no way)."""
    action, args = gold.request.action, gold.request.args
    rng = chooser(key)
    yield variant(gold, "identity not verified", "identity_not_verified", context={"identity_verified": False})
    yield variant(gold, "not confirmed", "not_confirmed", context={"confirmed": False})
    if action == "modify_user_address":
        other = rng.choice(sorted(set(store.users) - {user_id}))
        yield _rebuilt(store, user_id, gold, "another user's account", "account_of_another_user", {"user_id": other})
        return
    order = store.orders[args["order_id"]]
    yield from _another_users_order(store, user_id, gold, order, rng)
    wrong = "processed" if order["status"] in ("pending", "delivered") else "pending"
    yield variant(gold, f"order {wrong}", STATUS_RULE[action], context={"order_status": wrong})
    if action == "cancel_pending_order":
        yield variant(gold, "reason not allowed", "cancel_reason_not_allowed", args={"reason": "found it cheaper"})
    if action in ITEM_ACTIONS:
        yield from _item_variants(store, user_id, gold, order, rng)
    if "payment_method_id" in args:
        yield from _payment_variants(store, user_id, gold, order, rng)


def _rebuilt(store: Store, user_id: str, gold: Case, name: str, rule: str, changes: dict[str, Any]) -> Case:
    """``gold`` with ``changes`` to its arguments, and the facts computed again for them."""
    args = {**gold.request.args, **changes}
    context = facts(store, user_id, gold.request.action, args)
    return Case(gold.task, name, rule, request(gold.request.action, args, context))


def _another_users_order(store: Store, user_id: str, gold: Case, order: dict[str, Any], rng: Any) -> Iterator[Case]:
    """The same request on another user's order in the same status (its items, when the action names items)."""
    action, args = gold.request.action, gold.request.args
    count = len(args.get("item_ids", []))
    others = sorted(
        oid
        for oid, other in store.orders.items()
        if other["user_id"] != user_id and other["status"] == order["status"] and len(other["items"]) >= count
    )
    if not others:
        return
    other = store.orders[rng.choice(others)]
    changes: dict[str, Any] = {"order_id": other["order_id"]}
    if count:
        changes["item_ids"] = [item["item_id"] for item in other["items"][:count]]
    if action in SWAPS:
        changes["new_item_ids"] = [_another_option(store, old, rng, available=True) for old in changes["item_ids"]]
    yield _rebuilt(store, user_id, gold, "another user's order", "order_of_another_user", changes)


def _another_option(store: Store, item_id: str, rng: Any, *, available: bool) -> str:
    product_id = store.items[item_id][0]
    options = sorted(
        other
        for other, variant_ in store.products[product_id]["variants"].items()
        if other != item_id and variant_["available"] == available
    )
    return rng.choice(options) if options else ""


def _item_variants(store: Store, user_id: str, gold: Case, order: dict[str, Any], rng: Any) -> Iterator[Case]:
    action, args = gold.request.action, gold.request.args
    items, first = list(args["item_ids"]), args["item_ids"][0]
    in_order = {item["item_id"] for item in order["items"]}
    outside = _another_option(store, first, rng, available=True)
    if outside and outside not in in_order:
        new = {"item_ids": [outside, *items[1:]]}
        if action in SWAPS and args["new_item_ids"][0] == outside:
            new["new_item_ids"] = [first, *args["new_item_ids"][1:]]
        yield _rebuilt(store, user_id, gold, "item not in the order", "items_not_in_order", new)
    if action not in SWAPS:
        return
    rest = list(args["new_item_ids"][1:])
    foreign = rng.choice(
        sorted(i for i, (p, v) in store.items.items() if p != store.items[first][0] and v["available"])
    )
    yield _rebuilt(
        store,
        user_id,
        gold,
        "new item of another product",
        "new_item_other_product",
        {"new_item_ids": [foreign, *rest]},
    )
    yield _rebuilt(
        store, user_id, gold, "new item same option", "new_item_same_option", {"new_item_ids": [first, *rest]}
    )
    unavailable = _another_option(store, first, rng, available=False)
    if unavailable:
        yield _rebuilt(
            store, user_id, gold, "new item unavailable", "new_item_unavailable", {"new_item_ids": [unavailable, *rest]}
        )


def _payment_variants(store: Store, user_id: str, gold: Case, order: dict[str, Any], rng: Any) -> Iterator[Case]:
    action, args = gold.request.action, gold.request.args
    mine = store.users[user_id]["payment_methods"]
    original = order["payment_history"][0]["payment_method_id"]
    source = args["payment_method_id"].rsplit("_", 1)[0]
    foreign = sorted(pm for pm in store.methods if pm not in mine and pm.startswith(source))
    yield _rebuilt(
        store,
        user_id,
        gold,
        "another user's payment method",
        "payment_method_not_users",
        {"payment_method_id": rng.choice(foreign)},
    )
    if action == "return_delivered_order_items":
        elsewhere = sorted(pm for pm in mine if pm != original and not pm.startswith("gift_card"))
        if elsewhere:
            yield _rebuilt(
                store,
                user_id,
                gold,
                "refund to another method",
                "refund_not_original_or_gift_card",
                {"payment_method_id": rng.choice(elsewhere)},
            )
    if action == "modify_pending_order_payment":
        yield _rebuilt(
            store, user_id, gold, "same method as before", "payment_same_as_original", {"payment_method_id": original}
        )
    yield from _short_gift_card(store, user_id, gold, original)


def _short_gift_card(store: Store, user_id: str, gold: Case, original: str) -> Iterator[Case]:
    """Paying with one of the user's gift cards that holds a cent less than it must cover."""
    action = gold.request.action
    if action == "return_delivered_order_items":
        return
    cards = sorted(
        pm for pm in store.users[user_id]["payment_methods"] if pm.startswith("gift_card") and pm != original
    )
    if not cards:
        return
    case = _rebuilt(store, user_id, gold, "gift card short", "gift_card_balance_short", {"payment_method_id": cards[0]})
    owed_key = "order_total_cents" if action == "modify_pending_order_payment" else "price_difference_cents"
    owed = case.request.context[owed_key]
    if owed > 0:
        yield variant(case, case.variant, case.expected, context={"gift_card_balance_cents": owed - 1})
