"""The container image's install steps, in a fresh venv: no container engine runs on this project's machines (Docker's
client is there, its daemon is not, and base images could not be pulled), so the steps of deploy/Dockerfile are
run as the Dockerfile writes them, from the wheel to the model's ONNX export baked into the image, and the installed
vigil starts its commands from outside the checkout."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
DOCKERFILE = ROOT / "deploy" / "Dockerfile"

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def run_lines() -> list[str]:
    """The final stage's RUN commands, in order."""
    final = DOCKERFILE.read_text().split("\nFROM ")[-1]
    return [line.removeprefix("RUN ").strip() for line in final.splitlines() if line.startswith("RUN ")]


def test_the_images_install_steps_give_a_vigil_with_the_models_export_inside(tmp_path: Path):
    export = next(line for line in run_lines() if "OnnxEmbedder" in line)
    code = re.fullmatch(r'python -c "(.*)"', export)
    assert code is not None, export
    assert "/opt/vigil/onnx" in code.group(1)
    assert "VIGIL_KNOWLEDGE__ONNX_CACHE=/opt/vigil/onnx" in DOCKERFILE.read_text()  # where vigil looks for it

    wheels, prefix, onnx = tmp_path / "wheels", tmp_path / "venv", tmp_path / "onnx"
    # As in the image: nothing of the checkout on the path (a PYTHONPATH set for the suite would import it instead).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # The build stage's `pip wheel .`, for vigil's own wheel (its dependencies come from the index, as in the image).
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(wheels), str(ROOT)], check=True
    )
    venv.create(prefix, with_pip=True)
    python = prefix / "bin" / "python"
    (wheel,) = wheels.glob("vigil-*.whl")
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], check=True, cwd=tmp_path, env=env)
    # The image's export step, word for word but for where it writes; run outside the checkout, so that it is the
    # installed vigil that runs.
    exported = code.group(1).replace("/opt/vigil/onnx", str(onnx))
    subprocess.run([str(python), "-c", exported], check=True, cwd=tmp_path, env=env)
    assert [p.suffix for p in onnx.iterdir()] == [".onnx"]
    found = subprocess.run(
        [str(python), "-c", "import vigil; print(vigil.__file__)"],
        check=True,
        cwd=tmp_path,
        capture_output=True,
        env=env,
    )
    assert str(prefix) in found.stdout.decode()
    help_text = subprocess.run(
        [str(prefix / "bin" / "vigil"), "--help"], check=True, cwd=tmp_path, capture_output=True, text=True, env=env
    ).stdout
    assert "run" in help_text and "demo" in help_text
