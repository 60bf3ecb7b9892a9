"""``python -m heron_spark.entry.metrics``: a container's Metrics Manager process."""

from __future__ import annotations

import logging
import sys

from heron_spark import _process
from heron_spark.contract import layout
from heron_spark.contract.child_args import MetricsManagerArgs
from heron_spark.contract.exit_codes import ExitCode


def main(argv: list[str] | None = None) -> int:
    """Run one metrics manager from its command line (``MetricsManagerArgs``); return its exit code."""
    args = MetricsManagerArgs.from_argv(argv)
    _process.become_child(f"hs-metrics-{args.container}")
    from heron_spark.container.files import ContainerFiles

    files = ContainerFiles(args.workdir)
    _process.setup_logging(files.log(layout.METRICSMGR))
    from heron_spark.entry._locate import tmaster_address
    from heron_spark.metrics.manager import MetricsManager

    try:
        host, port = tmaster_address(args.tmaster, files)
        return MetricsManager(files, args.container, host, port).run()
    except Exception:  # noqa: BLE001 - log why the metrics manager died, then exit non-zero
        logging.getLogger(__name__).exception("metrics manager failed")
        return ExitCode.FAILED


if __name__ == "__main__":
    sys.exit(main())
