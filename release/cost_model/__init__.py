"""Cost models over knob configs: AutoTVM's XGBoost cost model with ``knob`` and ``itervar`` features."""

from .base import CostModel
from .features import FEATURE_TYPES, KnobFeaturizer, ProgramFeatureCache, check_feature_type
from .xgb import LOSS_TYPES, XGBoostCostModel, XGBParams, average_recall, check_loss_type, recall_at_k

__all__ = ["CostModel", "XGBoostCostModel", "XGBParams", "KnobFeaturizer", "ProgramFeatureCache", "FEATURE_TYPES",
           "LOSS_TYPES", "average_recall", "recall_at_k", "check_feature_type", "check_loss_type"]
