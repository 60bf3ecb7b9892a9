"""The container (Heron executor): the body of one Spark barrier task."""
