"""The knowledge section of the settings (``VIGIL_KNOWLEDGE__*``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator

RankingName = Literal["hybrid", "cross_validated", "adaptive"]


class KnowledgeSettings(BaseModel):
    """The knowledge store: help articles, FAQs, documents and knowledge mined from cases."""

    paths: list[Path] = Field(
        default_factory=list, description="Knowledge files or folders imported at start-up (vigil demo: bundled)."
    )
    model_path: Path | None = Field(default=None, description="Sentence-transformers model folder; default bundled.")
    chroma_url: str | None = Field(default=None, description="Chroma server, for several replicas; default on disk.")
    refresh_interval_s: float = Field(default=10.0, gt=0, description="How often to pick up knowledge changes.")
    embedding_threads: int = Field(default=1, ge=1, description="CPU threads for embeddings.")
    embedding_workers: int = Field(
        default=1,
        ge=1,
        description="Batches of questions embedded at once, each on a thread (and a core) of its own, by one model "
        "held once in memory. On 2 cores one is best: the event loop's share of each question fills the other "
        "(docs/benchmarks.md); more where the machine has cores to spare.",
    )
    embedder: Literal["onnx", "torch"] = Field(
        default="onnx", description="Embedding backend: ONNX Runtime (no torch at run time) or sentence-transformers."
    )
    onnx_cache: Path | None = Field(
        default=None, description="Folder of the model's ONNX export, made at first start; default ~/.cache/vigil/onnx."
    )
    batch_wait_s: float = Field(
        default=0.003, ge=0, le=1, description="How long a question waits for others to embed with it in one batch."
    )
    batch_max: int = Field(default=32, ge=1, description="The most questions embedded in one batch.")
    ranking: RankingName = Field(
        default="adaptive",
        description="How search fuses passages: the whole query's dense and BM25 rankings (hybrid), or with its "
        "sentences', a title ranking and the sum of an entry's top passages (cross_validated), or hybrid for a "
        "message of one or two sentences and cross_validated for a longer one (adaptive; docs/evaluation.md).",
    )

    reranker: Literal["fusion", "learned"] = Field(
        default="fusion",
        description="Who orders the first candidates: the fusion and its near-miss check (fusion), or a logistic "
        "model fitted on labelled questions over their scores (learned; docs/evaluation.md).",
    )

    tuned: bool = Field(
        default=True,
        description="Serve the model `vigil kb tune` made from this knowledge, once one has beaten the shipped model "
        "on held-back questions (<data dir>/models/current.json); off: the shipped model. model_path, when set, wins.",
    )
    tune_interval_s: float | None = Field(
        default=None,
        gt=0,
        description="How often the scheduled job tunes the model, under the miner's lease (604800: weekly). Unset by "
        "default: a run takes minutes of the CPU, a replay's simulated weeks would start real ones, and replicas "
        "serve a tuned model only when they share the data dir's models folder; until then `vigil kb tune`.",
    )
    tune_margin: float = Field(
        default=0.01,
        ge=0,
        description="How much higher the tuned model's MRR on the held-back questions must be than the shipped one's.",
    )
    tune_epochs: int = Field(
        default=1,
        ge=1,
        description="Passes over the training examples (a second made the model better by itself on the help centre, "
        "but no better as served and worse on customers' phrasings: it drifts further from what search is tuned for).",
    )
    tune_batch_size: int = Field(
        default=32, ge=2, description="Examples per training step; every other one's passage is a negative too."
    )
    tune_budget_s: float = Field(
        default=1800.0, gt=0, description="Training stops after this long (the model as it then is is judged)."
    )
    tune_threads: int | None = Field(
        default=None,
        ge=1,
        description="CPU threads for tuning; unset: one in the daemon (the other serves), every core in vigil kb tune.",
    )

    @field_validator("paths")
    @classmethod
    def _paths_exist(cls, paths: list[Path]) -> list[Path]:
        # Checked here, not at the first import: start-up would retry a missing folder as if it were an outage.
        for path in paths:
            if not path.exists():
                raise ValueError(f"no such file or folder: {path}")
        return paths

    @field_validator("model_path")
    @classmethod
    def _model_is_a_folder(cls, path: Path | None) -> Path | None:
        if path is not None and not path.is_dir():
            raise ValueError(f"no such folder: {path}")
        return path
