"""Metrics Manager (one per container) and metric aggregation helpers."""
