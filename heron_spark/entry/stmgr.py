"""``python -m heron_spark.entry.stmgr``: a container's Stream Manager process."""

from __future__ import annotations

import logging
import sys

from heron_spark import _process
from heron_spark.contract import layout
from heron_spark.contract.child_args import StmgrArgs
from heron_spark.contract.exit_codes import ExitCode


def main(argv: list[str] | None = None) -> int:
    """Run one stream manager from its command line (``StmgrArgs``); return its exit code."""
    args = StmgrArgs.from_argv(argv)
    _process.become_child(f"hs-stmgr-{args.container}")
    from heron_spark.container.files import ContainerFiles

    files = ContainerFiles(args.workdir)
    _process.setup_logging(files.log(layout.STMGR))
    from heron_spark.entry._locate import tmaster_address
    from heron_spark.stmgr.server import StreamManager

    try:
        host, port = tmaster_address(args.tmaster, files)
        manager = StreamManager(files, args.container, host, port, args.host, args.generation)
        return manager.run()
    except Exception:  # noqa: BLE001 - log the reason the stmgr died, then exit non-zero
        logging.getLogger(__name__).exception("stmgr failed")
        return ExitCode.FAILED


if __name__ == "__main__":
    sys.exit(main())
