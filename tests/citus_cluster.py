"""The three-node Citus test cluster of scripts/citus.sh: a database made on every node.

Citus keeps its metadata per database, and a database copied from a template
does not carry it, so each database the tests use is created on the
coordinator and on every worker, gets the citus extension on each, and has the
workers registered in its own metadata.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql


def nodes(coordinator_url: str) -> list[tuple[str, int]]:
    """(host, port) of every node registered in the coordinator's postgres database, coordinator first."""
    with psycopg.connect(coordinator_url, autocommit=True) as conn:
        return [(h, p) for h, p in conn.execute(
            "select nodename, nodeport from pg_dist_node where noderole = 'primary' order by groupid")]


def _url(base: str, host: str, port: int, dbname: str) -> str:
    parts = urlsplit(base)
    user = parts.username or "postgres"
    return urlunsplit((parts.scheme, f"{user}@{host}:{port}", f"/{dbname}", "", ""))


def create_database(coordinator_url: str, dbname: str) -> str:
    """Create dbname on every node with citus in it and the workers registered; return its URL."""
    cluster = nodes(coordinator_url)
    (chost, cport), workers = cluster[0], cluster[1:]
    for host, port in cluster:
        with psycopg.connect(_url(coordinator_url, host, port, "postgres"), autocommit=True) as conn:
            conn.execute("set citus.enable_create_database_propagation = off")
            conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(dbname)))
            conn.execute(sql.SQL("create database {}").format(sql.Identifier(dbname)))
        with psycopg.connect(_url(coordinator_url, host, port, dbname), autocommit=True) as conn:
            conn.execute("create extension citus")
    url = _url(coordinator_url, chost, cport, dbname)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("select citus_set_coordinator_host(%s, %s)", (chost, cport))
        for host, port in workers:
            conn.execute("select citus_add_node(%s, %s)", (host, port))
    return url


def drop_database(coordinator_url: str, dbname: str) -> None:
    for host, port in nodes(coordinator_url):
        with psycopg.connect(_url(coordinator_url, host, port, "postgres"), autocommit=True) as conn:
            conn.execute("set citus.enable_create_database_propagation = off")
            conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(dbname)))
