"""Where scheduled jobs speak: the pipeline's ``announce``, for capabilities set up before the pipeline exists.

A capability's jobs (the progress capability's reminders) are made in its ``setup``, before the composition root
builds the pipeline; they are given an ``Outlet``, which the root binds to the pipeline once there is one. A job
that speaks before then (or after the pipeline is gone) gets ``Unavailable``, and tries again at its next run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vigil.core.errors import Unavailable
from vigil.flow.skills import Proposal
from vigil.wire.events import Suggestion

if TYPE_CHECKING:
    from vigil.flow.pipeline import Pipeline


class PipelineUnavailable(Unavailable):
    """No pipeline to speak through yet."""

    dependency = "pipeline"


class Outlet:
    """A late-bound handle on the pipeline's ``announce``."""

    def __init__(self) -> None:
        self._pipeline: Pipeline | None = None

    def bind(self, pipeline: Pipeline | None) -> None:
        """Speak through ``pipeline`` from now on (None: nowhere)."""
        self._pipeline = pipeline

    async def announce(
        self, proposal: Proposal, *, conversation_id: str, tenant: str, key: str, in_reply_to: str | None = None
    ) -> Suggestion | None:
        """``Pipeline.announce`` on the bound pipeline.

        Raises:
            PipelineUnavailable: no pipeline is bound.
        """
        if self._pipeline is None:
            raise PipelineUnavailable("no pipeline to publish through yet")
        return await self._pipeline.announce(
            proposal, conversation_id=conversation_id, tenant=tenant, key=key, in_reply_to=in_reply_to
        )
