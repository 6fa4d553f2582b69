"""Time exported tuned models (``release tune-model``'s ``<log>.so``) and PyTorch eager side by side.

5 interleaved rounds; per round each library's fastest of 5 means of 10 runs (``release.relax.evaluate``,
output checked against PyTorch in the first round) and PyTorch eager (``release.relax.torch_reference``),
all on 2 threads in this process; prints the fastest and the median over rounds (ms) as JSON.
With ``RELEASE_TIMING_PRIORITY=realtime`` everything is timed at real-time priority
(``release.threads.timing_priority``), for a machine shared with other work.

Usage: RELEASE_TIMING_PRIORITY=realtime .venv/bin/python benchmarks/layout/time_models.py MODEL LIB.so [LIB.so ...]
"""
import json
import sys

import numpy as np
import tvm

from release import relax as M
from release.threads import timing_priority, use_threads

prio = timing_priority()
use_threads(2, torch_too=True)
m = M.load_model(sys.argv[1])
libs = sys.argv[2:]
exes = {p: tvm.runtime.load_module(p) for p in libs}
res = {p: [] for p in libs}
res["torch"] = []
for r in range(5):
    for p, ex in exes.items():
        e = M.evaluate(m, ex, number=10, repeat=5, check=(r == 0), threads=2)
        res[p].append(e["fastest_ms"])
    res["torch"].append(M.torch_reference(m, threads=2).seconds * 1e3)
print(json.dumps({"priority": prio, "fastest_ms": {k: float(np.min(v)) for k, v in res.items()},
                  "median_ms": {k: float(np.median(v)) for k, v in res.items()}}, indent=1))
