"""``release knowledge show | add``: what the tuning knowledge base holds, and importing logs into it.

``release knowledge [--dir DIR] show [--target KIND] [--pack]`` prints one row per ISA class,
machine and workload (records, successful ones, best time and GFLOPS); ``--pack`` shows the pack
shipped with the package instead (:mod:`release.knowledge.pack`). ``release knowledge add LOG... [--dir DIR]``
imports release JSON-lines logs, MetaSchedule ``JSONDatabase`` folders and other knowledge bases
(a folder or one shard), skipping records the base already holds. Bad input (a missing path, a
file that is not a tuning log, a folder that is neither a MetaSchedule database nor a knowledge
base) is one line on stderr and exit status 2, before anything is added.
"""

from __future__ import annotations

import argparse
import os


def register(subparsers) -> None:
    """Add the ``knowledge`` command group to the top-level CLI."""
    fmt = argparse.ArgumentDefaultsHelpFormatter
    p = subparsers.add_parser("knowledge", help="the tuning knowledge base: show what it holds, import logs")
    p.add_argument("--dir", dest="kdir", default=None, metavar="DIR",
                   help="knowledge base folder (default: $RELEASE_KNOWLEDGE, else ~/.cache/release-tvm/knowledge)")
    p.set_defaults(func=lambda args: p.print_help() or 2)  # no subcommand: a usage error, as `release regal`
    sub = p.add_subparsers(dest="knowledge_command", metavar="KNOWLEDGE_COMMAND")

    s = sub.add_parser("show", help="records per target and workload, successful ones, best GFLOPS",
                       formatter_class=fmt)
    s.add_argument("--dir", dest="kdir", default=argparse.SUPPRESS, metavar="DIR", help="knowledge base folder")
    s.add_argument("--target", default=None,
                   help="only this target kind (llvm, cuda) or the ISA class of this target (JSON, or 'host' for "
                        "this machine's); records of others are counted")
    s.add_argument("--pack", action="store_true",
                   help="show the knowledge pack shipped with the package (used where the base holds nothing of a "
                        "task's ISA class) instead of the base")
    s.set_defaults(func=cmd_show)

    a = sub.add_parser("add", help="import release logs, MetaSchedule databases, other knowledge bases", formatter_class=fmt)
    a.add_argument("logs", nargs="+", metavar="LOG",
                   help="a release JSON-lines log, a folder with database_workload.json and "
                        "database_tuning_record.json, or another knowledge base (folder or shard)")
    a.add_argument("--dir", dest="kdir", default=argparse.SUPPRESS, metavar="DIR", help="knowledge base folder")
    a.set_defaults(func=cmd_add)


def _open(args):
    from .store import KnowledgeBase

    return KnowledgeBase(getattr(args, "kdir", None))


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _pack_line() -> str:
    from .pack import manifest, pack_dir

    folder = pack_dir()
    if folder is None:
        return "the shipped knowledge pack is off (RELEASE_KNOWLEDGE_PACK=off)"
    info = manifest(folder)
    if not info:
        return f"no knowledge pack at {folder}"
    machines = ", ".join(f"{m} {n}" for m, n in info.get("machines", {}).items())
    return (f"shipped pack {folder}: {info.get('records')} records of {info.get('workloads')} workloads from "
            f"{machines} ({', '.join(info.get('isa_classes', {}))}; built {info.get('built')} at revision "
            f"{info.get('revision') or '?'}); used for a task whose ISA class the base holds nothing of")


def cmd_show(args) -> int:
    from .store import KnowledgeBase

    target = args.target
    if target == "host":
        from ..target import resolve_target, target_to_json

        target = target_to_json(resolve_target("llvm"))
    if args.pack:
        from .pack import PACK_FILE, pack_dir

        folder = pack_dir()
        if folder is None or not os.path.isfile(os.path.join(folder, PACK_FILE)):
            print(_pack_line())
            return 0
        kb = KnowledgeBase(folder)
        kb._files = [os.path.join(folder, PACK_FILE)]
    else:
        kb = _open(args)
    rows = kb.summary(target_kind=target)
    st = kb.stats
    what = "shipped pack" if args.pack else "knowledge base"
    if not rows:
        missing = not args.pack and not os.path.isdir(kb.path)
        print(f"{what} {kb.path} " + ("does not exist (nothing imported yet)" if missing else "holds no records")
              + (f" for {args.target}" if args.target else "")
              + ("" if args.pack else "; import logs with `release knowledge add LOG...`"))
        if not args.pack:
            print(_pack_line())
        return 0
    total = sum(r["records"] for r in rows)
    print(f"{what} {kb.path}: {total} records in {st.get('shards', 0)} shard(s)"
          f" ({st.get('duplicates', 0)} duplicates dropped, {st.get('bad_lines', 0)} unreadable lines skipped"
          + (f", {st.get('other_targets', 0)} of other ISA classes left out" if args.target else "") + ")")
    head = ("ISA class", "machine", "workload", "records", "ok", "best ms", "best GFLOPS", "tuners")
    table = [head] + [(r["target"], r["machine"], r["name"], str(r["records"]), str(r["ok"]),
                       _fmt(r["best_ms"], ".4f"), _fmt(r["best_gflops"], ".2f"), ",".join(r["tuners"])) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for row in table:
        print("  ".join(c.ljust(w) if i < 3 or i == 7 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
              .rstrip())
    if args.pack:
        print(_pack_line())
    return 0


def cmd_add(args) -> int:
    from .importers import check_input
    from .store import read_input

    for path in args.logs:  # every input checked before anything is added
        check_input(path)
    kb = _open(args)
    total = 0
    for path in args.logs:  # one input in memory at a time
        recs = read_input(path)
        n = kb.add(recs)
        total += n
        print(f"{path}: {n} new of {len(recs)} record(s)", flush=True)
    kb.close()
    print(f"knowledge base {kb.path}: added {total} record(s)"
          + (f" to {os.path.basename(kb.shard)}" if kb.shard else ""))
    return 0
