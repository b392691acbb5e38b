"""What of PyTorch's (and transformers') own code the simulator follows, and where it was read.

Sim takes CUDA's paths by following their rules: each row names the module of lab/measure/sim
that does, the upstream file and functions it was read from, and the version read. Rules, not
copied code (the licence and the lab's size both say so): when upstream changes one of these
files, this table says which module to read again. tests/unit/test_sim_ports.py checks that
every row's module exists and names its upstream file in its docstring, and that every module
that cites an upstream C++ / CUDA file is in the table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Port:
    module: str  # lab/measure/sim/<module>.py ("kernels/sdpa")
    upstream: str  # the file read (pytorch/pytorch unless it says otherwise)
    what: str  # the functions or rules taken from it
    read_in: str  # the version read


PORTS: tuple[Port, ...] = (
    Port("allocator/model", "c10/cuda/CUDACachingAllocator.cpp",
         "round_size, get_pool, get_allocation_size, get_free_block, should_split, "
         "release_cached_blocks, alloc_block, set_per_process_memory_fraction", "torch 2.11"),
    Port("allocator/expandable", "c10/cuda/CUDACachingAllocator.cpp",
         "ExpandableSegment, find_expandable_block, map_block, try_allocate_expandable_block, "
         "unmap_block", "torch 2.11"),
    Port("allocator/release", "c10/cuda/CUDACachingAllocator.cpp",
         "garbage_collect_cached_blocks, release_available_cached_blocks",
         "torch 2.12-2.13 and an older 2.x (the rules agree)"),
    Port("allocator/settings", "c10/core/AllocatorConfig.cpp",
         "PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF parsing: max_split_size_mb, "
         "max_non_split_rounding_mb, roundup_power2_divisions, garbage_collection_threshold",
         "torch 2.12-2.13 and an older 2.x (the rules agree)"),
    Port("allocator/streams", "c10/cuda/CUDACachingAllocator.cpp",
         "recordStream, free, insert_events, process_events, synchronize_and_free_events, "
         "free_block, try_merge_blocks (a block waiting for events is not merged)",
         "torch 2.12-2.13 and an older 2.x (the rules agree)"),
    Port("allocator/stream_trace", "c10/cuda/CUDACachingAllocator.cpp",
         "record_trace's FREE_REQUESTED (free) and FREE_COMPLETED (free_block) entries",
         "torch 2.12-2.13 and an older 2.x (the rules agree)"),
    Port("allocator/view", "c10/cuda/CUDACachingAllocator.cpp",
         "DeviceStats: the memory_stats() keys, memory_snapshot()'s segments", "torch 2.11"),
    Port("kernels/autocast", "aten/src/ATen/autocast_mode.h",
         "CUDA autocast's op lists and policies, the weight-cast cache", "torch 2.11; the op set "
         "from the running torch's AutocastCUDA registrations"),
    Port("kernels/dropout", "aten/src/ATen/native/Dropout.cpp",
         "dropout's device choice: native_dropout's bool mask on CUDA", "torch 2.11"),
    Port("kernels/meta_rules", "aten/src/ATen/native/cuda/GroupedBlas.cpp",
         "_grouped_mm_cuda, create_grouped_gemm_output_tensor (16-byte rows), "
         "_resolve_grouped_mm_out_dtype; _histc_cuda's integer inputs (cuda/SummaryOps.cu)",
         "upstream main (the GPU check: zoo moe/qwen3-moe-bf16 on torch 2.11)"),
    Port("kernels/cudnn_conv", "aten/src/ATen/native/cudnn/Conv_v8.cpp",
         "run_conv_plan (the plan's workspace), generate_and_filter_plans and "
         "get_available_workspace (the search's block: the largest candidate, bounded by "
         "cacheInfo, halved while it fails), CacheKey (what one search is for)",
         "a stored upstream copy of the v8 API path; sizes measured with torch 2.11 + cuDNN 9.19"),
    Port("kernels/offload", "aten/src/ATen/core/CachingHostAllocator.h",
         "the pinned host allocator's power-of-two blocks and cache", "torch 2.x"),
    Port("kernels/reduce", "aten/src/ATen/native/cuda/Reduce.cuh",
         "setReduceConfig, global_memory_size, semaphore_size; TensorIterator's dimension order",
         "Reduce.cuh shipped with torch 2.13 (equal to 2.11's CUDA path), upstream main"),
    Port("kernels/sdpa", "aten/src/ATen/native/transformers/cuda/sdp_utils.cpp",
         "select_sdp_backend for sm90, check_prefer_cudnn_attention", "torch 2.11 + cuDNN 9.19"),
    Port("kernels/sdpa_math", "aten/src/ATen/native/transformers/attention.cpp",
         "_scaled_dot_product_attention_math (CUDA's branches), convert_boolean_attn_mask, "
         "_safe_softmax", "torch 2.11"),
    Port("kernels/fsdp_offload", "torch/distributed/fsdp/_fully_shard/_fsdp_param.py",
         "CPUOffloadPolicy: FSDPParam._init_sharded_param (.cpu(), .pin_memory()), "
         "all_gather_inputs (.to(device) before the all-gather), reset_sharded_param, "
         "FSDPParamGroup's lazy-init checks", "torch 2.13"),
    Port("kernels/fsdp_offload", "torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py",
         "foreach_reduce: the reduce-scattered gradient copied to the host "
         "(non_blocking with pin_memory)", "torch 2.13"),
    Port("kernels/fsdp_offload", "aten/src/ATen/native/TensorConversions.cpp",
         "_to_copy's pin_out: a non-blocking copy from the device to the host is pinned",
         "torch 2.13 (stored copies of torch 2.x agree)"),
    Port("gpus", "aten/src/ATen/cuda/CublasHandlePool.cpp",
         "getChosenWorkspaceSize (cuBLAS's default workspace by compute capability)",
         "torch 2.11"),
    Port("kernels/grad_accumulate", "torch/csrc/autograd/input_buffer.cpp",
         "InputBuffer::accumulate, can_accumulate_inplace", "torch 2.11"),
    Port("dispatch/policy", "aten/src/ATen/cuda/CublasHandlePool.cpp",
         "getCurrentCUDABlasHandle / getCUDABlasLtWorkspace: a workspace per thread",
         "torch 2.11"),
)

__all__ = ["PORTS", "Port"]
