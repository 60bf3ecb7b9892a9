"""Container resources of a streamlet topology (heronpy's ``Resources``)."""

from __future__ import annotations


class Resources:
    """CPU and RAM requested per container.

    ``Config.set_container_resources`` records them as ``topology.container.cpu`` /
    ``topology.container.ram`` (bytes).
    """

    def __init__(self) -> None:
        self._cpu = 0.0
        self._ram = 0

    def set_cpu(self, cpu: float) -> "Resources":
        """Request ``cpu`` cores."""
        self._cpu = float(cpu)
        return self

    def set_ram(self, ram: int) -> "Resources":
        """Request ``ram`` bytes."""
        self._ram = int(ram)
        return self

    def set_ram_in_mb(self, ram: float) -> "Resources":
        """Request ``ram`` MiB."""
        return self.set_ram(int(ram * 1024 * 1024))

    def set_ram_in_gb(self, ram: float) -> "Resources":
        """Request ``ram`` GiB."""
        return self.set_ram_in_mb(ram * 1024)

    def get_cpu(self) -> float:
        """Return the requested cores."""
        return self._cpu

    def get_ram(self) -> int:
        """Return the requested bytes."""
        return self._ram

    def __repr__(self) -> str:
        return f"Resource {{cpu: {self._cpu:f}, ram: {self._ram}}}"
