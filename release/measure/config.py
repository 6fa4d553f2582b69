"""``MeasureConfig``: one set of measurement settings and defaults for the CLI, benchmarks and Ray.

The CLI's flags (``--runner --rpc-key --rpc-host --rpc-port --n-parallel --number --repeat
--min-repeat-ms --timeout --build-timeout --early-termination``), the benchmark configuration and the Ray workers'
``measure_args`` are all this dataclass; :meth:`MeasureConfig.make_option` builds the builder and
runner from it. Validation happens once, in :meth:`MeasureConfig.check`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from ..errors import TunerError


@dataclass
class MeasureConfig:
    """How to measure (AutoTVM's ``LocalBuilder`` / ``LocalRunner`` settings, plus RPC)."""

    runner: str = "local"
    """``"local"`` (this machine) or ``"rpc"`` (devices behind a TVM RPC tracker)."""
    rpc_key: str | None = None
    """Device key at the tracker (``runner="rpc"``)."""
    rpc_host: str = "127.0.0.1"
    """Tracker host."""
    rpc_port: int = 9190
    """Tracker port."""
    n_parallel: int | None = None
    """Build workers (None: usable cores, or the caller's CPU share on a Ray worker)."""
    number: int = 4
    """Runs averaged into one cost."""
    repeat: int = 3
    """Costs per config."""
    min_repeat_ms: int = 50
    """``number`` is raised until one cost takes this long (ms)."""
    timeout: float = 10.0
    """Seconds per run."""
    build_timeout: float = 30.0
    """Seconds per build."""
    session_timeout: float = 60.0
    """Seconds one RPC session may take (upload + runs)."""
    early_termination: float = 2.0
    """AdaTune-style early termination: a candidate whose first repeat costs over this many times
    the task's best mean so far gets no further repeats (0: off; the RPC runner applies the best
    known when a batch starts).
    On by default at 2 because replaying the cut on the committed logs
    (``benchmarks/early_termination_fidelity.py``, ``benchmarks/results/early_termination/``: 112 logs, 34,535
    records) lost no best and changed no final best, at Kendall tau >= 0.94 against the full
    means, while skipping 34% of the repeats. ``LocalRunner`` itself defaults to 0 (AutoTVM's)."""
    cache_flush: bool = False
    """AutoTVM's ``enable_cpu_cache_flush``: before every repeat TVM flushes the CPU caches of every
    argument but the first (``cache_flush_cpu_non_first_arg``: the weights), so a kernel is timed as it
    runs between its neighbours in a model rather than hot from its own previous run. Off by default
    (AutoTVM's); costs taken with and without it do not compare, so keep one setting per log."""

    @classmethod
    def from_dict(cls, d: dict | None) -> "MeasureConfig":
        """From a dict of field values (Ray's ``measure_args``); unknown keys raise :class:`TunerError`."""
        d = dict(d or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise TunerError(f"unknown measure_args {unknown}; known: {sorted(known)}")
        return cls(**d).check()

    @classmethod
    def from_args(cls, args) -> "MeasureConfig":
        """From parsed CLI arguments (missing attributes keep the defaults)."""
        return cls(**{f.name: getattr(args, f.name, f.default) for f in fields(cls)}).check()

    def to_dict(self) -> dict:
        """Plain dict (what travels to a Ray worker)."""
        return asdict(self)

    def check(self) -> "MeasureConfig":
        """Validate every field once; raise :class:`TunerError` naming the bad one and the fix."""
        if self.runner not in ("local", "rpc"):
            raise TunerError(f"runner {self.runner!r} must be 'local' or 'rpc'")
        if self.runner == "rpc" and not self.rpc_key:
            raise TunerError("--runner rpc needs --rpc-key KEY (the device key registered at the tracker)")
        if self.n_parallel is not None and self.n_parallel < 1:
            raise TunerError(f"builder n_parallel={self.n_parallel} must be at least 1")
        if self.number < 1 or self.repeat < 1:
            raise TunerError(f"runner number={self.number} and repeat={self.repeat} must be at least 1")
        if self.min_repeat_ms < 0:
            raise TunerError(f"runner min_repeat_ms={self.min_repeat_ms} must be >= 0")
        from .runner import check_early_termination

        check_early_termination(self.early_termination)
        for name in ("timeout", "build_timeout", "session_timeout"):
            if not getattr(self, name) > 0:
                raise TunerError(f"{name}={getattr(self, name)} must be positive (seconds)")
        return self

    def make_option(self, cpus: int | None = None) -> dict:
        """``measure_option(builder, runner)`` from these settings.

        Parameters
        ----------
        cpus : int, optional
            Default build workers when :attr:`n_parallel` is None (a Ray task's CPUs; None: the
            machine's usable cores).

        Raises
        ------
        TunerError
            Bad settings (see :meth:`check`).
        MeasureError
            ``runner="rpc"`` and no tracker or no device for the key.
        """
        from .builder import LocalBuilder
        from .measurer import measure_option
        from .runner import LocalRunner, make_rpc_runner

        self.check()
        builder = LocalBuilder(n_parallel=self.n_parallel or cpus, timeout=self.build_timeout)
        common = dict(number=self.number, repeat=self.repeat, min_repeat_ms=self.min_repeat_ms, timeout=self.timeout,
                      enable_cpu_cache_flush=self.cache_flush)
        if self.runner == "rpc":
            # n_parallel = the key's free devices; runs whose device died are re-run on the others
            runner = make_rpc_runner(self.rpc_key, self.rpc_host, self.rpc_port,
                                     session_timeout=self.session_timeout,
                                     early_termination=self.early_termination, **common)
        else:
            runner = LocalRunner(early_termination=self.early_termination, **common)
        return measure_option(builder, runner)
