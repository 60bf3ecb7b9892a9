"""Test sources (heronpy's ``heronpy.connectors.mock``)."""

from heron_spark.connectors.mock.arraylooper import ArrayLooper

__all__ = ["ArrayLooper"]
