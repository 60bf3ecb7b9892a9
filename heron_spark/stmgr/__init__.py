"""The Stream Manager: routes tuples between instances and peer stmgrs (one per container)."""
