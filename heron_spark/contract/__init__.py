"""Every contract between heron_spark's processes, written once.

Both sides of each contract import it from here; nothing else spells it:

- ``exit_codes``: what a child process's exit code means (``ExitCode``), read by its container.
- ``roles``: who dials whom (``PeerRole``, the proto enum the handshake carries).
- ``child_args``: the command line of each child process (one frozen dataclass per kind, with
  ``to_argv`` for the container and ``from_argv`` for the child's ``heron_spark.entry`` module).
- ``execution_state``: the stored execution state of a topology (a proto message).
- ``topology_view``: what a TMaster tells about its topology, typed (``TopologyStatus``,
  ``HandleView``, ``TMasterLocation``, ``CommittedCheckpoint``), each with its one codec.
- ``live_paths``: the live views a TMaster answers and the tracker forwards (``LivePath``).
- ``ids``: instance and stream manager ids in metrics and the tracker.
- ``metric_names``: every metric name the processes publish, for them and for every reader.
- ``layout``: the files of a container's working folder (ready files, heartbeats, logs, the
  plan and the secret).

This package is the bottom layer: it imports only the standard library, ``heron_spark.proto``
and ``heron_spark.errors``. Pure constants and functions: any process, any thread.
"""
