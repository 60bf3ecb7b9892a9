"""Protobuf modules generated from ``proto/*.proto`` (see ``generate.py``); one per conversation."""
