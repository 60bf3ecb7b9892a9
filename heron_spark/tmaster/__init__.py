"""The Topology Master, run inside the Spark driver, and its tracker API."""
