"""Entry point of a Stream Manager process: ``python -m heron_spark.stmgr``."""

from __future__ import annotations

import logging
import sys

from heron_spark import _process
from heron_spark.contract import layout
from heron_spark.contract.child_args import statemgr_generation, StmgrArgs
from heron_spark.contract.exit_codes import ExitCode


def main(argv: list[str] | None = None) -> int:
    """Run one stream manager from its command line (``StmgrArgs``); return its exit code."""
    args = StmgrArgs.from_argv(argv)
    _process.become_child(f"hs-stmgr-{args.container}")
    from heron_spark.container.files import ContainerFiles

    files = ContainerFiles(args.workdir)
    _process.setup_logging(files.log(layout.STMGR))
    from heron_spark.stmgr.server import StreamManager

    try:
        host, port = args.tmaster_address if statemgr_generation(args.tmaster) is None \
            else _tmaster_from_statemgr(args.tmaster, files)
        manager = StreamManager(files, args.container, host, port, args.host, args.generation)
        return manager.run()
    except Exception:  # noqa: BLE001 - log the reason the stmgr died, then exit non-zero
        logging.getLogger(__name__).exception("stmgr failed")
        return ExitCode.FAILED


def _tmaster_from_statemgr(tmaster: str, files) -> tuple[str, int]:
    """Wait for the TMaster in container 0 to publish its location (placement container)."""
    from heron_spark.statemgr import tmaster_address

    config = files.load_config()
    return tmaster_address(tmaster, config.statemgr, files.load_plan().logical.name,
                           config.startup_timeout_secs)


if __name__ == "__main__":
    sys.exit(main())
