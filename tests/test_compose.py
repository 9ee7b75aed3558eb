"""docker-compose.yml cannot run here (no Docker engine): its structure is checked instead, and the
settings it runs PostgreSQL with are the ones CI's PostgreSQL 15 server starts with."""

from __future__ import annotations

import inspect
import re

import pytest
import yaml

from agentmem import _extraction, turn
from agentmem.embed import OllamaEmbedder
from conftest import ROOT

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
ONE_SHOT = {"migrate", "ollama-pull"}
SETTINGS = "scripts/agentmem-postgresql.conf"


def test_the_healthchecks_reach_the_servers_over_tcp():
    test = SERVICES["postgres"]["healthcheck"]["test"]
    assert test[0] == "CMD" and test[1] == "pg_isready"
    assert "-h" in test and test[test.index("-h") + 1] == "127.0.0.1"  # not the socket the init server uses
    assert "ollama" in SERVICES["ollama"]["healthcheck"]["test"]


def test_every_long_running_service_restarts_and_the_one_shots_run_once():
    for name, service in SERVICES.items():
        if name in ONE_SHOT:
            assert service.get("restart") == "no", name
        else:
            assert service.get("restart") in ("unless-stopped", "always", "on-failure"), name
    assert {"postgres", "ollama", "worker"} <= set(SERVICES) - ONE_SHOT


def test_steps_wait_for_what_they_need():
    assert SERVICES["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert SERVICES["ollama-pull"]["depends_on"]["ollama"]["condition"] == "service_healthy"
    assert SERVICES["worker"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def default_models() -> set[str]:
    """Every Ollama model agentmem's defaults use: the embedder, the Turn helper, extract_facts."""
    models = {inspect.signature(OllamaEmbedder).parameters["model"].default, _extraction.DEFAULT_CHAT_MODEL}
    models |= {value for key, value in vars(turn).items()
               if key.startswith("DEFAULT_") and key.endswith("_MODEL") and isinstance(value, str)}
    return models


def test_every_model_the_defaults_use_is_pulled_with_retries_after_ollama_answers():
    pull = SERVICES["ollama-pull"]
    pulled = set(pull["environment"]["AGENTMEM_OLLAMA_MODELS"].split())
    assert default_models() <= pulled, default_models() - pulled
    assert {"nomic-embed-text", "llama3.2", "llama3.2:1b"} <= default_models()
    script = pull["entrypoint"][-1]
    assert "until ollama pull" in script and "sleep" in script and "sleep 3 &&" not in script


def test_the_build_context_excludes_local_state():
    ignored = {line.strip().rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {".venv", ".pgdata", "build", ".env", ".git"} <= ignored


def test_passwords_are_set_in_one_place():
    text = (ROOT / "docker-compose.yml").read_text()
    assert "change-me" not in text and "password '" not in text.lower()
    example = (ROOT / ".env.example").read_text()
    defined = set(re.findall(r"^([A-Z_]+)=", example, re.M))
    used = set(re.findall(r"\$\{([A-Z_]+)", text))
    assert used <= defined, used - defined
    assert {k for k in used if "PASSWORD" in k} == {"AGENTMEM_DBA_PASSWORD", "AGENTMEM_APP_PASSWORD",
                                                       "AGENTMEM_WORKER_PASSWORD"}
    assert ".env" in (ROOT / ".gitignore").read_text().split()
    for name, service in SERVICES.items():  # no password in a connection URL
        for value in (service.get("environment") or {}).values():
            assert not re.search(r"postgresql://[^@/]*:[^@/]*@", str(value)), name


def test_the_server_settings_are_the_file_ci_starts_postgresql_15_with():
    postgres = SERVICES["postgres"]
    mount = next(v for v in postgres["volumes"] if v.startswith("./" + SETTINGS + ":"))
    target = mount.split(":")[1]
    assert f"config_file={target}" in postgres["command"]
    script = (ROOT / "scripts" / "pg15-debian.sh").read_text()
    assert "agentmem-postgresql.conf" in script and "include = 'agentmem-postgresql.conf'" in script
    settings = (ROOT / SETTINGS).read_text()
    assert "shared_preload_libraries = 'pg_cron'" in settings
    assert "shared_preload_libraries" not in script and "cron.database_name" not in script


def test_the_migrate_step_upgrades_sets_the_logins_and_schedules_retention():
    migrate = SERVICES["migrate"]
    assert migrate["command"] == ["sh", "/usr/local/bin/agentmem-compose-migrate"]  # no exec bit needed
    script = (ROOT / "scripts" / "compose-migrate.sh").read_text()
    for needed in ("agentmem migrate", "alter role agentmem_app_user password",
                   "agentmem.grant_app_role(role_name => 'agentmem_app_user')", "agentmem.schedule_retention("):
        assert needed in script
    assert SERVICES["worker"]["command"][:3] == ["agentmem", "worker", "--database-url"]
    assert "agentmem_worker_user@postgres" in SERVICES["worker"]["command"][3]


@pytest.mark.pg_cron
def test_the_migrate_step_runs_against_a_server_with_pg_cron(server, pg_cron, tmp_path):
    """scripts/compose-migrate.sh itself, on a fresh database of the CI server that has pg_cron (the
    settings compose runs with): installs, makes the logins, schedules retention through dblink."""
    import os
    import subprocess
    import sys
    import uuid

    import psycopg
    name = "agentmem_compose_" + uuid.uuid4().hex[:8]
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f"create database {name}")
    url = server.db_url(name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("create extension vector")
        conn.execute("create extension dblink")  # what the compose init step creates
    env = dict(os.environ, AGENTMEM_DATABASE_URL=url, PGPASSWORD="dba-secret", AGENTMEM_APP_PASSWORD="app-secret",
               AGENTMEM_WORKER_PASSWORD="worker-secret", AGENTMEM_RETENTION_SCHEDULE="*/15 * * * *",
               PATH=f"{os.path.dirname(sys.executable)}:{os.path.dirname(server.bin('psql'))}:/usr/bin:/bin")
    try:
        for _ in range(2):  # and again, as on every `docker compose up`
            run = subprocess.run(["sh", str(ROOT / "scripts" / "compose-migrate.sh")], env=env,
                                 capture_output=True, text=True, timeout=300)
            assert run.returncode == 0, run.stderr
        with psycopg.connect(url) as conn:
            assert conn.execute("select pg_has_role('agentmem_app_user', 'agentmem_app', 'member')").fetchone() == (True,)
        with psycopg.connect(server.db_url(pg_cron), autocommit=True) as conn:
            jobs = conn.execute("select schedule, database from cron.job where jobname = %s",
                                (f"agentmem-retention:{name}",)).fetchall()
            assert jobs == [("*/15 * * * *", name)]
            conn.execute("select cron.unschedule(%s)", (f"agentmem-retention:{name}",))
    finally:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute(f"drop database if exists {name} with (force)")


# -- issue 31, defect 12 ---------------------------------------------------------------------------

def test_the_worker_waits_for_the_model_pulls():
    assert SERVICES["worker"]["depends_on"]["ollama-pull"]["condition"] == "service_completed_successfully"
    models = SERVICES["ollama-pull"]["environment"]["AGENTMEM_OLLAMA_MODELS"].split()
    assert models[0] == "nomic-embed-text"  # the worker's model first


def test_host_ports_are_settings_on_loopback():
    ports = {name: service["ports"] for name, service in SERVICES.items() if "ports" in service}
    assert ports == {"postgres": ["127.0.0.1:${AGENTMEM_PG_PORT:-5432}:5432"],
                     "ollama": ["127.0.0.1:${AGENTMEM_OLLAMA_PORT:-11434}:11434"]}
    example = (ROOT / ".env.example").read_text()
    assert "AGENTMEM_PG_PORT=5432" in example and "AGENTMEM_OLLAMA_PORT=11434" in example


def test_every_image_is_pinned_to_a_version():
    text = (ROOT / "docker-compose.yml").read_text()
    images = re.findall(r"^\s*image:\s*(\S+)", text, re.M) + re.findall(r"^\s*FROM\s+(\S+)", text, re.M)
    built = {"agentmem-tools:local"}  # the image this file builds
    pinned = [i for i in images if i not in built]
    assert len(pinned) == 4, images
    for image in pinned:
        name, _, tag = image.partition(":")
        assert tag and tag != "latest" and re.search(r"\d+\.\d+", tag), image


def test_the_minimum_compose_version_and_the_download_are_said():
    header = (ROOT / "docker-compose.yml").read_text().split("\nname:")[0]
    install = (ROOT / "docs" / "install.md").read_text()
    readme = (ROOT / "README.md").read_text()
    for text in (header, install, readme):
        assert "Compose v2.23.1" in text and "3.6 GB" in text


def test_passwords_must_be_set_and_the_old_samples_are_refused(tmp_path):
    import os
    import subprocess
    example = (ROOT / ".env.example").read_text()
    for name in ("AGENTMEM_DBA_PASSWORD", "AGENTMEM_APP_PASSWORD", "AGENTMEM_WORKER_PASSWORD"):
        assert re.search(rf"^{name}=$", example, re.M), name  # empty: compose's ${...:?} refuses it
    text = (ROOT / "docker-compose.yml").read_text()
    for name in ("AGENTMEM_DBA_PASSWORD", "AGENTMEM_APP_PASSWORD", "AGENTMEM_WORKER_PASSWORD"):
        assert re.search(r"\$\{" + name + r":\?", text), name
    good = {"PGPASSWORD": "a-dba-secret", "AGENTMEM_APP_PASSWORD": "an-app-secret",
            "AGENTMEM_WORKER_PASSWORD": "a-worker-secret"}
    for name, shown in (("PGPASSWORD", "AGENTMEM_DBA_PASSWORD"), ("AGENTMEM_APP_PASSWORD", "AGENTMEM_APP_PASSWORD"),
                        ("AGENTMEM_WORKER_PASSWORD", "AGENTMEM_WORKER_PASSWORD")):
        for value in ("", f"change-me-{name[:3].lower()}"):
            env = {"PATH": "/usr/bin:/bin", "AGENTMEM_DATABASE_URL": "postgresql://nobody@127.0.0.1:9/x",
                   "AGENTMEM_RETENTION_SCHEDULE": "*/15 * * * *", **good, name: value}
            run = subprocess.run(["sh", str(ROOT / "scripts" / "compose-migrate.sh")], env=env, cwd=tmp_path,
                                 capture_output=True, text=True, timeout=60)
            assert run.returncode == 2, run
            assert run.stderr.splitlines() == [
                f"agentmem: {shown} in .env is empty or the sample value: set a password of your own"]
