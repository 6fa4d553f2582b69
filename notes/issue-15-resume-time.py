import sys, time
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, sys.argv[1])
import release
from release.measure.records import load_records
from release.task import create_task
from release.tuners import RandomTuner
task = create_task("tiny.matmul.1", "llvm")
recs = load_records("/tmp/h15/big_main.jsonl")
t0 = time.perf_counter(); tu = RandomTuner(task, seed=0); n = tu.load_history(recs); t1 = time.perf_counter()
print(release.__file__, n, f"{t1 - t0:.2f} s resume")
