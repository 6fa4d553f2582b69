"""``release workloads``: the registered operator workloads (name, operator, GFLOP, shape), with
``--space`` also each knob space on a target.

:class:`WorkloadsConfig` -> :func:`run_workloads` (reports each row to a renderer as it is ready;
returns a :class:`WorkloadsResult`) -> :class:`WorkloadsPrinter` (the table's lines).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def add_parser(subparsers) -> None:
    """Add ``release workloads`` to the top-level CLI."""
    p = subparsers.add_parser("workloads", help="list registered workloads (name, shape, GFLOP)")
    p.add_argument("--space", action="store_true",
                   help="also build each knob space for --target and show design spaces, knobs and size (~1-5 s each)")
    p.add_argument("--target", default="llvm", help="target for --space")
    p.add_argument("--filter", default="", help="only workloads whose name contains this text")
    p.set_defaults(func=cmd_workloads)


@dataclass(frozen=True)
class WorkloadsConfig:
    """``release workloads``'s flags: ``filter`` (a substring of the names), ``space`` (also build each
    knob space) and ``target`` (the resolved ``tvm.target.Target`` of ``--target`` with ``--space``;
    None without it: the list needs no target)."""

    filter: str
    space: bool
    target: Any

    @classmethod
    def from_args(cls, args) -> "WorkloadsConfig":
        """From the parsed flags; the target is resolved once, and only with ``--space``.

        Raises
        ------
        TargetError
            A bad ``--target`` with ``--space``.
        """
        target = None
        if args.space:
            from ..target import resolve_target

            target = resolve_target(args.target)
        return cls(filter=args.filter, space=args.space, target=target)


@dataclass(frozen=True)
class WorkloadRow:
    """One workload: its registry entry (``name``, ``op``, ``description``), GFLOP (TVM's estimate on
    the TE program) and, with ``--space``, its knob space's design spaces, knobs and size (configs)."""

    workload: Any
    gflop: float
    spaces: int | None = None
    knobs: int | None = None
    size: float | None = None


@dataclass(frozen=True)
class WorkloadsResult:
    """The rows :func:`run_workloads` listed, in registry order."""

    rows: list


class WorkloadsRenderer:
    """Receives the rows of :func:`run_workloads` as they are ready; this base class shows nothing."""

    def begin(self, workloads: list, space: bool) -> None:
        """The workloads to be listed (registry entries), before any row is computed."""

    def row(self, row: WorkloadRow) -> None:
        """One row, computed."""


def run_workloads(config: WorkloadsConfig, renderer: WorkloadsRenderer | None = None) -> WorkloadsResult:
    """List the registered workloads whose name contains ``config.filter``, with their GFLOP and, with
    ``config.space``, their knob spaces on ``config.target`` (~1-5 s each); each row goes to
    ``renderer`` as soon as it is computed.

    Raises
    ------
    ReleaseError
        A knob space that cannot be built on the target.
    """
    from ..workloads import list_workloads

    renderer = renderer or WorkloadsRenderer()
    chosen = [w for w in list_workloads() if config.filter in w.name]
    renderer.begin(chosen, config.space)
    rows = []
    for w in chosen:
        row = WorkloadRow(w, gflop(w))
        if config.space:
            from ..task import create_task

            sp = create_task(w.name, config.target).config_space
            row = WorkloadRow(w, row.gflop, len(sp.spaces), sp.n_knobs, sp.size)
        renderer.row(row)
        rows.append(row)
    return WorkloadsResult(rows)


def gflop(w) -> float:
    """GFLOP of a registered workload, from TVM's estimator on the TE program (no target needed)."""
    import tvm
    from tvm import te
    from tvm.s_tir.analysis import estimate_tir_flops

    f = te.create_prim_func(w.build_te())
    return float(estimate_tir_flops(tvm.IRModule({"main": f}))) / 1e9


class WorkloadsPrinter(WorkloadsRenderer):
    """``release workloads``'s table: a header, then one line per workload as soon as it is ready."""

    def begin(self, workloads: list, space: bool) -> None:
        self.space = space
        self.width = max([len(w.name) for w in workloads] + [4])
        self.opw = max([len(w.op) for w in workloads] + [7])
        head = f"{'name':<{self.width}}  {'op':<{self.opw}} {'GFLOP':>8}  {'shape':<32}"
        print(head + ("  spaces knobs       size" if space else ""))

    def row(self, row: WorkloadRow) -> None:
        w = row.workload
        line = f"{w.name:<{self.width}}  {w.op:<{self.opw}} {row.gflop:8.3f}  {w.description:<32}"
        if self.space:
            line += f"  {row.spaces:>6} {row.knobs:>5} {row.size:>10.3g}"
        print(line, flush=True)


def cmd_workloads(args) -> int:
    """``release workloads``: :class:`WorkloadsConfig` -> :func:`run_workloads` -> :class:`WorkloadsPrinter`."""
    run_workloads(WorkloadsConfig.from_args(args), WorkloadsPrinter())
    return 0
