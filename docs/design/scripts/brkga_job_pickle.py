"""Cost of sending REGAL training's BRKGA job with each chunk of work to the worker processes.

``release.graph.train.BRKGAJob`` carries the training graphs (as dicts) and the performance model's arguments
instead of module globals set by a pool initializer, so every chunk a worker receives pickles the job. This
prints, three times: the pickled size and time, the unpickle time, and the time to build one graph's
``PerformanceModel`` in the receiving job; then one BRKGA run (budget 2000) for scale. Measured 2026-12-01 on
a loaded 2-core Xeon: 73,208 bytes, 0.5-1.0 ms to pickle, 0.9-1.4 ms to unpickle, 345-360 ms per BRKGA run,
so about 1% or less of the runs a chunk carries (docs/design/regal.md).

Run from the repository root: ``nice -n 19 .venv/bin/python docs/design/scripts/brkga_job_pickle.py``
"""

import pickle
import time

from release.graph.synthetic import SyntheticConfig, random_layered_graph
from release.graph.train import BRKGAJob

graphs = [random_layered_graph(SyntheticConfig(n_nodes=40), s) for s in range(32)]  # `release regal train` defaults
job = BRKGAJob([g.to_dict() for g in graphs], dict(objective="runtime", devices=2))
for _ in range(3):
    t = time.perf_counter()
    blob = pickle.dumps(job)
    t_pickle = time.perf_counter() - t
    t = time.perf_counter()
    other = pickle.loads(blob)
    t_unpickle = time.perf_counter() - t
    t = time.perf_counter()
    other.model(0)
    t_model = time.perf_counter() - t
    print(f"pickle {len(blob)} bytes {t_pickle * 1e3:.2f} ms; unpickle {t_unpickle * 1e3:.2f} ms; "
          f"one model {t_model * 1e3:.2f} ms")
t = time.perf_counter()
job((0, 2000, 1, None))
print(f"one BRKGA run (budget 2000): {(time.perf_counter() - t) * 1e3:.0f} ms")
