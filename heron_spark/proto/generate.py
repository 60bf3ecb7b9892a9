"""Generate ``heron_spark/proto/*_pb2.py`` from ``proto/*.proto`` with grpcio-tools' protoc.

Run ``python -m heron_spark.proto.generate`` after editing a ``.proto`` file and commit the
result. ``tests/test_proto_fresh.py`` regenerates into a temporary folder and fails when the
committed modules differ, so a stale module cannot land.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PROTO_DIR = PACKAGE_DIR.parent.parent / "proto"
_IMPORT = re.compile(r"^import (\w+_pb2) as (\w+)$", re.MULTILINE)


def generate(out_dir: Path, proto_dir: Path = PROTO_DIR) -> list[Path]:
    """Compile every ``.proto`` in ``proto_dir`` into ``out_dir``; return the written modules."""
    from grpc_tools import protoc  # build/test-time only: not a runtime dependency

    sources = sorted(str(p.name) for p in proto_dir.glob("*.proto"))
    if not sources:
        msg = f"no .proto files in {proto_dir}"
        raise FileNotFoundError(msg)
    with tempfile.TemporaryDirectory() as raw_dir:
        args = ["protoc", f"-I{proto_dir}", f"--python_out={raw_dir}", *sources]
        if protoc.main(args) != 0:
            msg = f"protoc failed on {proto_dir}"
            raise RuntimeError(msg)
        written = []
        for module in sorted(Path(raw_dir).glob("*_pb2.py")):
            # protoc writes top-level imports; our modules live in a package.
            text = _IMPORT.sub(r"from heron_spark.proto import \1 as \2", module.read_text())
            target = out_dir / module.name
            target.write_text(text)
            written.append(target)
    return written


if __name__ == "__main__":
    for path in generate(PACKAGE_DIR):
        print(f"wrote {path}", file=sys.stderr)
