"""Real JVM components for the tests, resolved from Maven Central by ``tests/jvm/pom.xml``.

``classpath(profile)`` returns a folder of jars for one profile of the pom (``kafka``: an Apache
Kafka broker and its tools; ``spark-kafka``: Spark's Kafka source; ``delta``: Delta Lake's Spark
reader; ``s3proxy``: an S3 API server on a local folder), copied once by ``mvn
dependency:copy-dependencies`` into a cache keyed by the pom's hash (``~/.cache/heron_spark/jvm``,
or ``$HERON_SPARK_JVM_CACHE``) and reused after that; Maven itself caches in ``~/.m2``. A file
lock keeps two test processes from copying the same profile at once. ``python
tests/jvm_support.py`` resolves every profile (``.ci/run`` does it first, so a Maven failure
shows once, up front).

``spark_jars(profile)`` lists the profile's jars that pyspark does not already ship (Spark,
Scala, Hadoop and the logging jars come from pyspark's own ``jars`` folder), for ``spark.jars``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

POM = Path(__file__).resolve().parent / "jvm" / "pom.xml"
PROFILES = ("kafka", "spark-kafka", "delta", "s3proxy")


def cache_root() -> Path:
    return Path(os.environ.get("HERON_SPARK_JVM_CACHE",
                               Path.home() / ".cache" / "heron_spark" / "jvm"))


def classpath(profile: str) -> Path:
    """The folder holding ``profile``'s jars, resolved from Maven on first use."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; one of {PROFILES}")
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:12]
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    folder = root / f"{profile}-{digest}"
    done = folder / ".complete"
    if done.exists():
        return folder
    with open(root / f".{profile}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return folder
        partial = root / f"{profile}-{digest}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        if shutil.which("mvn") is None:
            raise RuntimeError("the JVM tests need Maven (`mvn`, with Java 17): "
                               "apt-get install maven")
        command = ["mvn", "-q", "-B", "-f", str(POM), "-P", profile,
                   "dependency:copy-dependencies", "-DincludeScope=runtime",
                   f"-DoutputDirectory={partial}"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=900)
        if result.returncode != 0 or not any(partial.glob("*.jar")):
            raise RuntimeError(f"resolving the {profile!r} jars failed ({' '.join(command)}):\n"
                               f"{result.stdout[-3000:]}{result.stderr[-3000:]}")
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
        done.touch()
    return folder


def _artifact(jar: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``."""
    found = re.match(r"(.*?)-\d+(\.\d+)+.*\.jar$", jar)
    return found.group(1) if found else jar


def spark_jars(profile: str) -> list[str]:
    """The jars of ``profile`` that pyspark's own ``jars`` folder does not already hold."""
    import pyspark

    shipped = {_artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(str(p) for p in classpath(profile).glob("*.jar")
                  if _artifact(p.name) not in shipped)


# Delta Lake's newest Spark build on Maven Central (delta-spark 4.4.0) is built for Spark 4.2 and
# fails on pyspark 4.3 when it reads (NoSuchMethodError: LogicalRDD.<init>); Spark's Kafka source
# is served up to 4.2.0 and does run on 4.3. So Spark's Delta reader runs in a venv of its own
# with the pyspark its Delta release was built for, created once beside the jars.
DELTA_PYSPARK = "pyspark==4.2.1"


def delta_reader_python() -> str:
    """A Python whose pyspark matches the ``delta`` profile's Delta release (created once)."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    venv = root / f"venv-{DELTA_PYSPARK.replace('==', '-')}"
    python = venv / "bin" / "python"
    done = venv / ".complete"
    if done.exists():
        return str(python)
    with open(root / ".venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            result = subprocess.run([str(python), "-m", "pip", "install", "-q", DELTA_PYSPARK],
                                    capture_output=True, text=True, timeout=900)
            if result.returncode != 0:
                raise RuntimeError(f"installing {DELTA_PYSPARK} for Spark's Delta reader "
                                   f"failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
            done.touch()
    return str(python)


if __name__ == "__main__":
    for name in sys.argv[1:] or PROFILES:
        print(f"{name}: {classpath(name)}")
    if not sys.argv[1:]:
        print(f"Spark's Delta reader: {delta_reader_python()}")
