"""Cost of sending a BRKGAJob (REGAL training's BRKGA runner, no module globals) with each chunk.

Run: PYTHONPATH=<worktree> nice -n 19 .venv/bin/python notes/issue-15-brkga-job-pickle.py
Prints, three times: pickled size and time, unpickle time, time to build one graph's
PerformanceModel in the receiving job; then one BRKGA run (budget 2000) for scale.
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
