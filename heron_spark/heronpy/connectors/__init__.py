"""heronpy.connectors: sources for the Streamlet API (``heron_spark.connectors``)."""
