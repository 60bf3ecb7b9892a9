"""``python -m heron_spark.entry.instance``: one task's Heron Instance process."""

from __future__ import annotations

import logging
import sys

from heron_spark import _process
from heron_spark.contract.child_args import InstanceArgs
from heron_spark.contract.exit_codes import ExitCode


def main(argv: list[str] | None = None) -> int:
    """Run one instance process from its command line (``InstanceArgs``); return its exit code."""
    args = InstanceArgs.from_argv(argv)
    _process.become_child(f"hs-{args.component}-{args.task_id}")
    from heron_spark import heronpy_alias
    from heron_spark.container.files import ContainerFiles

    files = ContainerFiles(args.workdir)
    _process.setup_logging(files.instance_log(args.component, args.task_id))
    heronpy_alias.install()  # user modules pickled by reference may import heronpy.api
    from heron_spark.instance.runtime import InstanceRuntime

    try:
        runtime = InstanceRuntime(files, args.task_id, args.stmgr_address)
    except Exception:  # noqa: BLE001 - log why start-up failed, then exit non-zero
        logging.getLogger(__name__).exception("instance start-up failed")
        return ExitCode.FAILED
    return runtime.run()


if __name__ == "__main__":
    sys.exit(main())
