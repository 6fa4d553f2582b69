"""``benchmarks/repeat_policy.py``: the paired-timing benchmark behind the repeat policy."""

import importlib.util
import os

import pytest

PATH = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "benchmarks", "repeat_policy.py")


def _module():
    spec = importlib.util.spec_from_file_location("repeat_policy", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fidelity_scores_a_ranking_against_the_reference():
    rp = _module()
    ref = [float(i + 1) for i in range(20)]  # config 0 is the fastest
    same = rp.fidelity(list(ref), ref)
    assert same["kendall_tau"] == pytest.approx(1.0) and same["regret"] == 1.0 and same["top5_overlap"] == 1.0
    swapped = list(ref)
    swapped[0], swapped[3] = swapped[3], swapped[0]  # the policy calls config 3 the fastest
    got = rp.fidelity(swapped, ref)
    assert got["regret"] == pytest.approx(4.0)  # reference cost of its pick / the reference's fastest
    assert got["kendall_tau"] < 1.0 and got["tau_top16"] < 1.0 and got["top5_overlap"] == 1.0
    assert rp.fidelity(list(reversed(ref)), ref)["kendall_tau"] == pytest.approx(-1.0)


def test_a_policy_is_number_repeat_min_repeat_ms_and_bad_ones_name_the_format():
    rp = _module()
    assert rp.parse_policy("4,3,50") == (4, 3, 50)
    with pytest.raises(SystemExit, match="NUMBER,REPEAT,MIN_REPEAT_MS"):
        rp.parse_policy("4,3")
    with pytest.raises(SystemExit, match=">= 1"):
        rp.parse_policy("0,3,0")


def test_configs_from_a_log_are_its_fastest_then_spread_over_the_ranks(tmp_path, matmul_task):
    """16 fastest distinct configs first, the rest spread evenly over the remaining ranks."""
    from release.measure import MeasureResult

    rp = _module()
    space = matmul_task.config_space
    import numpy as np

    rng = np.random.default_rng(0)
    configs = []
    while len(configs) < 30:
        c = space.random_config(rng)
        if c not in configs:
            configs.append(c)
    log = tmp_path / "log.jsonl"
    results = [MeasureResult(config=c, costs=[1e-3 * (i + 1)]).stamp(matmul_task) for i, c in enumerate(configs)]
    log.write_text("".join(r.to_json() + "\n" for r in reversed(results)))  # file order is not rank order
    picked = rp.pick_configs(matmul_task, str(log), 20, seed=0)
    assert picked[:16] == configs[:16]
    assert picked[16:] == [configs[16], configs[20], configs[25], configs[29]]  # ranks 16..29, 4 spread
    with pytest.raises(SystemExit, match="fewer than --configs"):
        rp.pick_configs(matmul_task, str(log), 31, seed=0)


@pytest.mark.slow  # builds 17 kernels and times each under 3 runners (~1 min)
def test_a_run_times_every_config_under_every_policy_and_the_reference(tmp_path):
    import json

    rp = _module()
    assert rp.main(["--workloads", "tiny.matmul.1", "--configs", "17", "--passes", "2", "--policies", "1,1,0",
                    "2,2,1", "--ref-ms", "2", "--ref-repeat", "3", "--out", str(tmp_path)]) == 0
    res = json.load(open(tmp_path / "repeat_policy.json"))
    (w,) = res["workloads"]
    assert w["configs"] == 17 and set(w["policies"]) == {"1,1,0", "2,2,1", "ref"}
    for row in w["policies"].values():
        assert row["failed"] == 0 and row["run_s_per_config"] > 0
        assert row["regret"] >= 1.0 and -1.0 <= row["kendall_tau"] <= 1.0
        assert len(row["mean_cost_s"]) == 2 and all(len(p) == 17 for p in row["mean_cost_s"])
    assert len(w["ref_cost_s"]) == 17 and min(w["ref_cost_s"]) > 0
    assert "| 2,2,1 |" in open(tmp_path / "repeat_policy.md").read()
