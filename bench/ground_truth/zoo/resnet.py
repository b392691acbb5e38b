"""Train a ResNet on random images, the torchvision way, in plain torch (no torchvision).

    python resnet.py --depth 50 --batch 128 --steps 3
    python resnet.py --depth 50 --batch 128 --bf16 --channels-last

The network is torchvision's `resnet50` / `resnet101` (Bottleneck blocks [3, 4, 6, 3] /
[3, 4, 23, 3], BatchNorm, zero-init of nothing, 1000 classes), written out because torchvision
wheels are built for one torch only; the loop is the ImageNet example's: SGD with momentum and
weight decay, cross-entropy, `cudnn.benchmark = True`; `--bf16` wraps forward and loss in
autocast, `--channels-last` converts the model and each batch to NHWC.
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext

import torch
import torch.nn as nn
import torch.nn.functional as F


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, layers: list[int], num_classes: int = 1000, width: int = 64):
        super().__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._make_layer(width, layers[0])
        self.layer2 = self._make_layer(width * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(width * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(width * 8, layers[3], stride=2)
        self.fc = nn.Linear(width * 8 * Bottleneck.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _make_layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * 4:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes * 4, 1, stride=stride,
                                                 bias=False), nn.BatchNorm2d(planes * 4))
        layers = [Bottleneck(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * 4
        layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):  # (B, 3, H, W) -> (B, classes)
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


DEPTHS = {50: [3, 4, 6, 3], 101: [3, 4, 23, 3], 152: [3, 8, 36, 3]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depth", type=int, default=50, choices=[50, 101, 152])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--bf16", action="store_true", help="autocast forward and loss to bfloat16")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="width 8, 32x32 images (a CPU dry run)")
    args = ap.parse_args()

    device = torch.device(args.device)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = ResNet(DEPTHS[args.depth], width=8 if args.tiny else 64)
    model = model.to(device)
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    if args.channels_last:  # NHWC weights and activations (the Tensor Cores' layout)
        model = model.to(memory_format=memory_format)
    criterion = nn.CrossEntropyLoss().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    size = 32 if args.tiny else args.image
    images = torch.randn(args.batch, 3, size, size)  # a batch from the data loader, on the CPU
    target = torch.randint(0, 1000, (args.batch,))
    autocast = (torch.autocast(device.type, dtype=torch.bfloat16) if args.bf16
                else nullcontext())
    model.train()
    for step in range(args.steps):
        x = images.to(device, non_blocking=True, memory_format=memory_format)
        y = target.to(device, non_blocking=True)
        with autocast:
            loss = criterion(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step}: loss {loss.item():.4f}")
    if device.type == "cuda":
        print(f"max allocated {torch.cuda.max_memory_allocated() / 1e9:.3f} GB, "
              f"max reserved {torch.cuda.max_memory_reserved() / 1e9:.3f} GB")


if __name__ == "__main__":
    main()
