"""Entry point of a Stream Manager process: ``python -m heron_spark.stmgr``."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from heron_spark import _process


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="heron_spark.stmgr")
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--topology", required=True)
    parser.add_argument("--container", required=True, type=int)
    parser.add_argument("--tmaster", required=True, help="host:port")
    parser.add_argument("--host", required=True)
    parser.add_argument("--generation", type=int, default=0)
    args = parser.parse_args(argv)
    _process.become_child(f"hs-stmgr-{args.container}")
    from heron_spark.container.files import ContainerFiles

    files = ContainerFiles(args.workdir)
    _process.setup_logging(files.logs / "stmgr.log")
    from heron_spark.stmgr.server import StreamManager

    host, _, port = args.tmaster.rpartition(":")
    try:
        manager = StreamManager(files, args.container, host, int(port), args.host,
                                args.generation)
        return manager.run()
    except Exception:  # noqa: BLE001 - log the reason the stmgr died, then exit non-zero
        logging.getLogger(__name__).exception("stmgr failed")
        return 1


if __name__ == "__main__":
    sys.exit(main())
