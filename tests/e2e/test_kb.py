"""`vigil kb` as a subprocess: import (idempotent, prune, bad files), search, stats, export."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Each test runs several commands that each load the embedding model (~15 s of CPU apiece here): more than the
# suite's 120 s per test on a loaded machine.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

VIGIL = Path(sys.executable).parent / "vigil"


def vigil(tmp_path: Path, *args: str, stdin: str | None = None, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "VIGIL_DATA_DIR": str(tmp_path / "data"),
        "VIGIL_LOG_LEVEL": "WARNING",
        # The code under test when it is not the installed one (a checkout on PYTHONPATH).
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
        **settings,
    }
    return subprocess.run(
        [str(VIGIL), "kb", *args], cwd=tmp_path, env=env, input=stdin, capture_output=True, text=True, timeout=180
    )


def test_import_search_stats_export(tmp_path: Path):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "router.md").write_text(
        "---\nid: router-reset\ntitle: Resetting your router\n---\n\n"
        "## Resetting the router\n\nHold the reset button for 15 seconds.\n"
    )
    (kb / "faqs.yaml").write_text(
        "faqs:\n  - id: faq-bill\n    question: When is my bill taken?\n"
        "    answer: On the 1st of each month.\n    alternates: [when do you take payment]\n"
    )
    first = vigil(tmp_path, "import", str(kb))
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "2 added, 0 updated, 0 unchanged, 0 removed"
    assert vigil(tmp_path, "import", str(kb)).stdout.strip() == "0 added, 0 updated, 2 unchanged, 0 removed"

    found = vigil(tmp_path, "search", "how do I reset my router", "--k", "2", "--json")
    ranked = json.loads(found.stdout)
    assert ranked[0]["id"] == "router-reset" and set(ranked[0]) == {"id", "kind", "title", "score"}
    lines = vigil(tmp_path, "search", "-", stdin="reset the router\nwhen is the bill taken\n").stdout.splitlines()
    assert [json.loads(line)[0]["id"] for line in lines] == ["router-reset", "faq-bill"]

    assert vigil(tmp_path, "stats").stdout.split() == ["article:", "1", "faq:", "1", "passages:", "2"]
    exported = [json.loads(line) for line in vigil(tmp_path, "export").stdout.splitlines()]
    assert [e["id"] for e in exported] == ["faq-bill", "router-reset"]

    # --prune removes what the files given no longer hold; a file that is gone is not one of them.
    (kb / "router.md").unlink()
    (kb / "faqs.yaml").write_text("faqs: []\n")
    pruned = vigil(tmp_path, "import", "--prune", str(kb))
    assert pruned.stdout.strip() == "0 added, 0 updated, 0 unchanged, 1 removed", pruned.stderr


def test_a_bad_file_is_named_and_nothing_is_loaded(tmp_path: Path):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "good.md").write_text("---\nid: good\ntitle: Good\n---\n\nFine.\n")
    (kb / "bad.jsonl").write_text('{"id": "a", "title": "A", "content": "x"}\n{oops\n')
    result = vigil(tmp_path, "import", str(kb))
    assert result.returncode == 1
    assert f"{kb / 'bad.jsonl'}:2" in result.stderr and "not valid JSON" in result.stderr
    assert vigil(tmp_path, "stats").stdout.split() == ["passages:", "0"]


def test_search_and_stats_per_tenant(tmp_path: Path):
    kb = tmp_path / "kb"
    kb.mkdir()
    for tenant in ("acme", "globex"):
        (kb / f"{tenant}.md").write_text(
            f"---\nid: {tenant}-refunds\ntitle: {tenant.title()} refunds\ntenant: {tenant}\n---\n\n"
            f"## Refunds\n\nA {tenant} refund reaches your card in 5 working days.\n"
        )
    (kb / "global.md").write_text(
        "---\nid: refunds\ntitle: Refunds\n---\n\nRefunds go back to the card you paid with.\n"
    )
    assert vigil(tmp_path, "import", str(kb)).stdout.strip() == "3 added, 0 updated, 0 unchanged, 0 removed"

    def ids(*tenant: str) -> list[str]:
        found = vigil(tmp_path, "search", "how long does a refund take", "--json", *tenant)
        assert found.returncode == 0, found.stderr
        return sorted(hit["id"] for hit in json.loads(found.stdout))

    assert ids("--tenant", "acme") == ["acme-refunds", "refunds"]
    assert ids() == ["refunds"]  # without a tenant: the global entries only
    assert vigil(tmp_path, "stats").stdout.split() == ["article:", "3", "passages:", "3"]
    assert vigil(tmp_path, "stats", "--tenant", "globex").stdout.split() == ["article:", "2", "passages:", "2"]


def test_tune_prints_the_gate_and_what_it_decided_and_search_serves_the_decision(tmp_path: Path):
    from tests.knowledge.test_tuner import TOPICS

    faqs = tmp_path / "faqs.yaml"
    faqs.write_text(
        json.dumps(
            {
                "faqs": [
                    {"id": f"faq-{key}", "question": question, "answer": f"What to do: {question}", "alternates": rest}
                    for key, question, *rest in TOPICS
                ]
            }
        )
    )
    assert vigil(tmp_path, "import", str(faqs)).returncode == 0
    tuning = vigil(tmp_path, "tune", VIGIL_KNOWLEDGE__TUNE_EPOCHS="1", VIGIL_KNOWLEDGE__TUNE_BATCH_SIZE="8")
    assert tuning.returncode == 0, tuning.stderr
    lines = tuning.stdout.splitlines()
    manifest = json.loads((tmp_path / "data" / "models" / "last-run.json").read_text())
    # 12 FAQs of 3 questions, one alternate each held back: 24 pairs with the answer, 12 alternates with the question.
    assert "36 examples from 36 FAQ questions (12 alternates also with their FAQ's question), 0 article" in lines[0]
    assert lines[1] == "12 held-back questions: as served (the gate) and by the model alone"
    assert lines[2].split() == ["hit@1", "MRR", "hit@1", "MRR"]
    assert lines[3].split()[:2] == ["shipped", "model"] and lines[4].split()[:2] == ["tuned", "model"]
    assert float(lines[3].split()[2]) == round(manifest["shipped"]["hit_at_1"], 3)
    assert lines[-1].startswith("accepted" if manifest["accepted"] else "rejected")
    assert manifest["shipped"]["probes"] == manifest["tuned"]["probes"] == 12
    current = tmp_path / "data" / "models" / "current.json"
    assert current.is_file() == manifest["accepted"]
    # Whichever model serves now, search finds a held-back question's FAQ.
    found = vigil(tmp_path, "search", "roaming charges in spain", "--k", "1", "--json")
    assert json.loads(found.stdout)[0]["id"] == "faq-roam", found.stderr
