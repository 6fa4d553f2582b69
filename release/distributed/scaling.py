"""Wall time of tuning a model's tasks on a local Ray cluster with 1, 2, ... worker CPUs, in one run.

``python -m release.distributed.scaling --model tiny-cnn --n-trial 16 --workers 1,2,2,1``

Each entry of ``--workers`` is one fresh run (new log, new local cluster with that many CPUs,
``ray.init(num_cpus=N)``); the wall time includes starting Ray and the workers' imports. Repeat
entries (1,2,2,1) to see the noise. Prints one JSON line per run, then the ratio of mean wall times.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time


def main(argv=None) -> int:
    from release import relax as M
    from release.distributed.ray_tune import tune_model_ray

    p = argparse.ArgumentParser(prog="python -m release.distributed.scaling", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="tiny-cnn")
    p.add_argument("--n-trial", type=int, default=16)
    p.add_argument("--workers", default="1,2")
    p.add_argument("--tuner", default="random")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    model = M.load_model(args.model)
    tasks = M.extract_tasks(model, "llvm")
    walls: dict[int, list[float]] = {}
    work = tempfile.mkdtemp(prefix="release-scaling-")
    for i, n in enumerate(int(x) for x in args.workers.split(",")):
        log = os.path.join(work, f"run{i}-{n}.jsonl")
        t0 = time.time()
        res = tune_model_ray(tasks, args.n_trial, log, tuner=args.tuner, progress=False, num_cpus=n,
                             measure_args=dict(number=1, repeat=1, min_repeat_ms=0))
        wall = time.time() - t0
        walls.setdefault(n, []).append(wall)
        print(json.dumps(dict(workers=n, wall_s=round(wall, 1), tasks=len(tasks),
                              task_wall_s=[round(s.wall_s, 1) for s in res.tuners.values()],
                              trials=[s.trials for s in res.tuners.values()])), flush=True)
    mean = {n: sum(w) / len(w) for n, w in walls.items()}
    if 1 in mean:
        for n in sorted(mean):
            print(f"workers {n}: mean wall {mean[n]:.1f} s over {len(walls[n])} run(s), "
                  f"speed-up vs 1 worker {mean[1] / mean[n]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
