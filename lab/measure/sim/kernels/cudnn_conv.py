"""cuDNN's convolution workspaces, for sim: the plan's own, and the benchmark's search.

On CUDA, `F.conv2d` and its backward run cuDNN plans through PyTorch's v8 API
(aten/src/ATen/native/cudnn/Conv_v8.cpp, torch 2.11). Beside its tensors each call takes:

- **the plan's workspace** (`run_conv_plan`): allocated after the output, freed when the call
  returns, on every call; if it cannot be had, the next plan is tried (`try_plans`,
  `try_configs` catch the out-of-memory), so it never fails the run;
- **the search's workspace** when `torch.backends.cudnn.benchmark = True`, at the first call of
  each shape, dtype, layout and direction (forward, grad-input, grad-weight; the plan is then
  cached): `generate_and_filter_plans` allocates ONE block as large as the largest candidate
  plan needs, bounded by the largest block it could get (the device's free memory or the
  largest cached block), and halves it while the allocation fails. Every candidate is timed in
  it, then it is freed and the fastest plan runs with its own workspace;
- **the allocator's cache emptied** after each search (`run_single_conv`: "Replicate v7
  behavior: clear cached blocks", `emptyCache()` while `_cudnn_get_conv_benchmark_empty_cache()`,
  True by default): every cached segment that holds no live block goes back to the driver, the
  search's own among them. Without it, sim's ResNet-50 kept a 2.3 GB searched segment beside
  the 5.8 GB block that followed, and reserved 15 % more than the H100.

Neither size is something a CPU build can ask cuDNN, so these are rules measured on an H100 80GB
HBM3 (torch 2.11.0+cu130, cuDNN 9.19) by `bench/ground_truth/conv_workspace.py table`: each
convolution of the zoo's CNNs alone, the allocator's peak above its tensors, per direction
(assets/ground_truth/cnn_workspace_gpu.json). The constants were fitted on the tune half's rows
(cnn/resnet50-fp32, NCHW, batch 128; cnn/resnet50-bf16-cl) and checked on the held-out half's
(cnn/resnet101-fp32-cl, batch 64; cnn/unet-bf16): `python bench/conv_workspace_rules.py` prints
both. With X, O, W the bytes of input, output and weight:

- **Plan, channels-first (NCHW)**: X + O + W for every convolution but a pointwise one (1x1,
  stride 1, no padding), in every direction: the tensor-core kernels work in NHWC, so the plan
  converts all three. A pointwise one is a plain GEMM on NCHW: none. Channels-last: none.
- **Plan, grad-weight, any layout**: beside that, fp32 partial sums of the weight gradient W32
  (K*C*kh*kw*4 bytes): 14 of them in fp32, 13 in 16-bit (split-K), up to 8 MiB; for a
  channels-first pointwise one, one per image (N) up to 128 MiB. Small, but more than zero
  matters: the grad-weight's workspace is then larger than the grad-input's freed just before,
  so it cannot always reuse that block (the held-out UNet's reserved memory was 9.7 % short
  without them; docs/ACCURACY.md shows how it turns on a few KiB of them).
- **Search, any dtype**: the grad-input's candidates include a layout-converting one (X + O + W),
  in either layout; a channels-first grad-weight's too.
- **Search, fp32** (TF32 allowed, PyTorch's default), whose candidates include cuDNN's FFT
  engines, of which the bf16 rows show none (fp16 was not measured; it takes the bf16 rules):
  - grad-input of a 3x3 stride-1 convolution whose padded input fits one 32x32 tile: FFT
    tiling, (N*C + N*K + K*C) * 32*17*8 bytes (a complex fp32 spectrum per image-channel, per
    gradient-channel and per filter), plus the layout conversion in channels-last;
  - grad-input of a 3x3 stride-2 convolution: X + O + W + 17,392 B per filter (K*C) + 11,004 B
    per image-channel (N*(C+K));
  - grad-weight of a stride-1 convolution on inputs up to 16x16: X + O + W + 2,304 B per filter
    (two 16x16 complex spectra).

Not modelled (the result's note says so): grouped and depthwise convolutions, 1-D and 3-D ones,
dilation, transposed convolutions' fp32 search, fp32 grad-weight searches on inputs larger than
16x16 (the tune rows show 0.6 to 1.9 GB at 28x28 and 56x56 that no two-term rule carries to
another batch size), and cards other than the H100 / H200's sm90 (the rules are applied there
unverified).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Hashable, NamedTuple

import torch

from lab.report.units import format_bytes

from ...tracker import user_frame
from ..allocator.replay import Bounded

_A = torch.ops.aten
CONVOLUTION = _A.convolution.default
CONVOLUTION_BACKWARD = _A.convolution_backward.default
OPS = frozenset({CONVOLUTION, CONVOLUTION_BACKWARD})

FORWARD, GRAD_INPUT, GRAD_WEIGHT = "forward", "grad_input", "grad_weight"
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# the fp32 FFT-family candidates (see the module docstring), bytes: the spectra's sizes as the
# tune rows match them exactly, and the strided grad-input's two terms fitted on those rows
FFT_TILE_SPECTRUM = 32 * 17 * 8  # a 32x32 real FFT: 32 x 17 complex fp32
FFT16_FILTER = 2 * 16 * 9 * 8  # two 16x16 real FFTs per filter
STRIDED_GRAD_INPUT_PER_FILTER = 17_392
STRIDED_GRAD_INPUT_PER_CHANNEL = 11_004
# a grad-weight plan's fp32 partial sums (_weight_partials), as the tune rows show them: 14 in
# fp32 (TF32) and 13 in 16-bit (the channels-last bf16 rows: a channels-first plan runs the
# same NHWC kernels after converting), at most 8 MiB
SPLIT_K_PARTIALS = {torch.float32: 14, torch.bfloat16: 13, torch.float16: 13}
SPLIT_K_PARTIALS_CAP = 8 * 2**20
PER_IMAGE_PARTIALS_CAP = 128 * 2**20


@dataclass(frozen=True)
class Convolution:
    """One cuDNN call: which direction, the conv's shape and how its tensors lie in memory."""

    direction: str
    n: int
    c: int  # input channels
    k: int  # output channels
    h: int  # input height, width
    w: int
    kh: int
    kw: int
    stride: tuple
    padding: tuple
    dtype: torch.dtype
    channels_last: bool
    x_bytes: int
    out_bytes: int
    w_bytes: int
    transposed: bool = False  # seen as its convolution's other direction (see `calls`)

    @property
    def layout(self) -> int:
        return self.x_bytes + self.out_bytes + self.w_bytes

    @property
    def pointwise(self) -> bool:
        return (self.kh, self.kw) == (1, 1) and set(self.stride) == {1} and set(self.padding) == {0}

    def key(self) -> tuple:
        """What PyTorch's benchmark cache tells plans apart by (CacheKeyWrapper, less alignment)."""
        return (self.direction, self.n, self.c, self.k, self.h, self.w, self.kh, self.kw,
                self.stride, self.padding, self.dtype, self.channels_last)


class Step(NamedTuple):
    """One thing a cuDNN call does to the allocator beside its tensors: a workspace of `nbytes`
    (0: none) taken and given back, then, if `then_empty_cache`, the cache emptied."""

    key: Hashable
    nbytes: int
    then_empty_cache: bool = False


def plan_workspace(conv: Convolution) -> int:
    """The workspace of the plan that runs (every call)."""
    converts = not (conv.channels_last or conv.pointwise)
    return (conv.layout if converts else 0) + _weight_partials(conv)


def _weight_partials(conv: Convolution) -> int:
    """A grad-weight plan's fp32 partial sums of the weight gradient, beside any layout
    conversion: one per image for a channels-first pointwise one (a GEMM per image, then their
    sum), up to 128 MiB; otherwise 14 in fp32 and 13 in 16-bit (split-K), up to 8 MiB."""
    if conv.direction != GRAD_WEIGHT:
        return 0
    weight_fp32 = conv.k * conv.c * conv.kh * conv.kw * 4
    if conv.pointwise and not conv.channels_last:
        return min(conv.n * weight_fp32, PER_IMAGE_PARTIALS_CAP)
    return min(SPLIT_K_PARTIALS[conv.dtype] * weight_fp32, SPLIT_K_PARTIALS_CAP)


def search_workspace(conv: Convolution) -> int:
    """The block the benchmark's search takes at the first call of `conv`'s key (before the
    device's free memory bounds it)."""
    candidates = [plan_workspace(conv)]
    if conv.direction == GRAD_INPUT or (conv.direction == GRAD_WEIGHT and not conv.channels_last):
        candidates.append(conv.layout)
    if conv.dtype == torch.float32 and not conv.transposed:  # unmeasured for a transposed one
        candidates.append(_fft_family(conv))
    return max(candidates)


def _fft_family(conv: Convolution) -> int:
    filters, n, c, k = conv.k * conv.c, conv.n, conv.c, conv.k
    square3 = (conv.kh, conv.kw) == (3, 3)
    if conv.direction == GRAD_INPUT and square3 and conv.stride == (1, 1):
        if conv.h + 2 * conv.padding[0] <= 32 and conv.w + 2 * conv.padding[1] <= 32:
            tiled = (n * c + n * k + filters) * FFT_TILE_SPECTRUM
            return tiled + (conv.layout if conv.channels_last else 0)
    if conv.direction == GRAD_INPUT and square3 and conv.stride == (2, 2):
        return (conv.layout + STRIDED_GRAD_INPUT_PER_FILTER * filters
                + STRIDED_GRAD_INPUT_PER_CHANNEL * n * (c + k))
    if conv.direction == GRAD_WEIGHT and conv.stride == (1, 1) and max(conv.h, conv.w) <= 16:
        return conv.layout + FFT16_FILTER * filters
    return 0


def _channels_last(t: torch.Tensor) -> bool:
    """cudnn_conv_suggest_memory_format's reading of one tensor: NHWC strides, where they are
    not also plain contiguous ones (a tensor both ways, as C=1, counts as contiguous)."""
    return (t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last)
            and not t.is_contiguous())


def _nbytes(t) -> int:
    return prod(t.shape) * t.element_size()


def calls(func, args, kwargs, out) -> tuple[list[Convolution], str | None]:
    """The cuDNN calls of one `aten.convolution` / `convolution_backward`, in the GPU's order,
    and, where the call is one these rules do not cover, why (None when covered)."""
    get = (lambda i, name, default=None: args[i] if len(args) > i else kwargs.get(name, default))
    if func is CONVOLUTION:
        x, weight = get(0, "input"), get(1, "weight")
        stride, padding, dilation = get(3, "stride"), get(4, "padding"), get(5, "dilation")
        transposed, groups = get(6, "transposed"), get(8, "groups")
        y, directions = out, (FORWARD,)
    else:
        y, x, weight = get(0, "grad_output"), get(1, "input"), get(2, "weight")
        stride, padding, dilation = get(4, "stride"), get(5, "padding"), get(6, "dilation")
        transposed, groups, mask = get(7, "transposed"), get(9, "groups"), get(10, "output_mask")
        directions = tuple(d for d, on in zip((GRAD_INPUT, GRAD_WEIGHT), mask) if on)
    if x.dim() != 4:
        return [], f"{x.dim() - 2}-D convolutions"
    if groups != 1:
        return [], "grouped and depthwise convolutions"
    if any(d != 1 for d in dilation):
        return [], "dilated convolutions"
    if x.dtype not in _DTYPES:
        return [], f"{x.dtype} convolutions"
    if transposed:  # cuDNN runs a transposed forward as the convolution's grad-input, and so on
        swap = {FORWARD: GRAD_INPUT, GRAD_INPUT: FORWARD, GRAD_WEIGHT: GRAD_WEIGHT}
        directions = tuple(swap[d] for d in directions)
        x, y = y, x
    n, c, h, w = x.shape
    k, _, kh, kw = weight.shape  # a transposed one's weight is its convolution's (K, C, kh, kw)
    cl = _channels_last(x) or _channels_last(weight)
    found = [Convolution(d, n, c, k, h, w, kh, kw, tuple(stride), tuple(padding), x.dtype, cl,
                         _nbytes(x), _nbytes(y), _nbytes(weight), bool(transposed))
             for d in directions]
    return found, ("transposed convolutions' fp32 search" if transposed and x.dtype == torch.float32
                   else None)


class CudnnConvolutions:
    """Per run: the keys the benchmark already searched (PyTorch's benchmark cache), and what
    the result's note says: how many calls, where the first was, the largest search, and what
    the run did that the rules do not cover."""

    def __init__(self):
        self.searched: set[tuple] = set()
        self.uncovered: set[str] = set()
        self.calls = 0
        self.first_site = ""
        self.largest_search = 0
        # torch._C._cudnn_set_conv_benchmark_empty_cache (True by default), as a script sets it
        self.empty_cache_after_search = True

    def transients(self, func, args, kwargs, out) -> list[Step]:
        """The workspaces the call takes, in order, each freed before the next, and where the
        cache is emptied. Both keys are `Bounded`: neither ever fails the run. The search's
        block is bounded by the free memory, and a plan whose workspace cannot be had is passed
        over for the next (try_plans / try_configs catch the out-of-memory), so sim takes what
        fits."""
        if not torch.backends.cudnn.enabled:
            return []
        if not self.calls:
            self.first_site = user_frame()
        self.calls += 1
        convs, why = calls(func, args, kwargs, out)
        if why:
            self.uncovered.add(why)
        benchmark = torch.backends.cudnn.benchmark
        taken = []
        for conv in convs:
            if benchmark and conv.key() not in self.searched:
                self.searched.add(conv.key())
                n = search_workspace(conv)
                self.largest_search = max(self.largest_search, n)
                # emptied after every search, whether or not it took a block
                taken.append(Step(Bounded(("cudnn search", conv.direction)), n,
                                  self.empty_cache_after_search))
            n = plan_workspace(conv)
            if n:  # a plan whose workspace can't be had is passed over for the next one
                taken.append(Step(Bounded(("cudnn workspace", conv.direction)), n))
        return taken

    def note(self, gpu: str, measured_on_card: bool) -> str | None:
        """What the result says about the run's convolutions (None: it had none)."""
        if not self.calls:
            return None
        where = f", the first at {self.first_site}" if self.first_site else ""
        count = f"{self.calls:,} call{'s' if self.calls != 1 else ''}"
        text = (f"convolutions ({count}{where}): cuDNN's workspaces follow "
                "rules measured on an H100 (cuDNN 9.19): a channels-first convolution's plan "
                "converts its input, output and weight to NHWC in a workspace of their size, "
                "taken and freed inside the call")
        if self.searched:
            text += (f"; torch.backends.cudnn.benchmark = True: the first call of each shape and "
                     f"direction ({len(self.searched):,} here) also takes the search's block, as "
                     "large as cuDNN's largest candidate plan needs (the largest here "
                     f"{format_bytes(self.largest_search)})")
            text += (", then empties the allocator's cache as torch.cuda.empty_cache() does"
                     if self.empty_cache_after_search else
                     ", and the script turned off the emptying of the cache that follows it "
                     "(torch._C._cudnn_set_conv_benchmark_empty_cache(False))")
        text += (". Max allocated follows them closely; max reserved less so, as a few KiB "
                 "of workspace can decide whether a block is reused or a segment added "
                 "(docs/ACCURACY.md measures both)")
        if self.uncovered:
            text += (". Not covered by the rules (their workspaces are missing): "
                     + ", ".join(sorted(self.uncovered)))
        if not measured_on_card:
            text += f". The rules are unverified on the {gpu}"
        return text + "."


__all__ = ["CONVOLUTION", "CONVOLUTION_BACKWARD", "Convolution", "CudnnConvolutions", "OPS",
           "Step", "calls", "plan_workspace", "search_workspace"]
