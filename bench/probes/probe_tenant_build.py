"""Recall@10 against ef_search for HNSW build parameters, on N random 768-d unit vectors in one table.

    .venv/bin/python bench/probes/probe_tenant_build.py N m,ef_construction [m,ef_construction ...]

The figures behind the build parameters of a tenant's own index (docs/vector_search.md: the table of
m 16 / ef_construction 64 against m 32 / 128 at 30,000 rows, and the 6,000-row figures), run as
`probe_tenant_build.py 30000 16,64 32,128` and `probe_tenant_build.py 6000 32,128` against the
embedded bench server on port 55452 (start it with bench_recall.py or `agentmem dev-server`). Queries:
40 of the vectors plus noise (as bench_recall's), k + 20 = 30 rows from the index re-ranked to 10.
Prints one line per (build, ef_search): build time, recall@10, p50/p95 ms, load average.
"""
import sys, time, numpy as np, psycopg
from pgvector.psycopg import register_vector
N = int(sys.argv[1]); configs = [tuple(map(int, c.split(","))) for c in sys.argv[2:]]
url = "postgresql://postgres@127.0.0.1:55452/postgres"
with psycopg.connect(url, autocommit=True) as c:
    if not c.execute("select 1 from pg_database where datname='probe_build'").fetchone():
        c.execute("create database probe_build")
conn = psycopg.connect(url.rsplit("/",1)[0] + "/probe_build", autocommit=True)
conn.execute("create extension if not exists vector"); register_vector(conn)
rng = np.random.default_rng(7); dim = 768
v = rng.standard_normal((N, dim), dtype=np.float32); v /= np.linalg.norm(v, axis=1, keepdims=True)
tbl = f"r{N}"
if not conn.execute("select to_regclass(%s)", (tbl,)).fetchone()[0]:
    conn.execute(f"create table {tbl} (id int primary key, embedding vector({dim}))")
    with conn.cursor().copy(f"copy {tbl} from stdin with (format binary)") as cp:
        cp.set_types(["int4", "vector"])
        for i in range(N): cp.write_row((i, v[i]))
    conn.execute(f"vacuum analyze {tbl}")
Q = 40
qs = v[rng.choice(N, Q)] + rng.standard_normal((Q, dim), dtype=np.float32) * 0.02
qs /= np.linalg.norm(qs, axis=1, keepdims=True)
truth = [set(np.argsort(-(v @ q))[:10].tolist()) for q in qs]
conn.execute("set maintenance_work_mem='1GB'"); conn.execute("set enable_seqscan=off")
for m, efc in configs:
    name = f"{tbl}_m{m}_e{efc}"
    conn.execute("set hnsw.ef_search=40")
    t0 = time.perf_counter()
    if not conn.execute("select to_regclass(%s)", (name,)).fetchone()[0]:
        conn.execute(f"create index {name} on {tbl} using hnsw (embedding vector_cosine_ops) with (m={m}, ef_construction={efc})")
    build = time.perf_counter() - t0
    # only this index
    others = [r[0] for r in conn.execute("select indexname from pg_indexes where tablename=%s and indexname like %s and indexname<>%s", (tbl, tbl+'_m%', name))]
    conn.execute("begin")
    for o in others: conn.execute(f"drop index {o}")
    for ef in (40, 100, 200, 400, 600, 1000):
        conn.execute(f"set hnsw.ef_search={ef}")
        rec, lat = [], []
        for q, tr in zip(qs, truth):
            t0 = time.perf_counter()
            ids = [r[0] for r in conn.execute(f"select id from (select id, embedding <=> %s as d from {tbl} order by embedding <=> %s limit 30) s order by d limit 10", (q, q))]
            lat.append((time.perf_counter()-t0)*1000); rec.append(len(set(ids) & tr)/10)
        print(f"N={N} m={m} efc={efc} build={build:.1f}s ef={ef} recall={np.mean(rec):.3f} p50={np.percentile(lat,50):.1f} p95={np.percentile(lat,95):.1f} load={open('/proc/loadavg').read().split()[0]}", flush=True)
    conn.execute("rollback")
# exact
conn.execute("set enable_seqscan=on"); conn.execute("set enable_indexscan=off")
lat=[]
for q in qs:
    t0=time.perf_counter(); conn.execute(f"select id from {tbl} order by embedding <=> %s limit 10",(q,)).fetchall(); lat.append((time.perf_counter()-t0)*1000)
print(f"N={N} exact seqscan p50={np.percentile(lat,50):.1f} p95={np.percentile(lat,95):.1f}", flush=True)
