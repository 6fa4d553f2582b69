"""XGBoost cost model: AutoTVM's recall metric, features, errors, and learning on real measurements."""

from __future__ import annotations

import time

import numpy as np
import pytest

from release.cost_model import KnobFeaturizer, XGBoostCostModel, average_recall, recall_at_k
from release.errors import TunerError


def _autotvm_average_recall(preds, labels, n):
    """AutoTVM's xgb_average_recalln_curve_score, written as its loops."""
    trials = np.argsort(preds)[::-1]
    vals = labels[trials]
    tmp = np.argsort(-vals)
    ranks = np.empty_like(tmp)
    ranks[tmp] = np.arange(len(tmp))
    curve = np.zeros(len(ranks))
    for i in range(len(ranks)):
        curve[i] = np.sum(ranks[:i] <= i) / (i + 1)
    return np.sum(curve[:n]) / n


def test_average_recall_matches_autotvm_loops():
    rng = np.random.default_rng(0)
    for m, n in [(10, 4), (50, 16), (80, 64)]:
        preds, labels = rng.random(m), rng.random(m)
        assert average_recall(preds, labels, n) == pytest.approx(_autotvm_average_recall(preds, labels, n))
    labels = np.arange(20, dtype=float)
    # perfect ranking: curve[i] = i / (i + 1) (AutoTVM's j < i bound), so a-recall@4 = (0 + 1/2 + 2/3 + 3/4) / 4
    assert average_recall(labels, labels, 4) == pytest.approx((0 + 1 / 2 + 2 / 3 + 3 / 4) / 4)
    assert average_recall(-labels, labels, 4) == 0.0


def test_recall_at_k():
    true = np.array([5.0, 4, 3, 2, 1, 0])
    assert recall_at_k(true, true, 2) == 1.0
    assert recall_at_k(-true, true, 2) == 0.0
    assert recall_at_k(np.array([5.0, 0, 4, 0, 0, 0]), true, 2) == 0.5


def test_knob_features_are_indices_and_log2_factors(conv_task):
    space = conv_task.config_space
    f = KnobFeaturizer(space)
    xs = space.sample(5, np.random.default_rng(0))
    feats = f.transform(xs)
    assert feats.shape == (5, f.width)
    assert np.array_equal(feats[:, :space.n_knobs], space.canonicalize(xs))
    p = next(i for i, k in enumerate(space.knobs) if k.kind == "tile")
    n_fac = len(space.knobs[p].choices[0])
    off = space.n_knobs + sum(len(k.choices[0]) for k in space.knobs[:p] if k.kind == "tile")
    want = np.log2(np.array([space.knobs[p].choices[i] for i in space.canonicalize(xs)[:, p]]))
    assert np.allclose(feats[:, off:off + n_fac], want)


@pytest.mark.parametrize("kw,fragment", [
    (dict(feature_type="curve"), "unknown feature type 'curve'"),
    (dict(feature_type="itervars"), "choose one of: itervar, knob"),
    (dict(loss_type="l2"), "unknown loss type 'l2'"),
])
def test_bad_feature_or_loss_type(matmul_task, kw, fragment):
    with pytest.raises(TunerError, match=fragment) as err:
        XGBoostCostModel(matmul_task, **kw)
    assert "\n" not in str(err.value)


def test_fit_checks_shapes_and_plan_size(matmul_task):
    m = XGBoostCostModel(matmul_task)
    n = matmul_task.config_space.n_knobs
    with pytest.raises(TunerError, match="plan_size=0"):
        m.fit(np.zeros((4, n), dtype=int), np.ones(4), 0)
    with pytest.raises(TunerError, match="expected"):
        m.fit(np.zeros((4, n + 1), dtype=int), np.ones(4), 4)
    # nothing ran: no model, predictions stay zero
    m.fit(np.zeros((4, n), dtype=int), np.zeros(4), 4)
    assert not m.fitted and np.all(m.predict(np.zeros((3, n), dtype=int)) == 0)


@pytest.fixture(scope="module")
def measured(matmul_task):
    """64 random configs of tiny.matmul.1 measured for real (repeat 3, each cost averaged over >= 10 ms of
    runs: a 64^3 matmul runs in microseconds, and single runs on a shared machine rank it at random)."""
    from release import autotvm
    from release.measure import LocalBuilder, LocalRunner, measure_option

    opt = measure_option(LocalBuilder(n_parallel=2, timeout=60),
                         LocalRunner(number=3, repeat=3, min_repeat_ms=10, cooldown_interval=0.0))
    recs = []
    tuner = autotvm.tuner.RandomTuner(matmul_task, seed=123)
    tuner.tune(64, opt, callbacks=[lambda t, i, r: recs.extend(r)])
    opt["builder"].close()
    opt["runner"].close()
    xs = np.array([r.config for r in recs], dtype=np.int64)
    ys = np.array([matmul_task.flop / r.mean_cost if r.ok else 0.0 for r in recs])
    return xs, ys


@pytest.mark.parametrize("feature_type,loss_type", [("knob", "reg"), ("knob", "rank"), ("itervar", "reg")])
def test_model_ranks_held_out_configs_better_than_chance(matmul_task, measured, feature_type, loss_type):
    """4-fold cross-validation on 64 measured configs: train on 48, rank the 16 held out.

    Observed on four measured sets: mean recall@4 0.42-0.67 (chance 0.25), mean Spearman 0.28-0.71;
    one clean-clone run on a loaded machine gave Spearman 0.14 with recall above chance, so only the
    recall (the issue's criterion) is asserted: the labels are real, noisy measurements.
    """

    xs, ys = measured
    assert (ys > 0).sum() >= 56, "most random matmul configs should run"
    k, recalls = 4, []
    for fold in range(4):
        test = np.zeros(len(xs), dtype=bool)
        test[fold * 16:(fold + 1) * 16] = True
        m = XGBoostCostModel(matmul_task, feature_type=feature_type, loss_type=loss_type, seed=0)
        m.fit(xs[~test], ys[~test], plan_size=16)
        assert m.fitted and 1 <= m.last_fit["rounds"] < 8000
        scores = m.predict_program(xs[test])
        recalls.append(recall_at_k(scores, ys[test], k))
    chance = k / 16  # 0.25: expected recall@4 of a random ranking of 16 configs
    assert np.mean(recalls) > chance, f"{feature_type}/{loss_type} recall@{k} {recalls} not above chance {chance}"


def test_predict_is_fast_for_any_feature_type(matmul_task, measured):
    """The PPO agent and the annealing query 128 configs per step: predict must stay ~1 ms."""
    xs, ys = measured
    space = matmul_task.config_space
    batch = space.sample(128, np.random.default_rng(1))
    for ft in ("knob", "itervar"):
        m = XGBoostCostModel(matmul_task, feature_type=ft, seed=0)
        m.fit(xs, ys, 64)
        m.predict(batch)
        t0 = time.perf_counter()
        for _ in range(20):
            out = m.predict(batch)
        per_call = (time.perf_counter() - t0) / 20
        assert out.shape == (128,) and np.isfinite(out).all()
        assert per_call < 0.05, f"{ft}: predict of 128 configs took {per_call * 1e3:.1f} ms"


def test_itervar_program_features_are_cached(matmul_task, measured):
    xs, ys = measured
    m = XGBoostCostModel(matmul_task, feature_type="itervar", seed=0)
    m.fit(xs[:32], ys[:32], 32)
    cache = m.program_features
    n0 = cache.computed
    assert n0 == len({tuple(x) for x in matmul_task.config_space.canonicalize(xs[:32])})
    m.predict_program(xs[:32])
    assert cache.computed == n0  # all cached
    t0 = time.perf_counter()
    plan = matmul_task.config_space.sample(64, np.random.default_rng(7))
    m.predict_program(plan)
    per_config = (time.perf_counter() - t0) / 64
    # a plan of 64 configs must not dominate a round (a round measures 64 configs at >= 0.3 s each)
    assert per_config < 0.1, f"program features cost {per_config * 1e3:.0f} ms per config"


def test_itervar_scores_invalid_programs_minus_inf(conv_task):
    space = conv_task.config_space
    rng = np.random.default_rng(3)
    valid, invalid = [], []
    while len(valid) < 12 or not invalid:
        c = space.random_config(rng)
        (valid if space.is_valid(c)[0] else invalid).append(c)
    xs = np.array(valid[:12])
    ys = 1.0 + xs[:, 1].astype(float)  # synthetic throughputs
    m = XGBoostCostModel(conv_task, feature_type="itervar", seed=0)
    m.fit(xs, ys, 4)
    out = m.predict_program(np.array([invalid[0], valid[0]]))
    assert out[0] == -np.inf and np.isfinite(out[1])
    assert np.isfinite(m.predict(np.array([invalid[0]]))).all()  # the fast model scores anything
