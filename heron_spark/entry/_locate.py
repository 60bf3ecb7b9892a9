"""Find the TMaster a stmgr or metrics manager dials (a start-up step both share).

Runs in a container's child process before its role starts.
"""

from __future__ import annotations

from heron_spark.container.files import ContainerFiles
from heron_spark.statemgr import tmaster_address as resolve


def tmaster_address(tmaster: str, files: ContainerFiles) -> tuple[str, int]:
    """Return the TMaster's ``(host, port)`` from a child's ``--tmaster`` value.

    ``host:port`` as given (the TMaster runs in the driver), or, for ``statemgr@<generation>``
    (it runs in container 0), the location that generation's TMaster claims in the state
    manager, waited for up to ``heron.startup.timeout.secs``. The topology's name comes from
    the packing plan: unpickling the logical plan would import user code.
    """
    config = files.load_config()
    return resolve(tmaster, config.statemgr, files.load_packing().topology_name,
                   config.startup_timeout_secs)
