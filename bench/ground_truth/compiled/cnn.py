"""Train a ResNet-18-style CNN on random images, eagerly or under `torch.compile` (no lab code).

    python cnn.py --batch 64 --image 224 --compile default [--bf16]

torchvision's `resnet18` layout (BasicBlocks [2, 2, 2, 2], BatchNorm, 1000 classes) written out
in plain torch (torchvision wheels are built for one torch only); SGD with momentum and weight
decay, cross-entropy, `--bf16` wraps forward and loss in autocast. `--compile default` is
`torch.compile(model)`; `off` is the eager twin. `cudnn.benchmark` stays off (its algorithm
search would depend on what else runs on the GPU). Part of memlab's ground truth for compiled
scripts (bench/ground_truth/cases.py, suite `compiled`).
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, inplanes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride=stride,
                                                      bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + identity)


class ResNet18(nn.Module):
    def __init__(self, num_classes: int = 1000, width: int = 64):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        layers, inplanes = [], width
        for i, planes in enumerate([width, width * 2, width * 4, width * 8]):
            stride = 1 if i == 0 else 2
            layers += [BasicBlock(inplanes, planes, stride), BasicBlock(planes, planes)]
            inplanes = planes
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(inplanes, num_classes)

    def forward(self, x):  # (B, 3, H, W) -> (B, classes)
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--compile", default="off", choices=["off", "default"])
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    torch.manual_seed(0)
    dev = torch.device(args.device)
    model = ResNet18(width=args.width).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    if args.compile == "default":
        model = torch.compile(model)
    amp = torch.autocast(dev.type, dtype=torch.bfloat16) if args.bf16 else nullcontext()
    for step in range(args.steps):
        images = torch.randn(args.batch, 3, args.image, args.image, device=dev)
        labels = torch.randint(0, 1000, (args.batch,), device=dev)
        with amp:
            loss = F.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
