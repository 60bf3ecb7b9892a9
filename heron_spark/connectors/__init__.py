"""Sources for the Streamlet API (heronpy's ``heronpy.connectors``)."""
