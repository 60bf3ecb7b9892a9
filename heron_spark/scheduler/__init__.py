"""The scheduler: submit a topology as one Spark barrier stage, and its handle. Driver only."""
