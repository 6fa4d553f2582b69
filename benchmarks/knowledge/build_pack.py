"""Build the knowledge pack shipped with the package (``release/knowledge/pack/``).

Reads every committed tuning log under ``benchmarks/results`` (release JSON-lines logs; rejection
summaries and other files are skipped), keeps each workload's ``TOP_K`` fastest successful records
with a trace per machine (``mcpu``, cores and CPU model: one machine's timings are ranked only with
its own), and writes them, sorted, as one knowledge shard ``pack.jsonl`` plus ``manifest.json``
(the logs read, records per machine and ISA class, the code revision and date). The output is
deterministic for the same logs.

Command (from the repository root)::

    .venv/bin/python benchmarks/knowledge/build_pack.py            # writes release/knowledge/pack/
    .venv/bin/python benchmarks/knowledge/build_pack.py --out DIR  # elsewhere
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None) -> int:
    sys.path.insert(0, ROOT)
    from release.errors import RecordError
    from release.knowledge.store import KNOWLEDGE_VERSION
    from release.knowledge.targets import record_identity
    from release.knowledge.pack import MANIFEST, PACK_FILE, TOP_K
    from release.measure.records import load_records
    from release.target import isa_class, machine_of

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logs", default=os.path.join(ROOT, "benchmarks", "results"), help="folder of committed logs")
    ap.add_argument("--out", default=os.path.join(ROOT, "release", "knowledge", "pack"), help="pack folder")
    ap.add_argument("--top-k", type=int, default=TOP_K, help="records kept per workload and machine")
    args = ap.parse_args(argv)

    groups: dict[tuple, list] = defaultdict(list)
    sources = []
    for path in sorted(glob.glob(os.path.join(args.logs, "**", "*.jsonl"), recursive=True)):
        if path.endswith((".rejections.jsonl", ".wall.jsonl")):
            continue
        try:
            recs = load_records(path)
        except RecordError:
            continue
        used = 0
        for r in recs:
            if r.ok and r.trace is not None and r.target and not r.cut_short:
                groups[(r.task.rsplit("/", 1)[-1], machine_of(r.target, r.machine))].append(r)
                used += 1
        if used:
            sources.append(os.path.relpath(path, ROOT))
    kept, seen = [], set()
    wrong = set()
    for recs in groups.values():
        wrong |= {(r.task, tuple(r.config)) for r in recs if r.error_kind == "wrong_output"}
    for key in sorted(groups):
        best = sorted(groups[key], key=lambda r: (r.mean_cost, r.timestamp))
        n = 0
        for r in best:
            ident = record_identity(r)
            if ident in seen or (r.task, tuple(r.config)) in wrong:
                continue
            seen.add(ident)
            kept.append(r)
            n += 1
            if n >= args.top_k:
                break
    os.makedirs(args.out, exist_ok=True)
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    header = {"release_knowledge": KNOWLEDGE_VERSION, "pack": True, "revision": rev}
    with open(os.path.join(args.out, PACK_FILE), "w", encoding="utf-8") as f:
        f.write(json.dumps(header, separators=(",", ":")) + "\n")
        for r in kept:
            f.write(r.to_json() + "\n")
    machines = Counter(machine_of(r.target, r.machine) for r in kept)
    classes = Counter(isa_class(r.target) for r in kept)
    info = {"built": datetime.date.today().isoformat(), "revision": rev, "top_k": args.top_k,
            "records": len(kept), "workloads": len({r.task for r in kept}),
            "machines": dict(sorted(machines.items())), "isa_classes": dict(sorted(classes.items())),
            "logs": sources, "command": "python benchmarks/knowledge/build_pack.py"}
    with open(os.path.join(args.out, MANIFEST), "w", encoding="utf-8") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    size = os.path.getsize(os.path.join(args.out, PACK_FILE))
    print(f"pack {args.out}: {len(kept)} records of {info['workloads']} workloads from {len(machines)} machines "
          f"({', '.join(f'{m} {n}' for m, n in sorted(machines.items()))}), {size / 1e6:.1f} MB, "
          f"from {len(sources)} logs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
