"""The base class of the benchmark tiers: the steps every tier has and the parts they share.

A tier's life cycle (what ``release bench --tier NAME`` does):

1. ``Tier(cfg)``: a :class:`release.bench.config.BenchConfig` (operator tiers) or
   :class:`release.bench.config.ModelBenchConfig` (model tiers), checked by its ``from_tier``;
2. :meth:`Tier.run`: every run of the tier, each resumable from its log (:meth:`Tier.log_path`): runs
   already at their budget are skipped, a killed benchmark continues where it stopped;
3. :meth:`Tier.report`: the logs (and what the tier times beside them) made into one result dict,
   written by :meth:`Tier.write` as ``results.json``, ``table.md`` (:meth:`Tier.markdown`) and plots
   (:meth:`Tier.plot`) under ``cfg.out``;
4. :meth:`Tier.markdown` (the table the CLI prints) and :meth:`Tier.plot` read the result dict only,
   so a committed ``results.json`` renders again without the logs.

Implemented once here: the result's head (config, command, machine: :meth:`Tier.result_head`), the
table's head (title, command echo, machine line: :meth:`Tier.header`), the threads and provenance
lines (:mod:`release.bench.reporting`), the builder and runner of the runs (:meth:`Tier.measure_option`)
and the writing of the results.
"""

from __future__ import annotations

from dataclasses import asdict

from .reporting import machine, machine_line, provenance_line, threads_line, write_results


class Tier:
    """One benchmark tier over a configuration ``cfg``; subclasses implement :meth:`run`,
    :meth:`report`, :meth:`markdown` and :meth:`plot`.

    Parameters
    ----------
    cfg : BenchConfig or ModelBenchConfig
        What the tier runs (its ``out``, ``log_path``, measurement settings).
    """

    #: the table's title after ``# Benchmark `<tier>```
    title_suffix = ""
    #: ``(label, package)`` pairs whose versions the table's machine line names
    libraries = (("TVM", "apache-tvm"),)

    def __init__(self, cfg):
        self.cfg = cfg

    # ------------------------------------------------------------------ the steps of every tier
    def run(self, progress: bool = True) -> None:
        """Run (or resume) every run of the tier; ``progress``: a progress bar per run."""
        raise NotImplementedError

    def report(self, command: str = "", **options) -> dict:
        """The result dict of the tier's logs (``command``: the command line echoed in the table);
        writes it with :meth:`write` and returns it."""
        raise NotImplementedError

    @classmethod
    def markdown(cls, result: dict) -> str:
        """The result as Markdown (the CLI prints it; ``table.md``)."""
        raise NotImplementedError

    @classmethod
    def plot(cls, result: dict, out: str) -> None:
        """The result's plots, written under the folder ``out``."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared parts
    def log_path(self, name: str, tuner: str, seed: int) -> str:
        """The log of one run (``cfg.log_path``): a workload's or a model's, per tuner and seed."""
        return self.cfg.log_path(name, tuner, seed)

    def measure_option(self) -> dict:
        """The builder and runner the runs use: the measurement defaults of
        :class:`release.measure.MeasureConfig` with the tier's ``n_parallel``, ``number``, ``repeat``
        and ``min_repeat_ms``. The caller closes both."""
        from ..measure.config import MeasureConfig

        cfg = self.cfg
        return MeasureConfig(n_parallel=cfg.n_parallel, number=cfg.number, repeat=cfg.repeat,
                             min_repeat_ms=cfg.min_repeat_ms).make_option()

    def result_head(self, command: str = "") -> dict:
        """The first keys of every result: ``config`` (the configuration as JSON), ``command`` and
        ``machine`` (:func:`release.bench.reporting.machine`)."""
        return {"config": asdict(self.cfg), "command": command, "machine": machine()}

    def write(self, result: dict) -> None:
        """``results.json``, ``table.md`` and the plots of ``result`` under ``cfg.out``
        (:func:`release.bench.reporting.write_results`)."""
        write_results(self.cfg.out, result, self.markdown, self.plot)

    @classmethod
    def header(cls, result: dict) -> list[str]:
        """The table's first lines: title, the command echoed, the machine line (with the versions of
        :attr:`libraries`)."""
        return [f"# Benchmark `{result['config']['tier']}`{cls.title_suffix}", "",
                f"Command: `{result['command']}`  ", machine_line(result["machine"], cls.libraries)]

    threads_line = staticmethod(threads_line)
    provenance_line = staticmethod(provenance_line)
