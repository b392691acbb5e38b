"""Train a UNet for segmentation on random images: the classic Ronneberger layout in plain torch.

    python unet.py --batch 16 --image 512 --bf16 --steps 3

Four downsampling stages of two 3x3 conv + BatchNorm + ReLU (64 -> 1024 channels), transposed
convolutions up, skip connections concatenated; per-pixel cross-entropy over `--classes`;
AdamW; `--bf16` autocasts forward and loss; `--channels-last` converts model and inputs.
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext

import torch
import torch.nn as nn
import torch.nn.functional as F


class DoubleConv(nn.Sequential):
    def __init__(self, cin: int, cout: int):
        super().__init__(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True), nn.Conv2d(cout, cout, 3, padding=1, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class Up(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.up = nn.ConvTranspose2d(cin, cin // 2, 2, stride=2)
        self.conv = DoubleConv(cin, cout)

    def forward(self, x, skip):
        return self.conv(torch.cat([skip, self.up(x)], dim=1))


class UNet(nn.Module):
    def __init__(self, in_channels: int = 3, classes: int = 2, width: int = 64):
        super().__init__()
        w = [width * 2**i for i in range(5)]  # 64, 128, 256, 512, 1024
        self.inc = DoubleConv(in_channels, w[0])
        self.downs = nn.ModuleList(DoubleConv(w[i], w[i + 1]) for i in range(4))
        self.ups = nn.ModuleList(Up(w[i + 1], w[i]) for i in reversed(range(4)))
        self.outc = nn.Conv2d(w[0], classes, 1)

    def forward(self, x):  # (B, C, H, W) -> (B, classes, H, W)
        skips = [self.inc(x)]
        for down in self.downs:
            skips.append(down(F.max_pool2d(skips[-1], 2)))
        x = skips.pop()
        for up in self.ups:
            x = up(x, skips.pop())
        return self.outc(x)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--image", type=int, default=512)
    ap.add_argument("--classes", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="width 8, 32x32 images (a CPU dry run)")
    args = ap.parse_args()

    device = torch.device(args.device)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    model = UNet(classes=args.classes, width=8 if args.tiny else 64).to(device)
    if args.channels_last:
        model = model.to(memory_format=fmt)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    size = 32 if args.tiny else args.image
    for step in range(args.steps):
        x = torch.randn(args.batch, 3, size, size, device=device).contiguous(memory_format=fmt)
        mask = torch.randint(0, args.classes, (args.batch, size, size), device=device)
        with torch.autocast(device.type, dtype=torch.bfloat16) if args.bf16 else nullcontext():
            loss = F.cross_entropy(model(x), mask)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
