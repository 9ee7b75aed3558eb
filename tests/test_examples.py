"""examples/: the Node.js (pg) and Java (JDBC) programs pass against this server's database.

They use agentmem through SQL alone, as the application login, and exit non-zero on any surprise.
`make examples` (and CI) installs what they need; here a missing Node.js, Java or JDBC jar skips,
and a missing node_modules is installed with `npm ci`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from helpers import count

ROOT = Path(__file__).resolve().parents[1]
JAR = Path("/usr/share/java/postgresql.jar")


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


def test_node_example(app_url, admin):
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js is not installed")
    node = ROOT / "examples" / "node"
    if not (node / "node_modules" / "pg").is_dir():
        done = _run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=node)
        assert done.returncode == 0, done.stderr
    done = _run(["node", str(node / "example.js")], env={"PATH": shutil.which("node").rsplit("/", 1)[0],
                                                         "DATABASE_URL": app_url})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SQLSTATE AM001" in done.stdout and done.stdout.rstrip().endswith("node example: OK")
    # it erased its user: nothing of it is left but the receipt and the cached answer
    assert count(admin, "messages", "tenant_id = 'example-node'") == 0
    assert count(admin, "erasure_log", "tenant_id = 'example-node'") == 1
    # its messages were stored with embedding => null: each queued a job, which went with its row
    receipt = admin.execute("select rows_removed from agentmem.erasure_log where tenant_id = 'example-node'").fetchone()[0]
    assert receipt["messages"] == 2 and receipt.get("message_embeddings", 0) == 0, receipt
    assert count(admin, "embedding_jobs", "tenant_id = 'example-node'") == 0


def test_java_example(app_url, admin):
    if shutil.which("java") is None:
        pytest.skip("Java is not installed")
    if not JAR.is_file():
        pytest.skip(f"{JAR} is missing: apt-get install libpostgresql-jdbc-java (make examples does)")
    u = urlsplit(app_url)
    jdbc = f"jdbc:postgresql://{u.hostname}:{u.port}{u.path}?user={u.username}"
    done = _run(["java", "-cp", str(JAR), str(ROOT / "examples" / "java" / "Example.java"), jdbc])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SQLSTATE AM001" in done.stdout and done.stdout.rstrip().endswith("java example: OK")
    assert count(admin, "messages", "tenant_id = 'example-java'") == 0
    assert count(admin, "erasure_log", "tenant_id = 'example-java'") == 1
    # its messages were stored with embedding => null: each queued a job, which went with its row
    receipt = admin.execute("select rows_removed from agentmem.erasure_log where tenant_id = 'example-java'").fetchone()[0]
    assert receipt["messages"] == 2 and receipt.get("message_embeddings", 0) == 0, receipt
    assert count(admin, "embedding_jobs", "tenant_id = 'example-java'") == 0


def test_the_examples_exit_non_zero_on_a_surprise(app_url):
    """A login that is not an application role: the first call is refused, and both programs fail."""
    u = urlsplit(app_url)
    wrong = app_url.replace(f"{u.username}@", "agentmem_owner_is_not_a_login@")
    if shutil.which("node") and (ROOT / "examples" / "node" / "node_modules" / "pg").is_dir():
        done = _run(["node", str(ROOT / "examples" / "node" / "example.js")],
                    env={"PATH": shutil.which("node").rsplit("/", 1)[0], "DATABASE_URL": wrong})
        assert done.returncode == 1 and "node example FAILED" in done.stderr, done.stderr
    if shutil.which("java") and JAR.is_file():
        jdbc = f"jdbc:postgresql://{u.hostname}:{u.port}{u.path}?user=agentmem_owner_is_not_a_login"
        done = _run(["java", "-cp", str(JAR), str(ROOT / "examples" / "java" / "Example.java"), jdbc])
        assert done.returncode == 1 and "java example FAILED" in done.stderr, done.stderr


@pytest.mark.parametrize("example", ["node/example.js", "java/Example.java"])
def test_a_login_made_as_the_header_says_runs_the_example(example, server, dbname, admin):
    """Issue 31, defect 8: the header names every grant the example needs. A login made by it alone
    (an application role, and the header's grant_tenant) runs the example; without the tenant grant
    it could not."""
    import re
    import uuid
    header = (ROOT / "examples" / example).read_text().split("\n\n")[0]
    (grant,) = re.findall(r"^//\s+(select agentmem\.grant_tenant\(.*\);)$", header, re.M)
    login = "agentmem_ex_" + uuid.uuid4().hex[:8]
    admin.execute(f"create role {login} login")
    try:
        admin.execute("select agentmem.grant_app_role(role_name => %s)", (login,))
        admin.execute(grant.replace("'app_login'", f"'{login}'"))
        url = server.db_url(dbname, login)
        if example.startswith("node"):
            if shutil.which("node") is None or not (ROOT / "examples" / "node" / "node_modules" / "pg").is_dir():
                pytest.skip("Node.js or the example's npm packages are not installed (test_node_example installs them)")
            done = _run(["node", str(ROOT / "examples" / example)],
                        env={"PATH": shutil.which("node").rsplit("/", 1)[0], "DATABASE_URL": url})
        else:
            if shutil.which("java") is None or not JAR.is_file():
                pytest.skip("Java or the JDBC jar is not installed")
            u = urlsplit(url)
            done = _run(["java", "-cp", str(JAR), str(ROOT / "examples" / example),
                         f"jdbc:postgresql://{u.hostname}:{u.port}{u.path}?user={login}"])
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        admin.execute(f"drop owned by {login}")
        admin.execute(f"drop role {login}")
