"""Entry point of a Heron Instance process: ``python -m heron_spark.instance``."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from heron_spark import _process


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="heron_spark.instance")
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--topology", required=True)
    parser.add_argument("--component", required=True)
    parser.add_argument("--task-id", required=True, type=int)
    parser.add_argument("--stmgr-address", required=True,
                        help="the stmgr's local listener (unix:@name or 127.0.0.1:port)")
    args = parser.parse_args(argv)
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
        return 1
    return runtime.run()


if __name__ == "__main__":
    sys.exit(main())
