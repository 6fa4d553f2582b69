"""Models with transformer layers reach ONNX Runtime: ``release.reference.onnx_exportable`` writes each
``nn.TransformerEncoderLayer`` with explicit attention, the same function, which the TorchScript exporter
accepts (PyTorch's fused fast path has no ONNX operator)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from release.reference import onnx_exportable


@pytest.mark.parametrize("norm_first,batch_first,activation", [(False, True, "gelu"), (True, False, "relu")])
def test_explicit_encoder_layer_computes_the_same_and_exports(tmp_path, norm_first, batch_first, activation):
    ort = pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, activation=activation, batch_first=batch_first,
                                       norm_first=norm_first).eval()
    model = nn.Sequential(nn.Linear(32, 64), layer, nn.Linear(64, 8)).eval()  # a layer inside a model
    x = torch.randn((2, 10, 32) if batch_first else (10, 2, 32))
    exportable = onnx_exportable(model)
    assert exportable is not model and exportable[1] is not layer and exportable[1].layer is layer  # weights shared
    assert model[1] is layer  # the model itself is left as it was
    with torch.no_grad():
        ref = model(x).numpy()
        np.testing.assert_allclose(exportable(x).numpy(), ref, rtol=1e-5, atol=1e-5)
    if not norm_first and batch_first:  # BERT's form runs PyTorch's fused fast path: no ONNX operator for it
        with pytest.raises(Exception, match="_transformer_encoder_layer_fwd"):
            with torch.no_grad():
                torch.onnx.export(model, (x,), str(tmp_path / "plain.onnx"), dynamo=False)
    path = tmp_path / "explicit.onnx"
    with torch.no_grad():
        torch.onnx.export(exportable, (x,), str(path), dynamo=False)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_a_model_without_transformer_layers_is_returned_as_it_is():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
    assert onnx_exportable(model) is model
