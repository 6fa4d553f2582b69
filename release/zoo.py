"""Built-in PyTorch models for model-level tuning (random weights; tuning needs shapes only).

torchvision does not import beside the CPU build of PyTorch 2.13 here, and no weights can be
downloaded, so the CNNs (ResNet-18 and -50, VGG-16, AlexNet, MobileNetV2) follow torchvision's
definitions layer for layer (same convolutions, strides and paddings), the BERT-base encoder layer is
PyTorch's own ``nn.TransformerEncoderLayer`` at BERT-base sizes (hidden 768, 12 heads, FFN 3072, GELU),
and ViT-B/16 stacks twelve pre-norm layers of it behind a patch convolution.

Each entry is ``name -> (factory, input shape)``; :func:`build` returns the module in eval mode
and a seeded example input.
"""

from __future__ import annotations

from typing import Callable

from .errors import WorkloadError


def _defs() -> dict[str, tuple[Callable, tuple]]:
    import torch
    from torch import nn

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.downsample is None else self.downsample(x)))

    class ResNet18(nn.Module):
        def __init__(self, classes=1000):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
            blocks, cin = [], 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
                cin = cout
            self.layers = nn.Sequential(*blocks)
            self.fc = nn.Linear(512, classes)

        def forward(self, x):
            x = self.layers(self.stem(x))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    class Bottleneck(nn.Module):
        """torchvision's ResNet-50 block: 1x1 reduce, 3x3 (the stride, as torchvision v1.5), 1x1 expand x4."""

        def __init__(self, cin, width, stride):
            super().__init__()
            cout = width * 4
            self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = torch.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return torch.relu(y + (x if self.downsample is None else self.downsample(x)))

    class ResNet50(nn.Module):
        def __init__(self, classes=1000):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
            blocks, cin = [], 64
            for width, n, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
                for i in range(n):
                    blocks.append(Bottleneck(cin, width, stride if i == 0 else 1))
                    cin = width * 4
            self.layers = nn.Sequential(*blocks)
            self.fc = nn.Linear(2048, classes)

        def forward(self, x):
            x = self.layers(self.stem(x))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    class ViT(nn.Module):
        """ViT-B/16 at 224x224 (Dosovitskiy et al., ICLR 2021; torchvision's ``vit_b_16`` sizes): a 16x16
        stride-16 patch convolution, a class token and learned position embeddings, 12 pre-norm encoder
        layers (PyTorch's ``nn.TransformerEncoderLayer``, hidden 768, 12 heads, MLP 3072, GELU), a final
        layer norm and a linear head on the class token."""

        def __init__(self, image=224, patch=16, dim=768, depth=12, heads=12, mlp=3072, classes=1000):
            super().__init__()
            self.patch = nn.Conv2d(3, dim, patch, patch)
            self.cls = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
            self.layers = nn.ModuleList(
                nn.TransformerEncoderLayer(dim, heads, mlp, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True) for _ in range(depth))
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, classes)

        def forward(self, x):
            x = self.patch(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            for layer in self.layers:
                x = layer(x)
            return self.head(self.norm(x)[:, 0])

    def vgg16():
        cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
        layers, cin = [], 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(cin, v, 3, padding=1), nn.ReLU()]
                cin = v
        return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(7), nn.Flatten(), nn.Linear(512 * 49, 4096), nn.ReLU(),
                             nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1000))

    def alexnet():
        return nn.Sequential(
            nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(), nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.AdaptiveAvgPool2d(6), nn.Flatten(), nn.Linear(256 * 36, 4096), nn.ReLU(),
            nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1000))

    def cbr6(cin, cout, k=3, stride=1, groups=1):
        return [nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False), nn.BatchNorm2d(cout),
                nn.ReLU6()]

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, t):
            super().__init__()
            hidden = cin * t
            layers = [] if t == 1 else cbr6(cin, hidden, 1)
            layers += cbr6(hidden, hidden, 3, stride, groups=hidden)
            layers += [nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
            self.conv = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.conv(x) if self.residual else self.conv(x)

    def mobilenet_v2():
        layers, cin = cbr6(3, 32, 3, 2), 32
        for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                           (6, 160, 3, 2), (6, 320, 1, 1)]:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += cbr6(cin, 1280, 1)
        return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1280, 1000))

    def bert_layer():
        return nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu", batch_first=True)

    class TinyCNN(nn.Module):
        """Two small layers (conv + dense): the model of the end-to-end test."""

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.fc = nn.Linear(8 * 8 * 8, 10)

        def forward(self, x):
            return self.fc(torch.relu(self.conv(x)).flatten(1))

    return {
        "resnet18": (ResNet18, (1, 3, 224, 224)),
        "resnet50": (ResNet50, (1, 3, 224, 224)),
        "vit-b16": (ViT, (1, 3, 224, 224)),
        "vgg16": (vgg16, (1, 3, 224, 224)),
        "alexnet": (alexnet, (1, 3, 224, 224)),
        "mobilenet_v2": (mobilenet_v2, (1, 3, 224, 224)),
        "bert-base-layer": (bert_layer, (1, 128, 768)),
        "bert-base-layer-384": (bert_layer, (1, 384, 768)),
        "tiny-cnn": (TinyCNN, (1, 3, 8, 8)),
    }


MODEL_NAMES = ("resnet18", "resnet50", "vit-b16", "vgg16", "alexnet", "mobilenet_v2", "bert-base-layer",
               "bert-base-layer-384", "tiny-cnn")


def build(name: str, seed: int = 0):
    """``(module in eval mode, (example input,))`` of built-in model ``name``.

    Raises
    ------
    WorkloadError
        Unknown model name (the message lists the built-in ones).
    """
    import torch

    defs = _defs()
    if name not in defs:
        raise WorkloadError(f"unknown model {name!r}; built-in models: {', '.join(MODEL_NAMES)} "
                            "(or pass a PyTorch module or an .onnx file)")
    factory, shape = defs[name]
    torch.manual_seed(seed)
    module = factory().eval()
    return module, (torch.randn(*shape),)
