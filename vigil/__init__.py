"""vigil: a proactive copilot for customer-support analysts."""

from __future__ import annotations

__version__ = "0.1.0"
