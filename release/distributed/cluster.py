"""What the Ray coordinator and its actors share: joining a cluster, the measurement option a worker
makes, the log shards and their idempotent merge into the main log.

Ray is imported only in :mod:`release.distributed`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
from typing import Sequence

from ..errors import ReleaseError


class ClusterError(ReleaseError):
    """A Ray cluster that cannot be used (no answer at the address, Ray not installed, ...)."""


def make_measure_option(measure_args: dict | None, cpus: int = 1) -> dict:
    """Builder and runner from ``measure_args`` (made inside a Ray worker, or to check up front):
    :meth:`release.measure.MeasureConfig.make_option` with the builder's ``n_parallel`` defaulting
    to ``cpus`` (the Ray task's CPUs); an RPC runner's ``n_parallel`` defaults to the key's free
    devices.

    Raises
    ------
    TunerError
        Unknown keys or bad values.
    """
    from ..measure.config import MeasureConfig

    return MeasureConfig.from_dict(measure_args).make_option(cpus=cpus)


def shard_path(log: str, task) -> str:
    """``<log>.shards/<task name>.<hash>.jsonl``: the log shard of ``task``."""
    name, _, digest = task.key.rpartition("/")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80]
    return os.path.join(f"{log}.shards", f"{safe}.{digest}.jsonl")


def _read_lines(path: str) -> list[str]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return [l.rstrip("\n") for l in f if l.strip()]


def _ident(line: str):
    try:
        d = json.loads(line)
        return d["task"], tuple(int(x) for x in d["config"])
    except (ValueError, KeyError, TypeError):
        return None


def merge_lines(log: str, lines: Sequence[str]) -> int:
    """Append to ``log`` the record lines whose ``(task, config)`` it does not hold yet.

    Idempotent: merging the same shard twice adds nothing. Unreadable lines are skipped.

    Returns
    -------
    int
        Records appended.
    """
    have = {i for i in map(_ident, _read_lines(log)) if i is not None}
    new = []
    for line in lines:
        i = _ident(line)
        if i is not None and i not in have:
            have.add(i)
            new.append(line)
    if new:
        os.makedirs(os.path.dirname(os.path.abspath(log)), exist_ok=True)
        with open(log, "a", encoding="utf-8") as f:
            f.write("".join(l + "\n" for l in new))
            f.flush()
            os.fsync(f.fileno())
    return len(new)


def merge_shards(log: str) -> int:
    """Merge every shard under ``<log>.shards/`` into ``log``; returns records appended."""
    folder = f"{log}.shards"
    if not os.path.isdir(folder):
        return 0
    n = 0
    for name in sorted(os.listdir(folder)):
        if name.endswith(".jsonl"):
            n += merge_lines(log, _read_lines(os.path.join(folder, name)))
    return n


def connect(address: str | None = "local", num_cpus: int | None = None, timeout: float = 10.0) -> bool:
    """Connect to (or start) a Ray cluster; returns True if this call started/connected Ray.

    Parameters
    ----------
    address : str
        ``"local"`` (a new cluster on this machine with ``num_cpus`` CPUs), ``"auto"`` (the cluster
        started on this machine by ``ray start``), ``"HOST:PORT"`` (a cluster's GCS address) or
        ``"ray://HOST:PORT"`` (Ray client). If Ray is already initialized it is used as is.
    timeout : float
        Seconds to wait for ``HOST:PORT`` to accept a connection.

    Raises
    ------
    ClusterError
        Ray missing, nothing answers at the address within ``timeout`` s, or Ray fails to connect.
    """
    try:
        import ray
    except ImportError:
        raise ClusterError("--ray needs Ray: pip install 'release[ray]'") from None
    if ray.is_initialized():
        return False
    address = address or "local"
    kwargs = dict(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    if address == "local":
        ray.init(num_cpus=num_cpus, **kwargs)
        return True
    if address != "auto":
        hostport = address.split("://", 1)[-1]
        host, _, port = hostport.rpartition(":")
        if not port.isdigit() or not host:
            raise ClusterError(f"bad Ray address {address!r}: give HOST:PORT (e.g. 10.0.0.5:6379), 'auto' or 'local'")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                pass
        except OSError as err:
            raise ClusterError(
                f"no Ray cluster answers at {address} ({err.strerror or err}) within {timeout:g} s; start one with "
                f"`ray start --head --port {port}` or use --ray local"
            ) from None
    try:
        if address.startswith("ray://"):
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        else:
            ray.init(address=address, **kwargs)
    except Exception as err:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ...
        msg = [l.strip() for l in str(err).splitlines() if l.strip()]
        raise ClusterError(f"cannot join the Ray cluster at {address}: {msg[0][:300] if msg else err!r}") from None
    return True
