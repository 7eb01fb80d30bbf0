"""A real single-node HDFS for the tests: one NameNode and one DataNode from Hadoop's own jars
(jvm/hdfs-pom.xml, the version of PySpark's Hadoop client), on loopback ports, in a temporary folder."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from foundation.paths import jar_group
from lab.local_cluster import free_port
from lab.harness import wait_for

_SITE = """<?xml version="1.0"?>
<configuration>
{}
</configuration>
"""


def _xml(props: dict[str, str]) -> str:
    return _SITE.format("\n".join(f"<property><name>{k}</name><value>{v}</value></property>"
                                  for k, v in props.items()))


class LocalHdfs:
    def __init__(self, root: Path):
        self.root = root
        self.port = free_port()
        self.url = f"hdfs://127.0.0.1:{self.port}"
        self._procs: list[subprocess.Popen] = []

    def _write_conf(self) -> Path:
        conf = self.root / "conf"
        for webapp in ("hdfs", "datanode", "static"):  # the daemons' web UIs look for these on the classpath
            (conf / "webapps" / webapp).mkdir(parents=True, exist_ok=True)
        (conf / "core-site.xml").write_text(_xml({"fs.defaultFS": self.url, "hadoop.tmp.dir": str(self.root / "tmp")}))
        loopback = {k: "127.0.0.1:0" for k in ("dfs.namenode.http-address", "dfs.datanode.address",
                                                "dfs.datanode.http.address", "dfs.datanode.ipc.address")}
        (conf / "hdfs-site.xml").write_text(_xml({
            "dfs.namenode.name.dir": str(self.root / "name"), "dfs.datanode.data.dir": str(self.root / "data"),
            "dfs.replication": "1", "dfs.namenode.safemode.threshold-pct": "0", **loopback}))
        (conf / "log4j.properties").write_text(
            "log4j.rootLogger=INFO,out\nlog4j.appender.out=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.out.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.out.layout.ConversionPattern=%d %p %c{1}: %m%n\n")
        return conf

    def _java(self, conf: Path, main: str, *args: str, log: str) -> subprocess.Popen:
        classpath = os.pathsep.join([str(conf), *(str(j) for j in jar_group("hdfs"))])
        return subprocess.Popen(["java", "-Xmx384m", "-cp", classpath, main, *args],
                                stdout=open(self.root / log, "w"), stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)

    def start(self) -> LocalHdfs:
        conf = self._write_conf()
        fmt = self._java(conf, "org.apache.hadoop.hdfs.server.namenode.NameNode", "-format", "-force",
                         "-nonInteractive", log="format.log")
        if fmt.wait(timeout=120) != 0:
            raise RuntimeError(f"formatting the NameNode failed: {(self.root / 'format.log').read_text()[-2000:]}")
        self._procs.append(self._java(conf, "org.apache.hadoop.hdfs.server.namenode.NameNode", log="namenode.log"))
        self._procs.append(self._java(conf, "org.apache.hadoop.hdfs.server.datanode.DataNode", log="datanode.log"))
        wait_for(lambda: "Registered DN" in (self.root / "namenode.log").read_text(errors="replace"), 120,
                 f"the HDFS DataNode to register with the NameNode ({self.root})")
        return self

    def stop(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self._procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
