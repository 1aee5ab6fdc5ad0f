"""Where the daemon is in its life: the phases ``/readyz`` names while it is not running."""

from __future__ import annotations

import enum


class Phase(enum.StrEnum):
    """The daemon's phase; its value is what ``/readyz`` says (under ``pipeline``) while it is not running."""

    STARTING = "starting"
    MIGRATING = "migrating the database"
    LOADING_KNOWLEDGE = "loading the knowledge"
    CONNECTING = "connecting to the brokers"
    RUNNING = "running"
    STOPPING = "stopping"
