"""The ``heron-spark`` command."""
