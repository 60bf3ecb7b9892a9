"""Topology -> logical plan (validated) -> packing plan -> physical plan."""
