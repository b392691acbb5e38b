"""What PyTorch's caching allocator may reserve on a GPU: `--gpu-memory SIZE` or `--gpu CARD`.

Two ways to say how big the GPU is, and what each means for the allocator (torch-free):

- `--gpu-memory 16GiB`: an H200 capped with `torch.cuda.set_per_process_memory_fraction(16 GiB /
  total)`, as the lessons and bench/h200_ground_truth.py do. The cap counts what the allocator
  *reserves* (its segments); the CUDA context and the libraries' code live outside the cap (on
  the H200 they took 1.20-1.29 GB, NVML used minus reserved). So the whole SIZE is the
  allocator's, and that is the limit a prediction uses.
- `--gpu T4` (a preset): the whole card, no fraction. The context and libraries take their share
  *inside* the card's memory, so the allocator gets: the memory CUDA reports
  (`torch.cuda.get_device_properties().total_memory`, below the marketing size: ECC and the
  driver keep some) minus the context. For the context we assume the H200's measured upper bound
  for every card: it is mostly the code CUDA loads (PyTorch's, cuBLAS's, cuDNN's kernels), which
  depends on the torch/CUDA build more than on the card, plus per-SM reservations that are smaller
  on cards with fewer SMs than the H200's 132, so the assumption errs on the safe side. A card
  that also drives a desktop loses what the desktop holds too (nvidia-smi lists it).
"""

from __future__ import annotations

from dataclasses import dataclass

MiB = 2**20
H200_TOTAL = 150_109_880_320  # measured: torch.cuda.get_device_properties(0).total_memory
# NVML used - max reserved on the H200 (lesson 17's runs and bench/h200_ground_truth.py's
# session): 1.20-1.29 GB; the upper end is what every preset keeps
CONTEXT_BYTES = 1_290_000_000
# where CUDA's total is not published for a card, nvidia-smi's total minus the largest gap seen
# between the two (A100 80GB PCIe: 81920 - 81049 MiB), so the total is never overstated
DRIVER_GAP_MIB = 871


@dataclass(frozen=True)
class Gpu:
    key: str  # what --gpu takes
    name: str
    total_bytes: int  # what CUDA reports (total_memory)
    source: str  # where total_bytes comes from
    # what torch.cuda.get_device_properties() says of the card (the vendor's published specs):
    # the compute capability and the number of SMs. Sim's CUDA paths were validated on the H200
    # (sm90, 132 SMs) only: other cards' results say "unvalidated"
    capability: tuple[int, int] = (9, 0)
    sms: int = 132
    validated: bool = False

    @property
    def device_name(self) -> str:
        """The name CUDA reports (`get_device_name()`): without the memory size."""
        words = self.name.split()
        return " ".join(words[:-2]) if len(words) > 2 and words[-1] == "GB" else self.name

    @property
    def limit_bytes(self) -> int:
        """What the caching allocator may reserve: total minus the context and libraries."""
        return self.total_bytes - CONTEXT_BYTES


def _smi(mib: int) -> int:
    return (mib - DRIVER_GAP_MIB) * MiB


GPUS: dict[str, Gpu] = {g.key: g for g in (
    Gpu("t4", "NVIDIA T4 16 GB", 15_843_721_216, "deviceQuery: 15110 MiB, ECC on",
        capability=(7, 5), sms=40),
    Gpu("l4", "NVIDIA L4 24 GB", _smi(23034), "nvidia-smi 23034 MiB minus 871 MiB",
        capability=(8, 9), sms=58),
    Gpu("rtx4090", "NVIDIA GeForce RTX 4090 24 GB", _smi(24564),
        "nvidia-smi 24564 MiB minus 871 MiB", capability=(8, 9), sms=128),
    Gpu("a100-40gb", "NVIDIA A100 40 GB", 42_298_834_944,
        "deviceQuery: 40339 MiB, the lowest total seen", capability=(8, 0), sms=108),
    Gpu("a100-80gb", "NVIDIA A100 80 GB", 81049 * MiB, "CUDA: 81049 MiB, PCIe card",
        capability=(8, 0), sms=108),
    Gpu("h100", "NVIDIA H100 80 GB", _smi(81559), "nvidia-smi 81559 MiB minus 871 MiB",
        capability=(9, 0), sms=132),
    Gpu("h200", "NVIDIA H200 141 GB", H200_TOTAL, "measured on the lab's H200",
        capability=(9, 0), sms=132, validated=True),
)}
ALIASES = {"4090": "rtx4090", "a100": "a100-80gb", "a100-40": "a100-40gb", "a100-80": "a100-80gb",
           "h100-80gb": "h100", "h200-141gb": "h200", "a10040gb": "a100-40gb",
           "a10080gb": "a100-80gb"}


def gpu(key: str) -> Gpu:
    """The preset `key` names (case and separators ignored), or ValueError listing them."""
    k = key.strip().lower().replace("_", "-").replace(" ", "-")
    k = ALIASES.get(k, ALIASES.get(k.replace("-", ""), k))
    if k not in GPUS:
        raise ValueError(f"no GPU preset {key!r}; the presets: {', '.join(GPUS)}")
    return GPUS[k]


__all__ = ["ALIASES", "CONTEXT_BYTES", "GPUS", "Gpu", "H200_TOTAL", "gpu"]
