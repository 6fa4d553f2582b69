"""The model benchmark tier: the ratio table on hand-made curves, its budget
flags, and the `model-smoke` tier end to end (real tuning, real compiles, real timings)."""

import json
import math
import os
import subprocess
import sys

import pytest

from release.bench import model_tier as BM
from release.bench.config import MS, ModelBenchConfig, parse_trials, split_tuner
from release.bench.metrics import checkpoint_trials, ratio_table, time_to_reach
from release.errors import TunerError


def pts(*pairs):
    return [{"trials": 10 * (i + 1), "wall_s": w, "latency_ms": l} for i, (w, l) in enumerate(pairs)]


def test_time_to_reach_the_others_final_latency():
    fast = pts((10, 5.0), (20, 3.0), (30, 2.0))  # final 2.0 ms after 30 s
    slow = pts((40, 6.0), (80, 3.0), (120, 2.5))  # final 2.5 ms after 120 s
    r = ratio_table({"a": fast, "b": slow})
    assert r["a"]["b"]["reach_s"] == 30.0  # the first checkpoint at or below 2.5 ms
    assert r["a"]["b"]["speedup"] == pytest.approx(120 / 30)
    assert r["b"]["a"]["reached"] is False and math.isnan(r["b"]["a"]["speedup"])  # never at 2.0 ms
    assert time_to_reach(fast, 3.0) == 20.0  # "at or below": equal counts


def test_checkpoints_are_fractions_of_the_budget():
    assert checkpoint_trials(2000, 4) == [500, 1000, 1500, 2000]
    assert checkpoint_trials(3, 4) == [1, 2, 3]  # distinct, the last the budget


def test_budget_flags_per_model_and_bad_values():
    cfg = ModelBenchConfig.from_tier("model", n_trial={"resnet18": 3000}, models=["resnet18", "bert-base-layer"])
    assert cfg.n_trial == {"resnet18": 3000, "bert-base-layer": 1000}
    assert ModelBenchConfig.from_tier("model", n_trial=64).n_trial["mobilenet_v2"] == 64
    assert parse_trials("resnet18=10,tiny-cnn=4") == {"resnet18": 10, "tiny-cnn": 4}
    with pytest.raises(TunerError, match="'ten'"):
        parse_trials("ten")
    with pytest.raises(TunerError, match="resnet19"):
        ModelBenchConfig.from_tier("model", models=["resnet19"])
    with pytest.raises(TunerError, match="tensorrt"):
        ModelBenchConfig.from_tier("model", references=["tensorrt"])
    with pytest.raises(TunerError, match="'nope'"):
        ModelBenchConfig.from_tier("model", tuners=["nope"])


def test_the_model_tier_tunes_nchwc_and_keeps_its_logs_apart():
    """The model tier compares tuners on the space that beats PyTorch (NCHWc); logs of another
    layout never resume an NCHW run's."""
    cfg = ModelBenchConfig.from_tier("model")
    assert cfg.layout == "NCHWc" and ModelBenchConfig.from_tier("model-smoke").layout == "NCHW"
    assert BM.log_path(cfg, "resnet18", "xgb", 0).endswith("resnet18.xgb.s0.NCHWc.jsonl")
    assert BM.log_path(cfg, "resnet18", MS, 0).endswith("resnet18.ms.s0.NCHWc")
    nchw = ModelBenchConfig.from_tier("model", layout="NCHW")
    assert BM.log_path(nchw, "resnet18", "xgb", 0).endswith("resnet18.xgb.s0.jsonl")
    from release.errors import ModelError

    with pytest.raises((TunerError, ModelError), match="NHCW"):
        ModelBenchConfig.from_tier("model", layout="NHCW")


@pytest.mark.slow
def test_model_smoke_tier_nchwc_with_metaschedule_on_the_same_converted_model(tmp_path):
    """`--layout NCHWc`: our tuner and MetaSchedule tune the blocked model, both compile and match the
    reference (MetaSchedule's database holds the blocked conv2d workloads)."""
    res = smoke(tmp_path / "nchwc", "--layout", "NCHWc")
    m = res["models"]["tiny-cnn"]
    assert res["config"]["layout"] == "NCHWc"
    for run in ("random|0", "ms|0"):
        assert m["runs"][run] and all(p["max_abs_err"] < 1e-3 for p in m["runs"][run]), run
    from release.measure import load_records

    names = {r.name for r in load_records(str(tmp_path / "nchwc" / "logs" / "tiny-cnn.random.s0.NCHWc.jsonl"))}
    assert any("conv2d_NCHWc" in n for n in names), names  # the blocked tasks were tuned
    assert os.path.isdir(tmp_path / "nchwc" / "logs" / "tiny-cnn.ms.s0.NCHWc")


def test_wall_clock_sidecar_continues_across_a_resume(tmp_path):
    path = str(tmp_path / "x.jsonl.wall.jsonl")
    w = BM.WallClock(path, trials=0)
    w.on_result(None, [1, 2], [1, 2])
    first = BM._read_jsonl(path)[-1]
    w2 = BM.WallClock(path, trials=2)  # a resumed run: counts and clock continue
    w2.on_result(None, [1], [1])
    last = BM._read_jsonl(path)[-1]
    assert first["trials"] == 2 and last["trials"] == 3
    assert last["elapsed_s"] >= first["elapsed_s"]
    assert BM._wall_at(BM._read_jsonl(path), 3) == last["elapsed_s"]


def smoke(out, *extra):
    cmd = [sys.executable, "-m", "release.cli", "bench", "--tier", "model-smoke", "--out", str(out),
           "--n-trial", "8", "--no-progress", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return json.load(open(out / "results.json"))


# slow: two benchmark processes, ~37 s; the quick tests above cover the tier's parts
@pytest.mark.slow
def test_model_smoke_tier_end_to_end(tmp_path):
    """`release bench --tier model-smoke --tuners random`: tiny-cnn tuned, compiled and timed at 2
    checkpoints, references timed; a second invocation resumes everything (no new measurement, the
    cached checkpoints) and reports the same curve."""
    out = tmp_path / "smoke"
    res = smoke(out, "--tuners", "random")
    m = res["models"]["tiny-cnn"]
    assert m["tasks"] >= 2 and res["threads"] == res["machine"]["cores"]
    curve = m["runs"]["random|0"]
    assert [p["trials"] for p in curve] == [4, 8], curve
    # each checkpoint's latency is the fastest of its timed runs, so at most their median (a value that
    # could be wrong: a mean or a median reported as the fastest), and the compiled model is right
    assert all(0 < p["latency_ms"] <= p["median_ms"] and p["max_abs_err"] < 1e-3 and p["threads"] == res["threads"]
               for p in curve), curve
    assert 0 < curve[0]["wall_s"] <= curve[1]["wall_s"]
    assert len(open(out / "logs" / "tiny-cnn.random.s0.jsonl").readlines()) == 8
    refs = m["references"]
    assert 0 < refs["eager"]["latency_ms"] <= refs["eager"]["median_ms"]
    # whether a reference's timing is reliable depends on the machine's load: either way, a flagged one says why
    assert refs["eager"]["reliable"] is True or (refs["eager"]["reliable"] is False and refs["eager"]["note"])
    assert "latency_ms" in refs["onnxruntime"] or "onnxruntime" in refs["onnxruntime"]["error"]
    assert 0 < refs["untuned"]["latency_ms"] <= refs["untuned"]["median_ms"]
    table = open(out / "table.md").read()
    assert "release bench --tier model-smoke --out" in table and "## tiny-cnn" in table
    assert open(out / "curves.png", "rb").read(8) == b"\x89PNG\r\n\x1a\n"  # a PNG, not any non-empty file
    res2 = smoke(out, "--tuners", "random")  # resume: nothing measured again, checkpoints from checkpoints.json
    assert len(open(out / "logs" / "tiny-cnn.random.s0.jsonl").readlines()) == 8
    assert res2["models"]["tiny-cnn"]["runs"] == m["runs"]


@pytest.mark.slow
def test_model_smoke_tier_with_metaschedule(tmp_path):
    """The whole smoke tier (random and MetaSchedule's tune_relax, minutes on a busy 2-core
    machine: MetaSchedule's first batch alone took 60-130 s here): MetaSchedule's curve from its
    database's first records, its last point the run's end, and the ratio table over both."""
    res = smoke(tmp_path / "smoke")
    m = res["models"]["tiny-cnn"]
    ms = m["runs"]["ms|0"]
    assert len(ms) == 2 and all(p["max_abs_err"] < 1e-3 for p in ms), ms
    assert 1 <= ms[0]["trials"] <= ms[-1]["trials"], ms  # the database's first records, then the run's end
    assert ms[-1]["trials"] >= 8  # the end of the run (its last batch may overshoot)
    assert ms[0]["wall_s"] <= ms[-1]["wall_s"]
    assert m["ratios"]["random"]["ms"]["b_wall_s"] == ms[-1]["wall_s"]
    assert m["ratios"]["ms"]["random"]["b_wall_s"] == m["runs"]["random|0"][-1]["wall_s"]
    joins = BM._read_jsonl(str(tmp_path / "smoke" / "logs" / "tiny-cnn.ms.s0" / "trials.jsonl"))
    # each joined batch says when it was measured, never after the join; the curve's last point is the
    # moment the run's last batch was measured
    assert joins and all(0 < j["measured_s"] <= j["elapsed_s"] for j in joins), joins
    assert ms[-1]["wall_s"] == max(j["measured_s"] for j in joins)


def test_operator_options_on_a_model_tier_get_one_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "release.cli", "bench", "--tier", "model-smoke", "--workloads",
                        "tiny.matmul.1", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].startswith("release: error: --workloads")
    p = subprocess.run([sys.executable, "-m", "release.cli", "bench", "--tier", "smoke", "--models", "resnet18",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "--models" in p.stderr.strip().splitlines()[-1]


def test_warm_runs_need_a_model_based_tuner_and_a_knowledge_base(tmp_path):
    """`TUNER:warm` (the whole-model warm row): named apart in the logs, refused without a base, for a
    tuner without a cost model, and a base that no run reads is refused too (it would be silently unused)."""
    kb = tmp_path / "kb"
    kb.mkdir()
    cfg = ModelBenchConfig.from_tier("model", tuners=["release+", "release+:warm"], knowledge=str(kb))
    assert split_tuner("release+:warm") == ("release+", True) and split_tuner("xgb") == ("xgb", False)
    assert BM.log_path(cfg, "resnet18", "release+:warm", 0).endswith("resnet18.release+-warm.s0.NCHWc.jsonl")
    with pytest.raises(TunerError, match="give --knowledge DIR"):
        ModelBenchConfig.from_tier("model", tuners=["release+:warm"])
    with pytest.raises(TunerError, match="give --knowledge DIR"):
        ModelBenchConfig.from_tier("model", tuners=["release+:warm"], knowledge=str(tmp_path / "missing"))
    with pytest.raises(TunerError, match="only model-based tuners"):
        ModelBenchConfig.from_tier("model", tuners=["random:warm"], knowledge=str(kb))
    with pytest.raises(TunerError, match="read only by warm runs"):
        ModelBenchConfig.from_tier("model", tuners=["xgb"], knowledge=str(kb))


@pytest.mark.slow
def test_model_smoke_tier_warm_run_starts_from_its_copy_of_the_base(tmp_path):
    """tiny-cnn tuned cold, its log made a knowledge base, then `--tuners xgb xgb:warm --knowledge KB`: the
    cold run resumes (nothing new), the warm run measures seeds from the base first (here the cold run's
    own best configs of each task) on its own copy of the base, and the ratio table compares the two."""
    from release.measure import load_records

    out = tmp_path / "smoke"
    smoke(out, "--tuners", "xgb", "--references", "eager")
    cold_log = out / "logs" / "tiny-cnn.xgb.s0.jsonl"
    kb = tmp_path / "kb"
    p = subprocess.run([sys.executable, "-m", "release.cli", "knowledge", "add", str(cold_log), "--dir", str(kb)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    n_base = len(os.listdir(kb))
    res = smoke(out, "--tuners", "xgb", "xgb:warm", "--references", "eager", "--knowledge", str(kb))
    cold, warm = load_records(str(cold_log)), load_records(str(out / "logs" / "tiny-cnn.xgb-warm.s0.jsonl"))
    assert len(cold) == 8 and len(warm) == 8
    for key in {r.task for r in warm}:
        mine = [tuple(r.config) for r in warm if r.task == key]
        best = max((r for r in cold if r.task == key and r.ok), key=lambda r: r.gflops)
        assert mine[0] == tuple(best.config)  # the best seed (this task's own best record) first
    assert len(os.listdir(kb)) == n_base  # the warm run wrote to its copy, not to the base
    assert (out / "kb-runs" / "tiny-cnn.xgb-warm.s0").is_dir()
    ratios = res["models"]["tiny-cnn"]["ratios"]
    assert "xgb" in ratios["xgb:warm"] and "xgb:warm" in ratios["xgb"]
