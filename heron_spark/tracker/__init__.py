"""The tracker: Heron's tracker REST paths and web UI over every topology of a state manager.

``app`` answers, ``server`` is the HTTP shell, ``ui/`` holds the static files.
"""
