"""The staging buffer and semaphores of CUDA's TensorIterator reductions, for sim.

ATen's CUDA reduction kernel (aten/src/ATen/native/cuda/Reduce.cuh, `gpu_reduce_kernel`) splits
a long reduction across thread blocks when each output has many inputs and there are few
outputs ("global reduce"). The blocks then write partial results to a staging buffer and count
themselves done in an int array (semaphores); both come from the caching allocator after the
output exists and are freed when the op returns (semaphores first: the DataPtrs are destroyed in
reverse order). Examples on the H200: the gradient of a bias or RMSNorm weight, sum over 4096
rows of (4096, 1536) bf16 -> 50,331,648 B + 48 B; `mean()` of 6.3 M fp32 values -> 2,112 B + 4 B.

This is a port of the pieces that decide it, in torch 2.11's order: TensorIterator's dimension
order for a reduction (reduced dims first, then by stride; `reorder_dimensions`), the merging of
adjacent dims (`coalesce_dimensions`), then `setReduceConfig`, `global_memory_size()` and
`semaphore_size()`. Read from the Reduce.cuh shipped with torch 2.13 (its CUDA path equals
the upstream file of the 2.15 development branch except for ROCm branches) and
TensorIterator.cpp / ReduceSumProdKernel.cu of the upstream main branch; the 2.11.0 tag itself
was not available to read. The H200 traces agree to the byte (lesson 05, plain HF loops).

Not modelled: reductions too large for 32-bit indexing (ATen splits them into sub-iterators,
each with its own buffer), which this returns nothing for; reductions other than sum, mean and
vector norms (amax, var, argmax, ... use the same kernel with other accumulator types).
"""

from __future__ import annotations

import torch

from ..gpus import H200, Gpu

# setReduceConfig reads the number of SMs and the threads per SM from the device (a row of
# lab.measure.sim.gpus: the H200 by default, the card the lessons were recorded on); the warp is
# 32 on NVIDIA GPUs, and reductions cap a block at 512 threads (`mnt_wrapper`: 256 for complex
# double), below the device's 1024-thread limit per block.
WARP_SIZE = 32
REDUCE_MAX_THREADS = 512

_INT32_MAX = 2**31 - 1
_FLOAT_ACC = {torch.float16: 4, torch.bfloat16: 4, torch.float32: 4, torch.float64: 8}

_A = torch.ops.aten
# reduction ops that reach gpu_reduce_kernel, and the kernel's input vector size (vt0 = 4 for
# all; sum of a 16-bit input loads 8 at a time: ReduceSumProdKernel.cu `sum_functor`)
_SUM = {_A.sum.default, _A.sum.dim_IntList}
_MEAN = {_A.mean.default, _A.mean.dim}
_NORM = {_A.linalg_vector_norm.default}
OPS = _SUM | _MEAN | _NORM


def _last_pow2(n: int) -> int:
    """floor to a power of two (at least 1), as Reduce.cuh's last_pow2."""
    return max(1, 1 << (int(n).bit_length() - 1)) if n > 0 else 1


def _div_up(a: int, b: int) -> int:
    return -(-a // b)


def reduction_iterator(shape, in_strides, out_strides):
    """TensorIterator's (shape, input strides, output strides) for a reduction, fastest dim
    first: reduced dims (output stride 0) to the front, the rest by stride, then adjacent dims
    merged where the strides allow. Strides in bytes."""
    nd = len(shape)
    perm = list(range(nd - 1, -1, -1))  # start reversed: the last tensor dim iterates fastest
    ops = (out_strides, in_strides)  # operand 0 is the output

    def should_swap(d0, d1) -> int:
        for arg, st in enumerate(ops):
            s0, s1 = st[d0], st[d1]
            if arg == 0 and (s0 == 0) != (s1 == 0):
                return 1 if s1 == 0 else -1
            if s0 == 0 or s1 == 0:
                continue
            if s0 < s1:
                return -1
            if s0 > s1:
                return 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    if nd > 1:  # insertion sort that tolerates ambiguous comparisons
        for i in range(1, nd):
            d1 = i
            for d0 in range(i - 1, -1, -1):
                c = should_swap(perm[d0], perm[d1])
                if c > 0:
                    perm[d0], perm[d1] = perm[d1], perm[d0]
                    d1 = d0
                elif c < 0:
                    break
    sh = [shape[p] for p in perm]
    st = [[s[p] for p in perm] for s in ops]
    if nd <= 1:
        return sh, st[1], st[0]
    prev = 0
    for d in range(1, nd):
        if sh[prev] == 1 or sh[d] == 1 or all(sh[prev] * s[prev] == s[d] for s in st):
            if sh[prev] == 1:
                for s in st:
                    s[prev] = s[d]
            sh[prev] *= sh[d]
        else:
            prev += 1
            if prev != d:
                for s in st:
                    s[prev] = s[d]
                sh[prev] = sh[d]
    n = prev + 1
    return sh[:n], st[1][:n], st[0][:n]


def staging_bytes(shape, in_strides, out_strides, scalar_size: int, arg_size: int,
                  input_vec_size: int = 4, offset_elems: int = 0,
                  gpu: Gpu = H200) -> tuple[int, int]:
    """(buffer, semaphores) bytes gpu_reduce_kernel takes for this reduction; (0, 0) when the
    blocks do not split an output (no global reduce). Strides in bytes, in the tensor's order;
    `offset_elems`: the input's storage offset (the allocator's blocks are 512-aligned)."""
    numel = 1
    for s in shape:
        numel *= s
    if numel == 0:
        return 0, 0
    sh, ist, ost = reduction_iterator(list(shape), list(in_strides), list(out_strides))
    nd = len(sh)
    # can_use_32bit_indexing; else ATen splits into sub-iterators (not modelled)
    if numel > _INT32_MAX or any(1 + sum((n - 1) * s for n, s in zip(sh, st)) > _INT32_MAX
                                 for st in (ist, ost)):
        return 0, 0
    n_reduce = sum(1 for s in ost if s == 0)
    num_outputs = 1
    for n, s in zip(sh, ost):
        if s != 0:
            num_outputs *= n
    num_inputs = numel // num_outputs

    # setReduceConfig: block.x along the fastest dim of the input
    if nd > 0:
        on_fastest = n_reduce == nd or ist[0] < ist[n_reduce]
        if on_fastest:
            dim0, dim1, fastest = num_inputs, num_outputs, ist[0]
        else:
            dim0, dim1, fastest = num_outputs, num_inputs, ist[n_reduce]
    else:
        on_fastest, dim0, dim1, fastest = True, 1, 1, scalar_size
    output_vec = 1
    if fastest == scalar_size:
        if on_fastest and dim0 >= 128 and n_reduce == 1:
            dim0 //= input_vec_size  # vectorize along the input
        elif not on_fastest:  # vectorize along the output: get_output_vec_size
            output_vec = 4
            checks = [offset_elems, sh[n_reduce]]
            checks += [s // scalar_size for j, s in enumerate(ist) if j != n_reduce]
            for n in checks:
                while n % output_vec:
                    output_vec //= 2
            dim0 //= output_vec

    # set_block_dimension
    max_threads = REDUCE_MAX_THREADS // output_vec
    d0 = _last_pow2(dim0) if dim0 < max_threads else max_threads
    d1 = _last_pow2(dim1) if dim1 < max_threads else max_threads
    bw = min(d0, WARP_SIZE)
    bh = min(d1, max_threads // bw)
    bw = min(d0, max_threads // bh)
    num_threads = bw * bh

    step_in, step_out = 1, 1
    block_x_reduce = nd == 0 or on_fastest
    if block_x_reduce:
        step_in *= bw  # split the input across lanes
    else:
        step_out *= bw  # split the outputs across lanes
    min_vpt, max_vpt = 16, 256
    split_warps = _div_up(num_inputs, step_in) >= min(bh * 16, max_vpt)
    if split_warps:
        step_in *= bh
    else:
        step_out *= bh
    grid_x = _div_up(num_outputs // output_vec, step_out)
    target = gpu.sms * (gpu.max_threads_per_sm // num_threads)
    vpt = _div_up(num_inputs, step_in)
    if not (split_warps and vpt >= max_vpt and grid_x <= target):
        return 0, 0
    ctas = max(min(_div_up(target, grid_x), _div_up(vpt, min_vpt)), _div_up(vpt, max_vpt))
    if ctas <= 1:
        return 0, 0
    # global_memory_size(), semaphore_size()
    buffer = arg_size * num_outputs * ctas
    if not block_x_reduce:
        buffer *= bw * output_vec
    return buffer, 4 * grid_x


def _dims(arg, nd: int) -> set[int]:
    if arg is None:
        return set(range(nd))
    if isinstance(arg, int):
        arg = [arg]
    arg = list(arg)
    return set(range(nd)) if not arg else {d % nd for d in arg} if nd else set()


def op_staging(func, args, kwargs, out, gpu: Gpu = H200) -> tuple[int, int]:
    """(buffer, semaphores) for an aten reduction op as CUDA would run it; (0, 0) otherwise."""
    if func not in OPS or not isinstance(out, torch.Tensor):
        return 0, 0
    x = args[0]
    if not isinstance(x, torch.Tensor) or x.dtype not in _FLOAT_ACC or out.dtype not in _FLOAT_ACC:
        return 0, 0
    nd = x.dim()
    if func in _NORM:  # (self, ord=2, dim=None, keepdim=False, *, dtype=None)
        dim = args[2] if len(args) > 2 else kwargs.get("dim")
    elif func in (_A.sum.default, _A.mean.default):
        dim = None
    else:  # sum.dim_IntList / mean.dim (self, dim, keepdim=False, *, dtype=None)
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
    reduced = _dims(dim, nd)
    # the output as the iterator sees it: the result's dims, 0-stride over the reduced ones
    # (keepdim or not; the result itself is contiguous over the kept dims)
    esize = out.element_size()
    kept = [d for d in range(nd) if d not in reduced]
    out_strides = [0] * nd
    if out.dim() == nd:
        for d in kept:
            out_strides[d] = out.stride(d) * esize
    elif out.dim() == len(kept):
        for i, d in enumerate(kept):
            out_strides[d] = out.stride(i) * esize
    else:
        return 0, 0
    # CUDA reduces 16-bit inputs into fp32 outputs in one kernel (make_reduction: no cast
    # copy); the accumulator is fp32 for 16/32-bit floats, double for double
    scalar = x.element_size()
    vec = 8 if func in _SUM and scalar == 2 else 4
    return staging_bytes(list(x.shape), [s * scalar for s in x.stride()], out_strides,
                         scalar, _FLOAT_ACC[x.dtype] if x.dtype != torch.float64 else 8, vec,
                         x.storage_offset(), gpu)
