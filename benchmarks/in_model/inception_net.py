"""An Inception-style CNN built the way users build theirs (the model of issue 48's report), exported to ONNX.

    .venv/bin/python benchmarks/in_model/inception_net.py --out /tmp/inception147.onnx

A strided 3x3 stem (3 convolutions and a max pooling), two Inception-A-like blocks (1x1, 1x1->5x5,
1x1->3x3->3x3 and avg-pool->1x1 branches, concatenated), a strided reduction block, global average pooling and a
classifier; batch 1, 3x147x147 input, random weights (seed 0).
"""

from __future__ import annotations

import argparse


def build(seed: int = 0):
    """``(module in eval mode, (example input,))``: the Inception-style CNN, 3x147x147 input."""
    import torch
    from torch import nn

    def conv(cin, cout, k, s=1, p=0):
        return nn.Sequential(nn.Conv2d(cin, cout, k, s, p, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    class BlockA(nn.Module):
        def __init__(self, cin, pool):
            super().__init__()
            self.b1 = conv(cin, 64, 1)
            self.b5 = nn.Sequential(conv(cin, 48, 1), conv(48, 64, 5, p=2))
            self.b3 = nn.Sequential(conv(cin, 64, 1), conv(64, 96, 3, p=1), conv(96, 96, 3, p=1))
            self.bp = nn.Sequential(nn.AvgPool2d(3, 1, 1), conv(cin, pool, 1))

        def forward(self, x):
            return torch.cat([self.b1(x), self.b5(x), self.b3(x), self.bp(x)], 1)

    class Reduce(nn.Module):
        def __init__(self, cin):
            super().__init__()
            self.b3 = conv(cin, 192, 3, 2)
            self.bd = nn.Sequential(conv(cin, 64, 1), conv(64, 96, 3, p=1), conv(96, 96, 3, 2))
            self.pool = nn.MaxPool2d(3, 2)

        def forward(self, x):
            return torch.cat([self.b3(x), self.bd(x), self.pool(x)], 1)

    class Net(nn.Module):
        def __init__(self, classes=100):
            super().__init__()
            self.stem = nn.Sequential(conv(3, 32, 3, 2), conv(32, 32, 3), conv(32, 64, 3, p=1), nn.MaxPool2d(3, 2),
                                      conv(64, 80, 1), conv(80, 128, 3))
            self.a1, self.a2 = BlockA(128, 32), BlockA(256, 64)
            self.red = Reduce(288)
            self.fc = nn.Linear(576, classes)

        def forward(self, x):
            x = self.red(self.a2(self.a1(self.stem(x))))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    torch.manual_seed(seed)
    net = Net().eval()
    for m in net.modules():  # non-trivial batch-norm statistics, as a trained model has
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    return net, (torch.randn(1, 3, 147, 147),)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="inception147.onnx")
    args = ap.parse_args(argv)
    import torch

    net, xs = build()
    with torch.no_grad():
        torch.onnx.export(net, xs, args.out, dynamo=False, input_names=["x"])
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
