"""Connectors: how an action reaches the company's systems (the order system, billing, the CRM) over HTTP, with
timeouts, retries only where a retry cannot do a thing twice, and the systems' answers turned into vigil's errors."""

from __future__ import annotations
