"""Count whole-log reads and record parses: Tuner.tune resuming a 20,000-record log, and a
20-chunk tune_model over it (run against whichever release/ is first on sys.path)."""
import sys, time, os
mode = sys.argv[1]
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, mode)
sys.path.insert(0, "/work/main/tests/tuners")
import release
from release.measure import records
from release.measure.records import Record
from release.task import create_task
from release.tuners import RandomTuner
from release.measure import LocalBuilder, LocalRunner, measure_option
task = create_task("tiny.matmul.1", "llvm")
sp = task.config_space
N = 20000
def big(path):
    configs, seen, i = [], set(), 0
    while len(configs) < N:
        c = sp.canonical(sp.get(i)); i += 1
        if c not in seen:
            seen.add(c); configs.append(c)
    with open(path, "w") as f:
        for k, c in enumerate(configs):
            f.write(Record(task=task.key, name=task.name, target=task.target_json, config=list(c), costs=[1e-4 + 1e-9 * k],
                           tuner="random", flop=task.flop).to_json() + "\n")
cnt = {"reads": 0, "parses": 0}
load, parse = records.load_records, Record.from_json.__func__
def cl(*a, **k):
    cnt["reads"] += 1; return load(*a, **k)
def cp(cls, line):
    cnt["parses"] += 1; return parse(cls, line)
records.load_records = cl
Record.from_json = classmethod(cp)
opt = measure_option(LocalBuilder(n_parallel=2, timeout=60), LocalRunner(number=1, repeat=1, min_repeat_ms=0, cooldown_interval=0.0))
os.makedirs("/tmp/h15", exist_ok=True)
log = f"/tmp/h15/big_{os.path.basename(mode)}.jsonl"  # big_main.jsonl for /work/main
big(log)
t0 = time.time()
tu = RandomTuner(task, seed=0)
tu.tune(N + 2, opt, callbacks=[records.log_to_file(log)])
print(f"{release.__file__}: tune resume: reads {cnt['reads']}, parses {cnt['parses']}, {time.time() - t0:.1f} s, trials {tu.trials}")
big(log)
cnt.update(reads=0, parses=0)
from release.model import tune_model
t0 = time.time()
res = tune_model([task], N + 20, log, tuner="random", scheduler="round-robin", measure_option=opt, chunk=1, progress=False)
print(f"{release.__file__}: tune_model 20 chunks: reads {cnt['reads']}, parses {cnt['parses']}, {time.time() - t0:.1f} s, trials {res.tuners[task.key].trials}")
opt["builder"].close(); opt["runner"].close()
