"""``option("state", ...)`` of the ``heron_spark`` source: a component's checkpointed keyed state.

``spark.read.format("heron_spark").option("topology", T).option("component", C)
.option("state", "latest")`` is a DataFrame of the keyed state every task of ``C`` saved in the
topology's last committed checkpoint (``"<checkpoint id>"``: that checkpoint, if it is
committed and still retained), one row per live key: ``key`` (the key's ``str``, the form
fields grouping hashes), ``value`` (JSON text when the value is JSON-able, else its ``repr``:
``CAST(value AS BIGINT)``, ``get_json_object(value, '$.f')``), ``task`` (the task id that holds
it), ``key_group`` (``heron_spark.contract.key_groups.key_group`` under
``topology.max.parallelism``, default 128) and ``checkpoint_id``. A batch read only.

Defining the DataFrame holds its checkpoint (``CheckpointStore.hold``) for ``stateHoldSecs``
(default 120; 0: no hold), so the commits that follow while it is read do not delete it.

``plan_state`` (driver) resolves the options against the state manager and the checkpoint
store: the I/O-free checks are ``choose_checkpoint`` and ``component_tasks``; each Spark
partition is one task, read on an executor by ``read_batches`` (Arrow batches of
``ROWS_PER_BATCH`` rows) through ``heron_spark.statemgr.state_reader``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import time
from typing import Any, Iterator, Mapping

from heron_spark.errors import DataSourceOptionError
from heron_spark.sql.resolve import (COMPONENT, PATH, STREAM, TOPOLOGY, _option, statemgr_url,
                                     stored_topology)

STATE = "state"
LATEST = "latest"
SCHEMA = "key string, value string, task int, key_group int, checkpoint_id bigint"
RELIABILITY = "topology.reliability.mode"
EFFECTIVELY_ONCE = "EFFECTIVELY_ONCE"
ROWS_PER_BATCH = 4096
HOLD_SECS = "stateHoldSecs"
DEFAULT_HOLD_SECS = 120.0
_ATTEMPTS = 3

log = logging.getLogger(__name__)


def _arrow_schema():
    import pyarrow as pa

    return pa.schema([("key", pa.string()), ("value", pa.string()), ("task", pa.int32()),
                      ("key_group", pa.int32()), ("checkpoint_id", pa.int64())])


@dataclasses.dataclass(frozen=True)
class StatePlan:
    """What the executors need to read a component's state in one checkpoint."""

    root: str
    topology: str
    component: str
    checkpoint_id: int
    tasks: dict[int, str]  # task id -> layout (state_reader.MEMORY / ROCKSDB)
    config: dict[str, str]  # the component's topology + component config (its serializer)
    max_parallelism: int


def choose_checkpoint(topology: str, reliability: str, wanted: str, committed: int,
                      present: list[int]) -> int:
    """Return the checkpoint id ``wanted`` names (``latest`` or an id); else raise.

    ``committed``: the last committed checkpoint (0: none yet); ``present``: the ids the
    checkpoint store holds (those before ``committed`` are retained, committed ones).
    """
    if reliability != EFFECTIVELY_ONCE:
        raise DataSourceOptionError(TOPOLOGY, topology, f"it runs {reliability or 'ATMOST_ONCE'}"
                                    f", so it checkpoints no state", "submit it with "
                                    "topology.reliability.mode EFFECTIVELY_ONCE")
    if not committed:
        raise DataSourceOptionError(STATE, wanted, f"topology {topology!r} has no committed "
                                    f"checkpoint yet", "read again once its first checkpoint "
                                    "is committed (every topology.stateful.checkpoint.interval"
                                    ".seconds while it runs)")
    if wanted.lower() == LATEST:
        return committed
    retained = [cid for cid in present if cid <= committed] or [committed]
    if not wanted.isdigit() or int(wanted) not in retained:
        raise DataSourceOptionError(STATE, wanted, f"topology {topology!r} holds no such "
                                    f"committed checkpoint (retained: {retained})",
                                    "use 'latest' or one of the retained ids")
    return int(wanted)


def component_tasks(topology: str, component: str, components: Mapping[str, list[int]],
                    saved: Mapping[int, str], checkpoint_id: int) -> dict[int, str]:
    """Return ``component``'s tasks that saved state in the checkpoint, with their layouts.

    ``components``: every component's task ids; ``saved``: ``state_reader.saved_tasks``.
    Raise when the component is unknown or none of its tasks saved state.
    """
    if component not in components:
        raise DataSourceOptionError(COMPONENT, component, f"topology {topology!r} has no such "
                                    f"component", f"use one of {sorted(components)}")
    tasks = {task: saved[task] for task in components[component] if task in saved}
    if not tasks:
        stateful = sorted(name for name, ids in components.items()
                          if any(task in saved for task in ids))
        raise DataSourceOptionError(COMPONENT, component, f"it saved no state in checkpoint "
                                    f"{checkpoint_id} of topology {topology!r} (not a "
                                    f"StatefulComponent?)", f"name a component with state: "
                                    f"one of {stateful}" if stateful else "make it a "
                                    "StatefulComponent (init_state) and read again")
    return tasks


def plan_state(options: Mapping[str, str]) -> StatePlan:
    """Resolve the options of a state read and hold its checkpoint (driver).

    Raise ``DataSourceOptionError`` naming the option, the value and the fix.
    """
    from heron_spark.api.api_constants import TOPOLOGY_MAX_PARALLELISM as MAX_PARALLELISM
    from heron_spark.api.topology_config import TopologyConfig
    from heron_spark.statemgr.checkpoints import CheckpointStore
    from heron_spark.statemgr.state_reader import saved_tasks

    wanted = str(options.get(STATE))
    for other in (PATH, STREAM):
        if _option(options, other) is not None:
            raise DataSourceOptionError(other, _option(options, other), "given together with "
                                        "option('state'), which reads a component's state",
                                        f"drop option({other!r})")
    name, component = _option(options, TOPOLOGY), _option(options, COMPONENT)
    if name is None or component is None:
        missing = TOPOLOGY if name is None else COMPONENT
        raise DataSourceOptionError(missing, None, "option('state') needs the topology and "
                                    "the component", "add .option('topology', T)"
                                    ".option('component', C)")
    hold_secs = _hold_secs(options)
    for attempt in range(_ATTEMPTS):
        topology, components, committed = _stored(options, name)
        if component not in components:  # before the checkpoint: the clearer error first
            component_tasks(name, component, components, {}, 0)
        store = CheckpointStore(committed.root, name) if committed else None
        checkpoint_id = choose_checkpoint(name, topology.config.get(RELIABILITY, ""), wanted,
                                          committed.id if committed else 0,
                                          store.checkpoints() if store else [])
        assert store is not None and committed is not None
        if hold_secs:
            try:
                store.hold(checkpoint_id, time.time() + hold_secs)
            except OSError as exc:  # a read-only root: read without a hold
                log.warning("cannot hold checkpoint %d of %s under %s (%s): a commit during "
                            "the read may delete it", checkpoint_id, name, committed.root, exc)
        saved = saved_tasks(store, checkpoint_id)  # listed after the hold: they stay
        if saved or attempt == _ATTEMPTS - 1 or wanted.lower() != LATEST:
            break
        # a newer commit deleted it between the record and the hold: read the record again
    config = dict(topology.config)
    config.update(next(comp.config for comp in topology.components if comp.name == component))
    most = int(config.get(MAX_PARALLELISM) or TopologyConfig.max_parallelism)
    assert store is not None
    try:  # the tasks that wrote the checkpoint (an update since may have moved them)
        layout = store.load_component(checkpoint_id, component)
    except (OSError, ValueError):
        layout = None
    if layout is not None:
        components = {**components, component: [int(t) for t in layout["tasks"]]}
        most = int(layout.get("max_parallelism") or most)
    tasks = component_tasks(name, component, components, saved, checkpoint_id)
    return StatePlan(committed.root, name, component, checkpoint_id, tasks, config, most)


def _hold_secs(options: Mapping[str, str]) -> float:
    given = _option(options, HOLD_SECS)
    try:
        secs = DEFAULT_HOLD_SECS if given is None else float(given)
    except ValueError:
        secs = -1.0
    if not secs >= 0:
        raise DataSourceOptionError(HOLD_SECS, given, "not a number of seconds",
                                    f"give seconds >= 0 (default {DEFAULT_HOLD_SECS:g}; 0: no "
                                    "hold)")
    return secs


def _stored(options: Mapping[str, str], name: str):
    """Return the stored topology, each component's task ids and the committed checkpoint."""
    from heron_spark.contract.topology_view import CommittedCheckpoint
    from heron_spark.statemgr import open_state_manager

    with open_state_manager(statemgr_url(options)) as statemgr:
        topology = stored_topology(statemgr, name)
        packing = statemgr.get_packing_plan(name)
        committed = CommittedCheckpoint.from_stored(statemgr.get_committed_checkpoint(name))
    components: dict[str, list[int]] = {comp.name: [] for comp in topology.components}
    for container in packing.containers if packing is not None else []:
        for inst in container.instances:
            components.setdefault(inst.component, []).append(inst.task_id)
    return topology, components, committed


def value_text(value: Any) -> str | None:
    """Return ``value`` as the ``value`` column holds it: JSON text, else its ``repr``."""
    if value is None:
        return None
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)


def read_batches(plan: StatePlan, task: int, rows_per_batch: int = ROWS_PER_BATCH) -> Iterator:
    """Yield Arrow record batches (``SCHEMA``) of ``task``'s state in the checkpoint (executor)."""
    import pyarrow as pa

    from heron_spark.api.serializer import load_serializer
    from heron_spark.statemgr.checkpoints import CheckpointStore
    from heron_spark.statemgr.state_reader import read_task_state
    from heron_spark.wire import tuple_batch

    store = CheckpointStore(plan.root, plan.topology)
    serializer = load_serializer(plan.config, plan.component)
    pairs = read_task_state(store, plan.checkpoint_id, task, plan.tasks[task], serializer)
    try:
        while chunk := list(itertools.islice(pairs, rows_per_batch)):
            keys = [key for key, _ in chunk]
            yield pa.RecordBatch.from_arrays([
                pa.array([str(key) for key in keys], pa.string()),
                pa.array([value_text(value) for _, value in chunk], pa.string()),
                pa.array([task] * len(chunk), pa.int32()),
                pa.array(tuple_batch.key_groups_of(keys, plan.max_parallelism), pa.int32()),
                pa.array([plan.checkpoint_id] * len(chunk), pa.int64())], schema=_arrow_schema())
    except (OSError, ValueError) as exc:
        raise DataSourceOptionError(STATE, str(plan.checkpoint_id), f"component "
                                    f"{plan.component!r} task {task}: cannot read the "
                                    f"checkpoint under {plan.root}: {exc}", "read "
                                    "option('state', 'latest') again (a newer commit deletes "
                                    "older checkpoints; for long reads of a running topology "
                                    "lengthen topology.stateful.checkpoint.interval.seconds)"
                                    ) from exc


def read_rows(plan: StatePlan, task: int) -> Iterator[tuple]:
    """Yield ``task``'s rows as tuples in ``SCHEMA``'s order (``read_batches``, row by row)."""
    for batch in read_batches(plan, task):
        yield from zip(*(column.to_pylist() for column in batch.columns))
