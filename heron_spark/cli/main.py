"""The ``heron-spark`` command line.

Submit, kill, list, activate, deactivate, restart and update topologies; run a tracker, open
its UI; print the effective config and the versions.

``heron-spark submit [options] FILE [NAME] [ARGS...]`` runs FILE as ``heron submit`` does: options
come before FILE; NAME and ARGS reach the file as ``sys.argv[1:]``.
"""

from __future__ import annotations

import argparse
import logging
import runpy
import sys
from pathlib import Path

from heron_spark.errors import HeronSparkError


def _conf_pairs(pairs: list[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            msg = f"--conf takes key=value, got {pair!r}"
            raise SystemExit(msg)
        conf[key.strip()] = value.strip()
    return conf


def _statemgr(conf: dict):
    from heron_spark.config import build_system_config, read_conf_file
    from heron_spark.statemgr import open_state_manager

    return open_state_manager(build_system_config(read_conf_file(), conf).statemgr)


def cmd_submit(args) -> int:
    """Run a topology file; submit what it builds; wait; exit 0 on a planned end."""
    from heron_spark import heronpy_alias
    from heron_spark.api.topology import Topology
    from heron_spark.scheduler import submit as submit_module
    from heron_spark.scheduler.options import SubmitOptions, cli_submits

    heronpy_alias.install()
    path = Path(args.file).resolve()
    if not path.is_file():
        msg = f"no such topology file: {path}"
        raise SystemExit(msg)
    options = SubmitOptions(_conf_pairs(args.conf), args.name, args.master,
                            bool(args.deploy_deactivated))
    # As ``heron submit`` does: the file sees NAME and the extra arguments as sys.argv[1:].
    sys.argv = [str(path), *([args.name] if args.name else []), *args.args]
    sys.path.insert(0, str(path.parent))
    code = 0
    with cli_submits(options) as handles:
        try:
            namespace = runpy.run_path(str(path), run_name="__main__")
        except SystemExit as exit_:  # the file ran its own main(); keep its exit code
            namespace = {}
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if not handles and code != 0:
            return code
        if not handles:
            classes = [v for v in namespace.values() if isinstance(v, type)
                       and issubclass(v, Topology) and v is not Topology
                       and getattr(v, "__module__", "") == "__main__"]
            if args.name:
                named = [c for c in classes if c.__name__ == args.name]
                classes = named or classes
            if len(classes) != 1:
                msg = (
                    f"{path.name} must build a topology (TopologyBuilder."
                    f"build_and_submit) or define exactly one Topology subclass; "
                    f"found {[c.__name__ for c in classes]}"
                )
                raise SystemExit(msg)
            submit_module.submit(classes[0])  # the CLI options apply; the handle is recorded
        for handle in handles:
            if handle.tracker_url is not None:
                print(f"topology {handle.name}: tracker UI (one-time login link): "
                      f"{handle.ui_link()}", flush=True)
        for handle in handles:
            status = handle.wait()
            print(f"topology {handle.name}: {status}")
        return code


def cmd_kill(args) -> int:
    """Kill topology ``args.name`` through its TMaster."""
    from heron_spark.tmaster.client import kill_topology

    print(f"{args.name}: {kill_topology(_statemgr(_conf_pairs(args.conf)), args.name)}")
    return 0


def cmd_activate(args) -> int:
    """Activate topology ``args.name`` (its spouts resume ``next_tuple``)."""
    from heron_spark.tmaster.client import activate_topology

    print(f"{args.name}: {activate_topology(_statemgr(_conf_pairs(args.conf)), args.name)}")
    return 0


def cmd_deactivate(args) -> int:
    """Deactivate topology ``args.name`` (its spouts stop emitting)."""
    from heron_spark.tmaster.client import deactivate_topology

    print(f"{args.name}: {deactivate_topology(_statemgr(_conf_pairs(args.conf)), args.name)}")
    return 0


def cmd_restart(args) -> int:
    """Restart every process of container ``args.container`` of topology ``args.name`` (default: all)."""
    from heron_spark.tmaster.client import restart_topology

    detail = restart_topology(_statemgr(_conf_pairs(args.conf)), args.name, args.container)
    print(f"{args.name}: {detail}")
    return 0


def _parallelism_pairs(pairs: list[str]) -> dict[str, int]:
    parallelism = {}
    for pair in pairs:
        component, sep, count = pair.rpartition(":")
        if not sep or not component or not count.strip().lstrip("-").isdigit():
            msg = f"--component-parallelism takes COMPONENT:N, got {pair!r}"
            raise SystemExit(msg)
        parallelism[component] = int(count)
    return parallelism


def cmd_update(args) -> int:
    """Change the parallelism of components of a running topology."""
    from heron_spark.tmaster.client import update_topology

    parallelism = _parallelism_pairs(args.component_parallelism)
    if not parallelism:
        msg = "update needs at least one --component-parallelism COMPONENT:N"
        raise SystemExit(msg)
    detail = update_topology(_statemgr(_conf_pairs(args.conf)), args.name, parallelism)
    print(f"{args.name}: {detail}")
    return 0


def cmd_version(args) -> int:
    """Print heron_spark's, pyspark's, pyarrow's and Python's versions."""
    import platform
    from importlib import metadata

    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "not installed"

    print(f"heron_spark {version('heron_spark')}")
    print(f"pyspark {version('pyspark')}")
    print(f"pyarrow {version('pyarrow')}")
    print(f"python {platform.python_version()} ({sys.executable})")
    return 0


def cmd_list(args) -> int:
    """Print every topology of the state manager, its state and whether it is live."""
    from heron_spark.contract.execution_state import state_of
    from heron_spark.tmaster.client import tmaster_status

    statemgr = _statemgr(_conf_pairs(args.conf))
    names = statemgr.topologies()
    if not names:
        print(f"no topologies in {statemgr.location}")
    for name in names:
        live = tmaster_status(statemgr, name)
        last = state_of(statemgr.get_execution_state(name))
        print(f"{name}\t{live or last}\t{'live' if live else 'not running'}")
    return 0


def cmd_tracker(args) -> int:
    """Run a standalone tracker for every topology of the state manager until interrupted."""
    import signal
    import threading

    from heron_spark.config import build_system_config, read_conf_file
    from heron_spark.tracker.auth import login_link
    from heron_spark.tracker.service import start_tracker
    from heron_spark.wire.tls import user_material

    system = build_system_config(read_conf_file(), _conf_pairs(args.conf))
    port = args.port if args.port is not None else max(system.tracker_port, 0)
    # heron.tls.cert/key/ca given: HTTPS with that certificate (the topologies' own, say)
    tls = user_material(system)
    server = start_tracker(system.statemgr, args.host, port,
                           max_connections=system.tracker_max_connections,
                           idle_timeout_secs=system.tracker_idle_timeout_secs, tls=tls)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"tracker for {system.statemgr} at {server.url}", flush=True)
    print(f"UI (one-time login link): {login_link(server.url, server.app.auth.token)}",
          flush=True)
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    return 0


def cmd_ui(args) -> int:
    """Print a fresh one-time login link to a running tracker (and its Bearer token).

    ``--ca-file PATH``: also write the topology's CA certificate (TLS on) to PATH.
    """
    from heron_spark.tracker.auth import login_link, tracker_token
    from heron_spark.tracker.service import topology_ca_pem, tracker_urls

    with _statemgr(_conf_pairs(args.conf)) as statemgr:
        if args.name and statemgr.get_topology(args.name) is None:
            msg = f"no topology {args.name!r} in {statemgr.location}"
            raise SystemExit(msg)
        if args.ca_file:
            ca_pem = topology_ca_pem(statemgr, args.name) if args.name else None
            if ca_pem is None:
                msg = (f"--ca-file {args.ca_file}: no CA for topology {args.name!r}: name a "
                       f"running topology whose TLS is on (heron.tls.enabled)")
                raise SystemExit(msg)
            Path(args.ca_file).write_bytes(ca_pem)
            print(f"CA certificate of {args.name} written to {args.ca_file}", file=sys.stderr)
        urls = tracker_urls(statemgr, args.name)
        if not urls:
            msg = (
                f"no tracker answers for {statemgr.location}: submit a topology "
                f"(its driver runs one) or run `heron-spark tracker`"
            )
            raise SystemExit(msg)
        token = tracker_token(statemgr)
    print(login_link(urls[0], token))
    if args.token:
        print(f"Authorization: Bearer {token}")
    return 0


def cmd_config(args) -> int:
    """Print the effective system config, one ``key = value`` a line."""
    from heron_spark.config import build_system_config, read_conf_file

    for key, value in build_system_config(read_conf_file(), _conf_pairs(args.conf)).as_keys().items():
        print(f"{key} = {value}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Return the ``heron-spark`` argument parser (one subcommand per verb)."""
    parser = argparse.ArgumentParser(prog="heron-spark",
                                     description="Heron-style topologies on Spark")
    sub = parser.add_subparsers(dest="command", required=True)
    submit = sub.add_parser("submit", help="run a topology file and wait for it to end")
    submit.add_argument("--master", help="Spark master URL (default: local[*] or spark-submit's)")
    submit.add_argument("--deploy-deactivated", action="store_true",
                        help="start it deactivated: spouts emit nothing until "
                             "`heron-spark activate NAME`")
    submit.add_argument("file", help="Python file defining or building a topology")
    submit.add_argument("name", nargs="?", help="topology name (and class, if several); the file "
                        "reads it as sys.argv[1]")
    submit.add_argument("args", nargs=argparse.REMAINDER,
                        help="further arguments, passed to the file as sys.argv[2:]")
    kill = sub.add_parser("kill", help="kill a running topology")
    kill.add_argument("name")
    for verb, text in (("activate", "resume a deactivated topology's spouts"),
                       ("deactivate", "stop a topology's spouts emitting (bolts go on)")):
        sub.add_parser(verb, help=text).add_argument("name")
    restart = sub.add_parser("restart", help="restart every process of one container or all")
    restart.add_argument("name")
    restart.add_argument("container", nargs="?", type=int,
                         help="container index (default: every container)")
    update = sub.add_parser("update", help="rescale components of a running topology")
    update.add_argument("name")
    update.add_argument("--component-parallelism", action="append", default=[],
                        metavar="COMPONENT:N", help="new parallelism of COMPONENT (repeatable)")
    sub.add_parser("list", help="list topologies in the state manager")
    sub.add_parser("config", help="print the effective runtime configuration")
    tracker = sub.add_parser("tracker", help="run a tracker (HTTP API + UI) for every topology "
                             "in the state manager")
    tracker.add_argument("--port", type=int, help="port (default: heron.tracker.port, 0: any)")
    tracker.add_argument("--host", default="127.0.0.1",
                         help="address to listen on (default 127.0.0.1; 0.0.0.0: every one)")
    ui = sub.add_parser("ui", help="print a one-time login link to a running tracker's UI")
    ui.add_argument("name", nargs="?", help="topology whose driver's tracker to prefer")
    ui.add_argument("--token", action="store_true",
                    help="also print the Bearer token for scripts")
    ui.add_argument("--ca-file", metavar="PATH",
                    help="write the topology's CA certificate (PEM; TLS on) to PATH: a browser "
                    "or script trusting it reaches the tracker over HTTPS")
    sub.add_parser("version", help="print heron_spark's, pyspark's, pyarrow's and Python's "
                   "versions")
    for command in sub.choices.values():
        command.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                             help="override a heron.* or topology.* key (repeatable)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``heron-spark`` command line on ``argv``; return the exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    handlers = {"submit": cmd_submit, "kill": cmd_kill, "list": cmd_list, "config": cmd_config,
                "activate": cmd_activate, "deactivate": cmd_deactivate, "restart": cmd_restart,
                "update": cmd_update, "version": cmd_version, "tracker": cmd_tracker,
                "ui": cmd_ui}
    try:
        return handlers[args.command](args)
    except HeronSparkError as exc:
        print(f"heron-spark: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("heron-spark: interrupted; topology killed", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
