"""heronpy.proto: the protobuf names heronpy user code reads (see the modules under it)."""
