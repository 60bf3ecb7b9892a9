"""The composition roots: one module per child process a container starts.

A container's supervisor runs ``python -m heron_spark.entry.<role>`` with the arguments of its
``contract.child_args`` dataclass (whose ``MODULE`` names the module here): ``stmgr``,
``instance``, ``metrics`` and, with ``heron.tmaster.placement`` container, ``tmaster`` in
container 0. Each module reads its command line, ties the process to its parent
(``_process.become_child``), opens its log, builds its role's objects and hands them the
runtime pieces they need (the TMaster child starts the tracker beside its TMaster), then runs
it and returns its exit code (``contract.exit_codes``).

This package is the top layer: it may import every package below it, the tracker included,
and nothing imports it. Importing it starts nothing.
"""
