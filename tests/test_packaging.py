"""The built wheel carries what an installed vigil needs: migrations, the bundled knowledge and demo traffic."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_the_wheel_ships_migrations_and_bundled_knowledge(tmp_path: Path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("vigil-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "vigil/db/migrations/env.py" in names and "vigil/db/migrations/versions/0001_initial.py" in names
    assert "vigil/py.typed" in names
    data = "vigil-0.1.0.data/data/share/vigil/knowledge/"
    assert data + "demo/conversations.jsonl" in names
    assert data + "demo/conversations.rewordings.jsonl" in names
    articles = {n for n in names if n.startswith(data + "articles/")}
    assert len(articles) == len(list((ROOT / "knowledge" / "articles").glob("*.md")))
    assert any(n.startswith(data + "faqs/") for n in names)
    for rulebook in ("demo", "tau2-retail", "tau2-airline"):
        shipped = {n.removeprefix(f"{data}rulebooks/{rulebook}/") for n in names if f"rulebooks/{rulebook}/" in n}
        assert shipped == {p.name for p in (ROOT / "knowledge" / "rulebooks" / rulebook).iterdir()}
