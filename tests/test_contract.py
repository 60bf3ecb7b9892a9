"""The contracts between processes (``heron_spark.contract``): each side reads what the
other wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from heron_spark.contract import ids, layout, roles
from heron_spark.contract.child_args import InstanceArgs, MetricsManagerArgs, StmgrArgs
from heron_spark.contract.exit_codes import STMGR_FINAL, ExitCode, describe
from heron_spark.proto import handshake_pb2


@pytest.mark.parametrize("args", [
    MetricsManagerArgs(Path("/w/c-0"), 0, "10.0.0.1:4100"),
    StmgrArgs(Path("/w/c-1"), 1, "10.0.0.1:4100", "10.0.0.7", 3),
    InstanceArgs(Path("/w/c-1"), "count", 5, "unix:@stmgr1-abc")])
def test_child_args_round_trip_through_argv(args):
    argv = args.to_argv()
    assert argv[:2] == ["--workdir", str(args.workdir)]  # chaos tests find children by it
    assert type(args).from_argv(argv) == args


def test_child_args_name_their_module_and_split_the_tmaster_address():
    args = StmgrArgs(Path("/w"), 2, "driver.example:4100", "h", 0)
    assert args.MODULE == "heron_spark.entry.stmgr" and args.tmaster_address == ("driver.example", 4100)
    assert "--topology" not in args.to_argv()
    with pytest.raises(SystemExit):
        InstanceArgs.from_argv(["--workdir", "/w", "--component", "count"])  # --task-id missing


def test_exit_codes_have_one_meaning_per_value():
    assert len({int(code) for code in ExitCode}) == len(ExitCode)
    assert STMGR_FINAL == {ExitCode.OK, ExitCode.TMASTER_LOST}
    assert describe(4) == "code 4 (RESTART)" and describe(-9) == "signal SIGKILL"
    assert describe(77) == "code 77"


def test_every_handshake_role_is_the_proto_enum():
    assert {roles.INSTANCE, roles.STMGR, roles.METRICSMGR, roles.METRICS_CLIENT,
            roles.CONTROL} == set(handshake_pb2.PeerRole.values()) - {handshake_pb2.ROLE_UNSET}
    assert roles.role_name(roles.METRICS_CLIENT) == "metrics_client"
    assert roles.role_name(99) == "99"


def test_stmgr_and_instance_ids():
    assert ids.instance_id(0, "count", 3) == "container_0_count_3"
    assert ids.stmgr_id(2) == "stmgr-2"
    task = ids.stmgr_metrics_task(2)
    assert ids.is_stmgr_metrics_task(task) and not ids.is_stmgr_metrics_task(0)
    assert ids.stmgr_container(task) == 2


def test_container_layout():
    root = layout.container_root("/work", "wc", 1, 3)
    assert root == Path("/work/wc/gen-1/container-3")
    files = layout.ContainerLayout(root)
    assert files.instance_log("count", 4) == root / layout.instance_log_path("count", 4)
    assert layout.instance_log_path("count", 4).startswith(layout.LOGS + "/")
    assert layout.child_task(layout.task_child(7)) == 7 and layout.child_task(layout.STMGR) is None


def test_the_contract_package_is_the_bottom_layer():
    """Every role imports the contract, so it imports no role: only the standard library,
    ``heron_spark.proto`` and ``heron_spark.errors``."""
    import ast

    allowed = ("heron_spark.contract", "heron_spark.proto", "heron_spark.errors")
    folder = Path(layout.__file__).parent
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name.startswith("heron_spark"):
                    assert name.startswith(allowed), f"{path.name} imports {name}"
