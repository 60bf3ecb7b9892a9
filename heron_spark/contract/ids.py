"""The ids of instances and stream managers in metrics, the TMaster's views and the tracker.

An instance is ``container_<container index>_<component>_<task id>`` (Heron's; our container
indices start at 0). A stream manager publishes its metrics as component ``__stmgr__`` with
task id ``-1 - container index`` (so it never collides with a task id) and is named
``stmgr-<container index>`` in the views.
"""

from __future__ import annotations

STMGR_COMPONENT = "__stmgr__"


def instance_id(container_index: int, component: str, task_id: int) -> str:
    """Return Heron's instance id of task ``task_id``."""
    return f"container_{container_index}_{component}_{task_id}"


def stmgr_id(container_index: int) -> str:
    """Return the id of container ``container_index``'s stream manager in the views."""
    return f"stmgr-{container_index}"


def stmgr_metrics_task(container_index: int) -> int:
    """Return the task id a stream manager publishes its metrics under (negative)."""
    return -1 - container_index


def is_stmgr_metrics_task(task_id: int) -> bool:
    """Tell whether metrics published under ``task_id`` are a stream manager's."""
    return task_id < 0


def stmgr_container(metrics_task: int) -> int:
    """Return the container index of the stream manager publishing as ``metrics_task``."""
    return -1 - metrics_task
