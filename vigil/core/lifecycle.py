"""Where the daemon is in its life: the phases ``/readyz`` names while it is not running."""

from __future__ import annotations

import enum


class Phase(enum.StrEnum):
    """The daemon's phase; its value is what ``/readyz`` says (under ``pipeline``) while it is not running, except
    while ``PREPARING``, when it names the capability's start-up step under way (``Step.phase``: "migrating the
    database", "loading the knowledge", ...)."""

    STARTING = "starting"
    PREPARING = "preparing"
    CONNECTING = "connecting to the brokers"
    RUNNING = "running"
    STOPPING = "stopping"
