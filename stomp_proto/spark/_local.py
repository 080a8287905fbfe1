"""A quiet, loopback-only local SparkSession with the STOMP data sources registered.

For trying the data sources on one machine, for tests and for benchmarks: the
same settings everywhere, so that what the tests check is what users run.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["local_session"]

log = logging.getLogger("stomp_proto.spark")

# Errors only: Spark's INFO start-up chatter would bury a program's own output,
# and the native-Hadoop warning is noise on every machine without it.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.spark.name = org.apache.spark
logger.spark.level = error
logger.nativecode.name = org.apache.hadoop.util.NativeCodeLoader
logger.nativecode.level = off
"""


def local_session(
    app_name: str = "stomp_proto",
    *,
    cores: int = 2,
    conf_dir: str | Path | None = None,
    max_failures: int = 1,
    ui: bool = True,
) -> Any:
    """A ``local[cores]`` SparkSession named ``app_name``, bound to 127.0.0.1, with the
    STOMP sources registered.

    Call it before anything else starts a JVM in this process: it sets the
    environment the JVM reads at start-up - ``PYSPARK_PYTHON`` and
    ``PYSPARK_DRIVER_PYTHON`` to this interpreter (the Python workers need the
    same packages: pyarrow and stomp_proto), ``SPARK_LOCAL_IP`` (unless set)
    and ``SPARK_CONF_DIR``, a directory holding a log4j2 configuration that
    shows errors only (``conf_dir``; a new temporary one when omitted).  The
    console progress bar is off.  The web UI is on, on 127.0.0.1 (port 4040,
    or the next free one), and its address is logged at INFO on the
    ``stomp_proto.spark`` logger; ``ui=False`` turns it off (tests and
    benchmarks: lighter, and no port taken), which is logged too.  Stop the
    session with ``.stop()``.
    ``max_failures`` above 1 lets a failed task run again, up to that many
    attempts in all (``local[cores,max_failures]``; local mode runs each task
    once by default).
    """
    conf = Path(conf_dir) if conf_dir is not None else Path(tempfile.mkdtemp(prefix="spark-conf-"))
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "log4j2.properties").write_text(_LOG4J2)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["SPARK_CONF_DIR"] = str(conf)

    from pyspark.sql import SparkSession

    from ._register import register

    session = (
        SparkSession.builder.master(
            f"local[{cores}]" if max_failures <= 1 else f"local[{cores},{max_failures}]"
        )
        .appName(app_name)
        .config("spark.ui.enabled", "true" if ui else "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    register(session)
    if ui:
        log.info("local_session: the Spark UI is at %s", session.sparkContext.uiWebUrl)
    else:
        log.info("local_session: the Spark UI is off (ui=False)")
    return session
