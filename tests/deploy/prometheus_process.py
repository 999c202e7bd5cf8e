"""A real Prometheus server for tests: started on 127.0.0.1 with a generated config, stopped by PID."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

PROMETHEUS_BINARY = shutil.which("prometheus")
PROMTOOL_BINARY = shutil.which("promtool")
# the Makefile's `apt-get install -y prometheus` provides both
MISSING_REASON = "the prometheus binary is not installed (apt-get install -y prometheus)"


def scrape_config(targets: list[str], scrape_interval: str = "1s") -> str:
    """A Prometheus config scraping `targets` (host:port) as job "jetraft", like deploy/prometheus/prometheus.yml."""
    return json.dumps(  # JSON is valid YAML, and needs no YAML writer
        {
            "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
            "scrape_configs": [
                {"job_name": "jetraft", "metrics_path": "/metrics", "static_configs": [{"targets": targets}]}
            ],
        },
        indent=2,
    )


class PrometheusError(RuntimeError):
    """Prometheus failed to start or refused a query."""


class PrometheusProcess:
    def __init__(self, workdir: Path, targets: list[str], port: int) -> None:
        self.workdir = workdir
        self.targets = targets
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        assert PROMETHEUS_BINARY is not None, MISSING_REASON
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "prometheus.yml"
        config.write_text(scrape_config(self.targets))
        log = open(self.workdir / "prometheus.log", "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(
            [
                PROMETHEUS_BINARY,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self.proc.poll() is not None:
                raise PrometheusError(f"prometheus exited with {self.proc.returncode}; see {self.workdir}")
            if time.monotonic() > deadline:
                self.stop()
                raise PrometheusError(f"prometheus not ready after {timeout:.0f}s")
            time.sleep(0.1)  # a readiness endpoint in another process: nothing to await

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector (raises PrometheusError when Prometheus rejects the query)."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            raise PrometheusError(f"query {expr!r}: HTTP {exc.code} {exc.read()!r}") from exc
        if body.get("status") != "success":
            raise PrometheusError(f"query {expr!r}: {body}")
        return body["data"]["result"]
