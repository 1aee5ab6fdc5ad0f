"""What a one-off `vigil` command imports: only what it uses, so it starts in a fraction of a second.

Each command runs in a fresh interpreter (as the console script does) and reports the modules it ended up with.
How long the commands take is measured by ``python -m bench.cli``, not asserted here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import RememberingEmbedder
from vigil.knowledge.onnx_export import default_cache_dir

TORCH = ("torch", "transformers", "sentence_transformers", "sklearn", "onnx")
EMBEDDINGS = (*TORCH, "onnxruntime", "tokenizers")
VECTORS_AND_SEARCH = ("chromadb", "bm25s", "scipy")
SETTINGS_AND_SQL = ("pydantic", "pydantic_settings", "sqlalchemy", "alembic")

# Runs the command as the console script does, then prints the top-level names of the modules it imported.
_REPORT = """
import sys
from vigil.app.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
print("MODULES", " ".join(sorted({name.partition(".")[0] for name in sys.modules})))
sys.exit(code)
"""


def imported_by(tmp_path: Path, *argv: str, **settings: str) -> tuple[int, set[str]]:
    """The exit code of ``vigil ARGV`` and the top-level modules it imported, with a data dir in ``tmp_path``."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "VIGIL_DATA_DIR": str(tmp_path / "data"),
        "VIGIL_LOG_LEVEL": "WARNING",
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
        **settings,
    }
    done = subprocess.run(
        [sys.executable, "-c", _REPORT, *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("MODULES ")]
    assert lines, done.stderr
    return done.returncode, set(lines[-1].split()[1:])


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["send", "--help"],
        ["demo", "--help"],
        ["kb", "search", "--help"],
        ["token", "--help"],
        ["eval", "replay", "--help"],
    ],
)
def test_help_imports_neither_settings_nor_sql_nor_models(tmp_path: Path, argv: list[str]):
    code, modules = imported_by(tmp_path, *argv)
    assert code == 0
    assert modules & {*EMBEDDINGS, *VECTORS_AND_SEARCH, *SETTINGS_AND_SQL} == set()


def test_a_search_embeds_on_onnx_runtime_without_importing_torch(tmp_path: Path, embedder: RememberingEmbedder):
    # The session's embedder has made (or found) this machine's export: the search loads it, as every search after
    # a daemon's first start does.
    cache = str(default_cache_dir())
    code, modules = imported_by(
        tmp_path, "kb", "search", "how do I reset my password", VIGIL_KNOWLEDGE__ONNX_CACHE=cache
    )
    assert code == 0
    assert {"onnxruntime", "tokenizers", "chromadb"} <= modules
    assert modules & set(TORCH) == set()


@pytest.mark.parametrize("argv", [["kb", "stats"], ["kb", "export"]])
def test_knowledge_counts_and_exports_load_no_model_vector_store_or_lexical_index(tmp_path: Path, argv: list[str]):
    code, modules = imported_by(tmp_path, *argv)
    assert code == 0
    assert "sqlalchemy" in modules  # they do read the database
    assert modules & {*EMBEDDINGS, *VECTORS_AND_SEARCH} == set()


def test_knowledge_commands_load_alembic_only_to_migrate(tmp_path: Path):
    code, first = imported_by(tmp_path, "kb", "stats")
    assert code == 0 and "alembic" in first  # a new database: migrated to the head revision
    for argv in (["kb", "stats"], ["kb", "export"]):
        code, modules = imported_by(tmp_path, *argv)
        assert code == 0
        assert "sqlalchemy" in modules and "alembic" not in modules, argv


def test_replaying_a_missing_file_fails_before_loading_a_kafka_client(tmp_path: Path):
    code, modules = imported_by(tmp_path, "replay", str(tmp_path / "missing.jsonl"))
    assert code == 2
    assert modules & {"aiokafka", "sqlalchemy", *EMBEDDINGS, *VECTORS_AND_SEARCH} == set()


def test_an_evaluation_of_a_missing_file_fails_before_loading_the_pipeline(tmp_path: Path):
    code, modules = imported_by(tmp_path, "eval", "replay", str(tmp_path / "missing.jsonl"), "--out", "out.jsonl")
    assert code == 2
    assert modules & {"sqlalchemy", *EMBEDDINGS, *VECTORS_AND_SEARCH} == set()
    assert not (tmp_path / "out.jsonl").exists()


def test_token_and_schema_need_no_database_library(tmp_path: Path):
    for argv in (["token", "ana", "--tenant", "acme"], ["schema", "message"]):
        code, modules = imported_by(tmp_path, *argv)
        assert code == 0
        assert "pydantic" in modules
        assert modules & {"sqlalchemy", "alembic", *EMBEDDINGS, *VECTORS_AND_SEARCH} == set()
