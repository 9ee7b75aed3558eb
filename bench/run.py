"""`make bench`: run every bench/bench_*.py and gather their reports in bench/REPORT.md (not committed).

Each benchmark script is standalone (``python bench/bench_X.py --out FILE [--quick]``),
starts or reuses the embedded server, and writes a markdown report with its figures
and the command that reproduces them. Pass --quick for smaller sizes;
``make bench BENCH_ARGS=--large`` adds bench_recall's 1,000,000-vector data set. What they
share (server, fresh databases, the bulk loader, percentiles, reports) is in
bench/common.py.

``python bench/run.py --gather`` runs nothing: it rebuilds bench/REPORT.md from the reports in
bench/results/ as they stand (after a script was run on its own), each with its own date and command.
REPORT.md is one page to read after a run, and .gitignore keeps it out of the repository: the
committed, dated reports are bench/results/*.md, indexed by bench/README.md. The probes
(bench/probes/) answer one question each and are run by hand.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def report_of(script: Path) -> Path:
    """Where a benchmark script's report goes: bench/results/<name>.md for bench/bench_<name>.py."""
    return HERE / "results" / f"{script.stem.removeprefix('bench_')}.md"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", help="run only bench_<ONLY>.py")
    parser.add_argument("--large", action="store_true",
                        help="also the 1,000,000-vector data set of bench_recall.py (its --large: long)")
    parser.add_argument("--gather", action="store_true",
                        help="run nothing: rebuild bench/REPORT.md from the reports in bench/results/")
    args = parser.parse_args()
    scripts = sorted(HERE.glob("bench_*.py"))
    if args.only:
        scripts = [s for s in scripts if s.stem == f"bench_{args.only}"]
    if args.gather:
        reports = [report_of(s) for s in scripts if report_of(s).exists()]
        (HERE / "REPORT.md").write_text(
            f"# agentmem benchmarks\n\n{datetime.date.today()}, gathered by `python bench/run.py --gather` from "
            "bench/results/: each section is the last run of its script, with its own date and command.\n\n"
            + "\n\n".join(r.read_text() for r in reports))
        print("gathered", ", ".join(r.name for r in reports))
        return 0
    parts, failed = [], []
    for script in scripts:
        out = report_of(script)
        cmd = [sys.executable, str(script), "--out", str(out)] + (["--quick"] if args.quick else [])
        if args.large and script.stem == "bench_recall":
            cmd.append("--large")
        print("===", " ".join(cmd), flush=True)
        if subprocess.run(cmd).returncode != 0:
            failed.append(script.name)
            continue
        parts.append(out.read_text())
    header = (f"# agentmem benchmarks\n\n{datetime.date.today()}, {os.cpu_count()} cores. "
              f"Command: `make bench`{' (--quick)' if args.quick else ''}; each section names its own.\n")
    (HERE / "REPORT.md").write_text(header + "\n" + "\n\n".join(parts))
    if failed:
        print("failed:", ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
