"""Built-in PyTorch models for model-level tuning (random weights; tuning needs shapes only).

torchvision does not import beside the CPU build of PyTorch 2.13 here, and no weights can be
downloaded, so the CNNs (ResNet-18 and -50, VGG-16, AlexNet, MobileNetV2) follow torchvision's
definitions layer for layer (same convolutions, strides and paddings), the BERT-base encoder layer is
PyTorch's own ``nn.TransformerEncoderLayer`` at BERT-base sizes (hidden 768, 12 heads, FFN 3072, GELU),
and ViT-B/16 stacks twelve pre-norm layers of it behind a patch convolution.

The user-like zoo (:data:`USER_MODELS`: the kinds of model users build in PyTorch and bring as ONNX,
none of them tuned by hand for): an Inception-style CNN (``inception-mini``: a strided 3x3 stem,
1x1 branches, 3x3 and 5x5 convolutions, average pooling, concatenations, 147x147 input), a small
U-Net (``unet-mini``: max-pool downsampling, ``ConvTranspose2d`` and bilinear ``nn.Upsample``
upsampling, skips concatenated), SqueezeNet 1.1's fire modules (``squeezenet-mini``), EfficientNet-B0's
first stages (``efficientnet-mini``: depthwise 3x3 and 5x5, squeeze-and-excitation, SiLU), ConvNeXt-T's
blocks at a third of its width (``convnext-mini``: 4x4 patchify stem, 7x7 depthwise, LayerNorm over
channels, GELU, pointwise MLP, layer scale) and a small two-level detector (``detector-mini``: a strided
backbone, an FPN top-down path, shared 3x3 heads to box and class outputs). Each has a small variant
(``build(name, small=True)``: fewer channels and blocks, every kind of layer kept, a smaller image)
that tests extract, tune and compile in seconds.

Each entry is ``name -> (factory, input shape)``; :func:`build` returns the module in eval mode
and a seeded example input (weights random from the seed; batch norms get seeded, non-trivial
statistics so folding them is exercised); :func:`export_onnx` writes a model as ONNX.
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

    defs = {
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
    defs.update({name: (factory, shape) for name, (factory, shape, _, _) in _user_defs().items()})
    return defs


def _user_defs() -> dict[str, tuple[Callable, tuple, Callable, tuple]]:
    """The user-like zoo: ``name -> (factory, input shape, small factory, small input shape)``."""
    import torch
    from torch import nn

    def cbr(cin, cout, k, stride=1, padding=None, act=nn.ReLU):
        """Conv (no bias) + batch norm + activation, the block every CNN here is made of."""
        pad = (k - 1) // 2 if padding is None else padding
        return nn.Sequential(nn.Conv2d(cin, cout, k, stride, pad, bias=False), nn.BatchNorm2d(cout), act())

    class InceptionA(nn.Module):
        """Inception-v3's block A: 1x1; 1x1 -> 5x5; 1x1 -> 3x3 -> 3x3; 3x3 average pool -> 1x1; concatenated."""

        def __init__(self, cin, w, pool_features):
            super().__init__()
            self.b1 = cbr(cin, 4 * w, 1)
            self.b5 = nn.Sequential(cbr(cin, 3 * w, 1), cbr(3 * w, 4 * w, 5))
            self.b3 = nn.Sequential(cbr(cin, 4 * w, 1), cbr(4 * w, 6 * w, 3), cbr(6 * w, 6 * w, 3))
            self.pool = nn.Sequential(nn.AvgPool2d(3, 1, 1), cbr(cin, pool_features, 1))

        def forward(self, x):
            return torch.cat([self.b1(x), self.b5(x), self.b3(x), self.pool(x)], 1)

    class ReductionA(nn.Module):
        """Inception-v3's block B (grid reduction): strided 3x3; 1x1 -> 3x3 -> strided 3x3; max pool."""

        def __init__(self, cin, w):
            super().__init__()
            self.b3 = cbr(cin, 24 * w, 3, 2, 0)
            self.b33 = nn.Sequential(cbr(cin, 4 * w, 1), cbr(4 * w, 6 * w, 3), cbr(6 * w, 6 * w, 3, 2, 0))
            self.pool = nn.MaxPool2d(3, 2)

        def forward(self, x):
            return torch.cat([self.b3(x), self.b33(x), self.pool(x)], 1)

    class InceptionMini(nn.Module):
        """Inception-v3's stem and first blocks at 147x147 (``w`` = 16: its widths; 1x1 branch 64, 5x5 64,
        3x3 96, pool 32 and 64), a grid reduction, global average pooling and a linear classifier."""

        def __init__(self, w=16, classes=1000, lite=False):
            super().__init__()
            if lite:  # the small variant: one strided conv, one block A, no grid reduction
                self.stem = nn.Sequential(cbr(3, 12 * w, 3, 2, 0), nn.MaxPool2d(3, 2))
                self.blocks = InceptionA(12 * w, w, 2 * w)
                cout = 16 * w
            else:
                self.stem = nn.Sequential(cbr(3, 2 * w, 3, 2, 0), cbr(2 * w, 2 * w, 3, 1, 0), cbr(2 * w, 4 * w, 3),
                                          nn.MaxPool2d(3, 2), cbr(4 * w, 5 * w, 1), cbr(5 * w, 12 * w, 3, 1, 0),
                                          nn.MaxPool2d(3, 2))
                self.blocks = nn.Sequential(InceptionA(12 * w, w, 2 * w), InceptionA(16 * w, w, 4 * w),
                                            ReductionA(18 * w, w))  # 12 w -> 16 w -> 18 w -> 48 w channels
                cout = 48 * w
            self.fc = nn.Linear(cout, classes)

        def forward(self, x):
            x = self.blocks(self.stem(x))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    class UNetMini(nn.Module):
        """A U-Net (Ronneberger et al., 2015) of three levels: two 3x3 convs per level, max-pool down,
        up by ``ConvTranspose2d`` (2x2, stride 2) on two levels and by bilinear ``nn.Upsample`` + 1x1 conv on
        one, each up path concatenated with its skip; a 1x1 conv to ``classes`` maps."""

        def __init__(self, w=16, classes=2, lite=False):
            super().__init__()

            def double(cin, cout):  # the small variant: one conv per level
                return cbr(cin, cout, 3) if lite else nn.Sequential(cbr(cin, cout, 3), cbr(cout, cout, 3))

            self.lite = lite
            self.e1, self.e2 = double(3, w), double(w, 2 * w)
            if lite:  # two levels: up by ConvTranspose2d, then by nn.Upsample
                self.mid = double(2 * w, 4 * w)
                self.up2 = nn.ConvTranspose2d(4 * w, 2 * w, 2, 2)
                self.d2 = double(4 * w, 2 * w)
                self.up1 = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                                         nn.Conv2d(2 * w, w, 1))
            else:
                self.e3 = double(2 * w, 4 * w)
                self.mid = double(4 * w, 8 * w)
                self.up3 = nn.ConvTranspose2d(8 * w, 4 * w, 2, 2)
                self.d3 = double(8 * w, 4 * w)
                self.up2 = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                                         nn.Conv2d(4 * w, 2 * w, 1))
                self.d2 = double(4 * w, 2 * w)
                self.up1 = nn.ConvTranspose2d(2 * w, w, 2, 2)
            self.d1 = double(2 * w, w)
            self.out = nn.Conv2d(w, classes, 1)

        def forward(self, x):
            s1 = self.e1(x)
            s2 = self.e2(nn.functional.max_pool2d(s1, 2))
            if self.lite:
                y = self.mid(nn.functional.max_pool2d(s2, 2))
            else:
                s3 = self.e3(nn.functional.max_pool2d(s2, 2))
                y = self.mid(nn.functional.max_pool2d(s3, 2))
                y = self.d3(torch.cat([self.up3(y), s3], 1))
            y = self.d2(torch.cat([self.up2(y), s2], 1))
            y = self.d1(torch.cat([self.up1(y), s1], 1))
            return self.out(y)

    class Fire(nn.Module):
        """SqueezeNet's fire module: a 1x1 squeeze, then 1x1 and 3x3 expands concatenated (ReLU after each)."""

        def __init__(self, cin, squeeze, e1, e3):
            super().__init__()
            self.squeeze = nn.Conv2d(cin, squeeze, 1)
            self.e1 = nn.Conv2d(squeeze, e1, 1)
            self.e3 = nn.Conv2d(squeeze, e3, 3, padding=1)

        def forward(self, x):
            x = torch.relu(self.squeeze(x))
            return torch.cat([torch.relu(self.e1(x)), torch.relu(self.e3(x))], 1)

    class SqueezeNetMini(nn.Module):
        """torchvision's ``squeezenet1_1`` layer for layer (``w`` = 16: its widths; max pools with
        ``ceil_mode=True``), the classifier a 1x1 conv + ReLU + global average pooling (no dropout: eval)."""

        def __init__(self, w=16, classes=1000, lite=False):
            super().__init__()
            head = [nn.Conv2d(3, 4 * w, 3, 2), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True),
                    Fire(4 * w, w, 4 * w, 4 * w), Fire(8 * w, w, 4 * w, 4 * w), nn.MaxPool2d(3, 2, ceil_mode=True)]
            if lite:  # the small variant: the first two fire modules
                self.features, cout = nn.Sequential(*head), 8 * w
            else:
                self.features, cout = nn.Sequential(
                    *head, Fire(8 * w, 2 * w, 8 * w, 8 * w), Fire(16 * w, 2 * w, 8 * w, 8 * w),
                    nn.MaxPool2d(3, 2, ceil_mode=True),
                    Fire(16 * w, 3 * w, 12 * w, 12 * w), Fire(24 * w, 3 * w, 12 * w, 12 * w),
                    Fire(24 * w, 4 * w, 16 * w, 16 * w), Fire(32 * w, 4 * w, 16 * w, 16 * w)), 32 * w
            self.classifier = nn.Conv2d(cout, classes, 1)

        def forward(self, x):
            x = torch.relu(self.classifier(self.features(x)))
            return torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)

    class SqueezeExcite(nn.Module):
        """Squeeze-and-excitation (Hu et al., 2018) as EfficientNet writes it: global average pool, 1x1 conv
        reduce + SiLU, 1x1 conv expand + sigmoid, the input scaled per channel."""

        def __init__(self, c, reduced):
            super().__init__()
            self.reduce = nn.Conv2d(c, reduced, 1)
            self.expand = nn.Conv2d(reduced, c, 1)

        def forward(self, x):
            s = nn.functional.adaptive_avg_pool2d(x, 1)
            return x * torch.sigmoid(self.expand(nn.functional.silu(self.reduce(s))))

    class MBConv(nn.Module):
        """EfficientNet's MBConv: 1x1 expand (ratio ``t``; none at 1), depthwise ``k``x``k``, SE (a quarter of
        the block's input channels), 1x1 project; SiLU after the first two, a residual when shapes allow."""

        def __init__(self, cin, cout, k, stride, t):
            super().__init__()
            hidden = cin * t
            layers = [] if t == 1 else [cbr(cin, hidden, 1, act=nn.SiLU)]
            layers += [nn.Sequential(nn.Conv2d(hidden, hidden, k, stride, k // 2, groups=hidden, bias=False),
                                     nn.BatchNorm2d(hidden), nn.SiLU()),
                       SqueezeExcite(hidden, max(1, cin // 4)),
                       nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
            self.block = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.block(x) if self.residual else self.block(x)

    class EfficientNetMini(nn.Module):
        """EfficientNet-B0's stem and first four stages (Tan and Le, 2019: MBConv1 k3 16, MBConv6 k3 24 x2,
        MBConv6 k5 40 x2, MBConv6 k3 80 x3, at ``w`` = 8 its widths), a 1x1 head conv to 640, pooling and a
        linear classifier; 160x160 input."""

        def __init__(self, w=8, classes=1000, lite=False):
            super().__init__()
            cfg = [(1, 2 * w, 3, 1, 1), (6, 3 * w, 3, 2, 2), (6, 5 * w, 5, 2, 2), (6, 10 * w, 3, 2, 3)]
            if lite:  # the small variant: MBConv1 k3, one MBConv6 k5 stride 2
                cfg = [(1, 2 * w, 3, 1, 1), (6, 5 * w, 5, 2, 1)]
            layers, cin = [cbr(3, 4 * w, 3, 2, act=nn.SiLU)], 4 * w
            for t, c, k, s, n in cfg:
                for i in range(n):
                    layers.append(MBConv(cin, c, k, s if i == 0 else 1, t))
                    cin = c
            layers.append(cbr(cin, 80 * w, 1, act=nn.SiLU))
            self.features = nn.Sequential(*layers)
            self.fc = nn.Linear(80 * w, classes)

        def forward(self, x):
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))

    class ChannelsLastNorm(nn.Module):
        """LayerNorm over the channels of an NCHW tensor, as torchvision's ConvNeXt writes it (permute to
        NHWC, ``nn.LayerNorm``, permute back)."""

        def __init__(self, c):
            super().__init__()
            self.norm = nn.LayerNorm(c, eps=1e-6)

        def forward(self, x):
            return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

    class ConvNeXtBlock(nn.Module):
        """ConvNeXt's block (Liu et al., 2022): 7x7 depthwise, LayerNorm over channels (NHWC), Linear 4x,
        GELU, Linear back, layer scale, residual."""

        def __init__(self, c):
            super().__init__()
            self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
            self.norm = nn.LayerNorm(c, eps=1e-6)
            self.fc1 = nn.Linear(c, 4 * c)
            self.fc2 = nn.Linear(4 * c, c)
            self.gamma = nn.Parameter(torch.full((c,), 0.5))

        def forward(self, x):
            y = self.dw(x).permute(0, 2, 3, 1)
            y = self.fc2(nn.functional.gelu(self.fc1(self.norm(y)))) * self.gamma
            return x + y.permute(0, 3, 1, 2)

    class ConvNeXtMini(nn.Module):
        """ConvNeXt-T's first three stages at ``w`` = 32 (its widths 96-192-384 / 3; depths 2, 2, 2): a 4x4
        stride-4 patchify stem + LayerNorm, downsampling by LayerNorm + 2x2 stride-2 conv, global average
        pooling, LayerNorm and a linear classifier; 128x128 input."""

        def __init__(self, w=32, classes=1000, lite=False):
            super().__init__()
            dims = [w, 2 * w] if lite else [w, 2 * w, 4 * w]  # the small variant: two stages of one block
            layers = [nn.Conv2d(3, dims[0], 4, 4), ChannelsLastNorm(dims[0])]
            for i, d in enumerate(dims):
                if i:
                    layers += [ChannelsLastNorm(dims[i - 1]), nn.Conv2d(dims[i - 1], d, 2, 2)]
                layers += [ConvNeXtBlock(d)] if lite else [ConvNeXtBlock(d), ConvNeXtBlock(d)]
            self.features = nn.Sequential(*layers)
            self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
            self.fc = nn.Linear(dims[-1], classes)

        def forward(self, x):
            return self.fc(self.norm(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1)))

    class DetectorMini(nn.Module):
        """A one-stage detector head on two feature levels (RetinaNet/FCOS-style, Lin et al., 2017): a backbone
        of strided 3x3 convs to strides 8 and 16, an FPN top-down path (1x1 laterals, nearest 2x upsampling,
        add, 3x3 smoothing), and per level the same heads (a 3x3 conv + ReLU, then 3x3 convs to ``4 x anchors``
        box offsets and ``classes x anchors`` class logits); returns ``(boxes (N, L, 4), logits (N, L,
        classes))`` over all levels' locations and anchors; 256x256 input."""

        def __init__(self, w=16, classes=20, anchors=3, lite=False):
            super().__init__()
            if lite:  # the small variant: one conv per stage
                self.c1 = cbr(3, 2 * w, 3, 4)
                self.c2, self.c3 = cbr(2 * w, 4 * w, 3, 2), cbr(4 * w, 8 * w, 3, 2)
            else:
                self.c1 = nn.Sequential(cbr(3, w, 3, 2), cbr(w, 2 * w, 3, 2), cbr(2 * w, 2 * w, 3))
                self.c2 = nn.Sequential(cbr(2 * w, 4 * w, 3, 2), cbr(4 * w, 4 * w, 3))  # stride 8
                self.c3 = nn.Sequential(cbr(4 * w, 8 * w, 3, 2), cbr(8 * w, 8 * w, 3))  # stride 16
            f = 4 * w
            self.lat8, self.lat16 = nn.Conv2d(4 * w, f, 1), nn.Conv2d(8 * w, f, 1)
            self.smooth8 = nn.Conv2d(f, f, 3, padding=1)
            self.head = nn.Sequential(nn.Conv2d(f, f, 3, padding=1), nn.ReLU())
            self.box = nn.Conv2d(f, 4 * anchors, 3, padding=1)
            self.cls = nn.Conv2d(f, classes * anchors, 3, padding=1)
            self.classes = classes

        def forward(self, x):
            p8 = self.c2(self.c1(x))
            p16 = self.c3(p8)
            l16 = self.lat16(p16)
            l8 = self.smooth8(self.lat8(p8) + nn.functional.interpolate(l16, scale_factor=2.0, mode="nearest"))
            boxes, logits = [], []
            for level in (l8, l16):
                h = self.head(level)
                boxes.append(self.box(h).permute(0, 2, 3, 1).reshape(x.shape[0], -1, 4))
                logits.append(self.cls(h).permute(0, 2, 3, 1).reshape(x.shape[0], -1, self.classes))
            return torch.cat(boxes, 1), torch.cat(logits, 1)

    def small(cls, **kw):
        return lambda: cls(**kw)

    return {
        "inception-mini": (InceptionMini, (1, 3, 147, 147), small(InceptionMini, w=2, classes=10, lite=True),
                           (1, 3, 23, 23)),
        "unet-mini": (UNetMini, (1, 3, 128, 128), small(UNetMini, w=4, lite=True), (1, 3, 16, 16)),
        "squeezenet-mini": (SqueezeNetMini, (1, 3, 224, 224), small(SqueezeNetMini, w=2, classes=10, lite=True),
                            (1, 3, 35, 35)),
        "efficientnet-mini": (EfficientNetMini, (1, 3, 160, 160),
                              small(EfficientNetMini, w=2, classes=10, lite=True), (1, 3, 16, 16)),
        "convnext-mini": (ConvNeXtMini, (1, 3, 128, 128), small(ConvNeXtMini, w=8, classes=10, lite=True),
                          (1, 3, 16, 16)),
        "detector-mini": (DetectorMini, (1, 3, 256, 256), small(DetectorMini, w=4, classes=3, anchors=2, lite=True),
                          (1, 3, 32, 32)),
    }


#: the user-like zoo (see the module docstring), in the order of issue 48's list
USER_MODELS = ("inception-mini", "unet-mini", "squeezenet-mini", "efficientnet-mini", "convnext-mini",
               "detector-mini")

MODEL_NAMES = ("resnet18", "resnet50", "vit-b16", "vgg16", "alexnet", "mobilenet_v2", "bert-base-layer",
               "bert-base-layer-384", "tiny-cnn") + USER_MODELS


def build(name: str, seed: int = 0, small: bool = False):
    """``(module in eval mode, (example input,))`` of built-in model ``name``.

    Parameters
    ----------
    name : str
        One of :data:`MODEL_NAMES`.
    seed : int
        Seeds ``torch.manual_seed`` before the module is made (its weights, its batch norms' statistics)
        and before the input is drawn (default 0).
    small : bool
        The small variant of a user-like model (:data:`USER_MODELS`: fewer channels, a smaller image, for
        tests); default False.

    Raises
    ------
    WorkloadError
        Unknown model name (the message lists the built-in ones), or ``small`` for a model that has no
        small variant.
    """
    import torch

    defs = _defs()
    if name not in defs:
        raise WorkloadError(f"unknown model {name!r}; built-in models: {', '.join(MODEL_NAMES)} "
                            "(or pass a PyTorch module or an .onnx file)")
    factory, shape = defs[name]
    if small:
        if name not in USER_MODELS:
            raise WorkloadError(f"model {name!r} has no small variant; these do: {', '.join(USER_MODELS)}")
        _, _, factory, shape = _user_defs()[name]
    torch.manual_seed(seed)
    module = factory().eval()
    if name in USER_MODELS:
        _seed_norm_statistics(module)
    return module, (torch.randn(*shape),)


def _seed_norm_statistics(module) -> None:
    """Give every batch norm of ``module`` non-trivial statistics and affine weights (from the global
    seed): a fresh one's (mean 0, variance 1, weight 1, bias 0) would fold into a convolution as a no-op,
    which hides a wrong fold."""
    import torch
    from torch import nn

    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)


def export_onnx(name: str, path: str, seed: int = 0, small: bool = False) -> str:
    """Write built-in model ``name`` (:func:`build`) to ``path`` as ONNX, as a user would
    (``torch.onnx.export`` with the TorchScript exporter, ``dynamo=False``: the ``torch.export``-based
    one needs ``onnxscript``, not a dependency; transformer layers through
    :func:`release.reference.onnx_exportable`); the input is named ``input``. Returns ``path``.

    Raises
    ------
    WorkloadError
        As :func:`build`.
    """
    import warnings

    import torch

    from .reference import onnx_exportable

    module, inputs = build(name, seed=seed, small=small)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(onnx_exportable(module), inputs, path, dynamo=False, input_names=["input"])
    return path
