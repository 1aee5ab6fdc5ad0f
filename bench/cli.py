"""CLI benchmark: how long one-off `vigil` commands take, each a fresh process, as a person or a script runs them.

The commands run against a data dir that already holds the bundled help centre (imported once at the start, or
given with ``--data-dir``), so ``kb stats``, ``kb export`` and ``kb search`` read a real store. For each command the
bench reports the median wall time and the median CPU time (user + system) of the process over ``--runs`` runs,
after one warm-up run (the page cache then holds the files, as it does for someone who runs vigil often). CPU time
is the steadier number on a shared machine: the wall time also counts waiting for a core.

What each command imports is checked by ``tests/app/test_cli_imports.py``; the numbers are only measured here.

Run: ``python -m bench.cli`` (about 3 minutes with the import) or ``--quick`` (3 runs each). To measure another copy
of vigil, run the bench with ``PYTHONPATH=/path/to/copy`` (and ``--label`` to name it in the results).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import report

ROOT = Path(__file__).resolve().parent.parent
VIGIL = Path(sys.executable).parent / "vigil"
QUESTION = "how do I reset my password"


@dataclass(frozen=True, slots=True)
class Command:
    """One command line, and the exit code it should end with."""

    name: str
    argv: tuple[str, ...]
    exit_code: int = 0


def commands(missing: Path) -> list[Command]:
    return [
        Command("--help", ("--help",)),
        Command("send --help", ("send", "--help")),
        Command("demo --help", ("demo", "--help")),
        Command("replay MISSING", ("replay", str(missing)), exit_code=2),
        Command("token", ("token", "ana", "--tenant", "acme")),
        Command("schema message", ("schema", "message")),
        Command("kb stats", ("kb", "stats")),
        Command("kb export", ("kb", "export")),
        Command("kb search", ("kb", "search", QUESTION)),
    ]


def environment(data_dir: Path) -> dict[str, str]:
    """This machine's environment without the developer's VIGIL_ settings, plus the bench's data dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    return env | {"VIGIL_DATA_DIR": str(data_dir), "VIGIL_LOG_LEVEL": "WARNING"}


def timed(argv: Sequence[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    """Run ``vigil ARGV`` once: its wall seconds, CPU seconds (user + system) and exit code."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [str(VIGIL), *argv], env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, process.returncode


def measure(command: Command, runs: int, env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """One warm-up run, then ``runs`` timed ones; refuses a run that ends with an unexpected exit code."""
    walls: list[float] = []
    cpus: list[float] = []
    for number in range(runs + 1):
        wall, cpu, code = timed(command.argv, env, cwd)
        if code != command.exit_code:
            raise SystemExit(f"vigil {' '.join(command.argv)} exited {code}, not {command.exit_code}")
        if number:
            walls.append(wall)
            cpus.append(cpu)
    return {
        "command": command.name,
        "argv": list(command.argv),
        "runs": runs,
        "wall_s_median": statistics.median(walls),
        "wall_s_min": min(walls),
        "cpu_s_median": statistics.median(cpus),
        "wall_s": walls,
        "cpu_s": cpus,
    }


def prepared(data_dir: Path, env: dict[str, str]) -> None:
    """Import the bundled help centre into ``data_dir`` (idempotent: an imported store stays as it is)."""
    knowledge = ROOT / "knowledge"
    subprocess.run(
        [str(VIGIL), "kb", "import", str(knowledge / "articles"), str(knowledge / "faqs")],
        env=env,
        cwd=data_dir.parent,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| command | wall median (s) | wall min (s) | CPU median (s) |",
        "|---|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| `vigil {row['command']}` | {row['wall_s_median']:.2f} | {row['wall_s_min']:.2f} "
            f"| {row['cpu_s_median']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cli", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per command (default 7)")
    parser.add_argument("--quick", action="store_true", help="3 runs per command")
    parser.add_argument("--only", help="comma-separated command names, e.g. 'kb stats,kb search'")
    parser.add_argument("--data-dir", type=Path, help="a data dir that already holds the help centre (kept)")
    parser.add_argument("--label", default="", help="a name for the vigil measured (e.g. before, after)")
    args = parser.parse_args(argv)
    runs = 3 if args.quick else args.runs
    workdir = Path(tempfile.mkdtemp(prefix="vigil-bench-cli-"))
    try:
        data_dir = args.data_dir or workdir / "data"
        env = environment(data_dir)
        if args.data_dir is None:
            prepared(data_dir, env)
        chosen = commands(workdir / "missing.jsonl")
        if args.only:
            wanted = {name.strip() for name in args.only.split(",")}
            chosen = [c for c in chosen if c.name in wanted]
        rows = []
        for command in chosen:
            rows.append(measure(command, runs, env, workdir))
            print(f"vigil {command.name}: {rows[-1]['wall_s_median']:.2f} s", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    plan = {"runs": runs, "warmup": 1, "label": args.label, "pythonpath": os.environ.get("PYTHONPATH", "")}
    path = report.save("cli", argv, plan, {"load_average": os.getloadavg(), "commands": rows})
    print(table(rows))
    print(f"\n{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
