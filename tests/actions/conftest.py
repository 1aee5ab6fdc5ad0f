"""The action tests' fixtures: the demo's systems over HTTP (``tests.actions.systems``)."""

from tests.actions.systems import shop

__all__ = ["shop"]
