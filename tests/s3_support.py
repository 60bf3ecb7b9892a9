"""An S3 object store for the tests: S3Proxy (``org.gaul:s3proxy``, Maven Central, profile
``s3proxy`` of ``tests/jvm/pom.xml``) serving the S3 API on a free loopback port, with AWS
signatures checked against a per-run access key and secret, and every object kept as a file
under ``folder/<bucket>/<key>`` (its ``filesystem`` backend).

So a table written through ``s3://`` by ``deltalake`` can also be read straight from that
folder by readers with no S3 client (DuckDB replaying ``_delta_log``, Delta's Spark reader).
S3Proxy does not honor ``If-None-Match`` (a conditional put overwrites): one writer per table.
"""

from __future__ import annotations

import secrets
import signal
import socket
import subprocess
from pathlib import Path

from cluster_support import free_port
from heron_spark.testing import wait_until


class S3Server:
    """``start`` / ``stop``; ``storage_options`` for ``deltalake``; ``create_bucket``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.data = folder / "data"
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.key, self.secret = "heron-" + secrets.token_hex(4), secrets.token_hex(16)
        self.process: subprocess.Popen | None = None

    @property
    def storage_options(self) -> dict[str, str]:
        """``deltalake``'s options for this store (one writer: commits by plain put)."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": self.key,
                "AWS_SECRET_ACCESS_KEY": self.secret, "AWS_REGION": "us-east-1",
                "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}

    def start(self) -> "S3Server":
        import jvm_support

        self.data.mkdir(parents=True, exist_ok=True)
        conf = self.folder / "s3proxy.conf"
        conf.write_text("\n".join([
            f"s3proxy.endpoint={self.endpoint}", "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={self.key}", f"s3proxy.credential={self.secret}",
            "jclouds.provider=filesystem", f"jclouds.filesystem.basedir={self.data}", ""]))
        with open(self.folder / "s3proxy.out", "ab") as out:
            self.process = subprocess.Popen(
                ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 "-cp", f"{jvm_support.classpath('s3proxy')}/*", "org.gaul.s3proxy.Main",
                 "--properties", str(conf)],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(self._ready, 60, message=f"S3Proxy on {self.endpoint}")
        return self

    def _ready(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError("S3Proxy exited: "
                               f"{(self.folder / 's3proxy.out').read_text()[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", self.port), 0.2).close()
        except OSError:
            return False
        return True

    def create_bucket(self, name: str) -> str:
        """Create bucket ``name`` through the S3 API (pyarrow's S3 client); return it."""
        import pyarrow.fs as pafs

        fs = pafs.S3FileSystem(access_key=self.key, secret_key=self.secret,
                               endpoint_override=self.endpoint, scheme="http",
                               region="us-east-1", allow_bucket_creation=True)
        fs.create_dir(name)
        return name

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)
        self.process = None
