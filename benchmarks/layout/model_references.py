"""The model tier's reference lines for one model (``release.bench.model_timing.references``: PyTorch eager,
torch.compile, ONNX Runtime, TVM untuned; target's threads, warm-up, fastest of repeats, reliability
flags), printed as JSON. ONNX Runtime needs ``pip install 'onnxruntime==1.32.0'`` (the ``bench`` extra).

Usage: RELEASE_TIMING_PRIORITY=realtime .venv/bin/python benchmarks/layout/model_references.py [MODEL]
"""
import json
import sys

from release.bench import ModelBenchConfig
from release.bench.model_timing import references
from release.threads import timing_priority

name = sys.argv[1] if len(sys.argv) > 1 else "resnet18"
print("priority", timing_priority(), file=sys.stderr)
cfg = ModelBenchConfig.from_tier("model", models=[name], out="/tmp/release-model-references")
print(json.dumps(references(cfg, name, progress=False), indent=1, default=str))
