"""Text file sources (heronpy's ``heronpy.connectors.textfiles``)."""

from heron_spark.connectors.textfiles.textfilesgenerator import TextFileGenerator

__all__ = ["TextFileGenerator"]
