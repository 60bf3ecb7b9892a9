"""heronpy.api.bolt: bolts."""

from heron_spark.api.bolt import BaseBolt, Bolt  # noqa: F401
