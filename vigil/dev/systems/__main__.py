"""``python -m vigil.dev.systems --db PATH --port N``: the demo systems on their own, seeded on first start."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

import uvicorn

from vigil.core.clock import SystemClock
from vigil.dev.systems.app import create_app
from vigil.dev.systems.seed import ensure_seeded

log = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> None:
    """Seed the file unless it holds data already, then serve until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m vigil.dev.systems", description=__doc__)
    parser.add_argument("--db", type=Path, required=True, help="the SQLite file (created and seeded if new)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8700)
    parser.add_argument(
        "--token-env", default="VIGIL_DEMO_SYSTEMS_TOKEN", help="environment variable holding a bearer token to require"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    clock = SystemClock()
    if ensure_seeded(args.db, now=clock.now()):
        log.info("seeded %s with the demo shop", args.db)
    app = create_app(args.db, token=os.environ.get(args.token_env) or None, clock=clock)
    uvicorn.run(app, host=args.host, port=args.port, log_config=None)


if __name__ == "__main__":
    main()
