"""GPUs as data: one row per card (memory, SMs, cuBLAS workspaces, compute capability), and
what PyTorch's caching allocator may reserve on it: `--gpu-memory SIZE` or `--gpu CARD`.

Sim stands for one of these rows. The H200 row is validated (every lesson recorded on it, the
simulator checked against those recordings), and so is the H100's: 52 lesson variants recorded on
an H100 80GB HBM3 hold the H200's memory to the byte (same SMs, same workspaces; its total is
measured too). The others are read from published specs and the rules of PyTorch's code, and a
result made with one says "unvalidated". What a row feeds:
`sms` and `max_threads_per_sm` (CUDA reductions' launch configuration, lab.measure.sim.
kernels.reduce), the cuBLAS / cuBLASLt workspaces each thread that runs a matmul takes
(lab.measure.sim.dispatch.policy), `total_bytes` (the allocator model's device), `capability` (what
`torch.cuda.get_device_capability` answers under the CUDA facade).

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
H100_TOTAL = 85_017_493_504  # measured likewise, on an H100 80GB HBM3 (nvidia-smi: 81559 MiB)
# NVML used - max reserved on the H200 (lesson 17's runs and bench/h200_ground_truth.py's
# session): 1.20-1.29 GB; the upper end is what every preset keeps
CONTEXT_BYTES = 1_290_000_000
# where CUDA's total is not published for a card, nvidia-smi's total minus the largest gap seen
# between the two (A100 80GB PCIe: 81920 - 81049 MiB), so the total is never overstated
DRIVER_GAP_MIB = 871


# cuBLAS's default workspace per handle (at::cuda::getChosenWorkspaceSize, CublasHandlePool.cpp,
# torch 2.11): ":4096:8" on sm90 and newer (8 x 4 MiB), ":4096:2:16:8" before (2 x 4 MiB + 8 x 16
# KiB); CUBLAS_WORKSPACE_CONFIG changes it. cuBLASLt: CUBLASLT_WORKSPACE_SIZE, default 1024 KiB.
CUBLAS_WORKSPACE_SM90 = 8 * 4096 * 1024
CUBLAS_WORKSPACE_OLDER = 2 * 4096 * 1024 + 8 * 16 * 1024
CUBLASLT_WORKSPACE = 1024 * 1024


@dataclass(frozen=True)
class Gpu:
    key: str  # what --gpu takes
    name: str
    total_bytes: int  # what CUDA reports (total_memory)
    source: str  # where total_bytes comes from
    sms: int  # streaming multiprocessors (cudaDeviceProp.multiProcessorCount)
    max_threads_per_sm: int  # cudaDeviceProp.maxThreadsPerMultiProcessor
    capability: tuple[int, int]  # compute capability (major, minor)
    device_name: str  # what torch.cuda.get_device_name() returns on it
    validated: bool = False  # sim checked against recordings made on this card

    @property
    def cublas_workspace_bytes(self) -> int:
        return CUBLAS_WORKSPACE_SM90 if self.capability >= (9, 0) else CUBLAS_WORKSPACE_OLDER

    @property
    def cublaslt_workspace_bytes(self) -> int:
        return CUBLASLT_WORKSPACE

    @property
    def context_bytes(self) -> int:
        """The CUDA context and libraries' share of the card (the H200's measured upper bound)."""
        return CONTEXT_BYTES

    @property
    def limit_bytes(self) -> int:
        """What the caching allocator may reserve: total minus the context and libraries."""
        return self.total_bytes - CONTEXT_BYTES


def _smi(mib: int) -> int:
    return (mib - DRIVER_GAP_MIB) * MiB


# SM counts and threads per SM: NVIDIA's published specifications (the CUDA C++ Programming
# Guide's compute-capability table for threads per SM)
GPUS: dict[str, Gpu] = {g.key: g for g in (
    Gpu("t4", "NVIDIA T4 16 GB", 15_843_721_216, "deviceQuery: 15110 MiB, ECC on",
        40, 1024, (7, 5), "Tesla T4"),
    Gpu("l4", "NVIDIA L4 24 GB", _smi(23034), "nvidia-smi 23034 MiB minus 871 MiB",
        58, 1536, (8, 9), "NVIDIA L4"),
    Gpu("rtx4090", "NVIDIA GeForce RTX 4090 24 GB", _smi(24564),
        "nvidia-smi 24564 MiB minus 871 MiB", 128, 1536, (8, 9), "NVIDIA GeForce RTX 4090"),
    Gpu("a100-40gb", "NVIDIA A100 40 GB", 42_298_834_944,
        "deviceQuery: 40339 MiB, the lowest total seen", 108, 2048, (8, 0),
        "NVIDIA A100-SXM4-40GB"),
    Gpu("a100-80gb", "NVIDIA A100 80 GB", 81049 * MiB, "CUDA: 81049 MiB, PCIe card",
        108, 2048, (8, 0), "NVIDIA A100 80GB PCIe"),
    # measured: total_memory of an H100 80GB HBM3 (torch 2.11, the device tool's), and the memory
    # of 52 lesson variants recorded on it equal to the H200's to the byte (every allocator
    # counter; NVML's used bytes 0.14 GB lower): assets/ground_truth/h100_lessons.json
    Gpu("h100", "NVIDIA H100 80 GB", H100_TOTAL, "measured on an H100 80GB HBM3",
        132, 2048, (9, 0), "NVIDIA H100 80GB HBM3", validated=True),
    Gpu("h200", "NVIDIA H200 141 GB", H200_TOTAL, "measured on the lab's H200",
        132, 2048, (9, 0), "NVIDIA H200", validated=True),
)}
H200 = GPUS["h200"]  # the card the lessons were recorded on, and what sim stands for by default
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


__all__ = ["ALIASES", "CONTEXT_BYTES", "GPUS", "Gpu", "H200", "H200_TOTAL", "gpu"]
