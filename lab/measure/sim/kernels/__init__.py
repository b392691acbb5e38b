"""CUDA's code paths, taken by sim's CPU-device fake tensors where the CPU's would differ.

Each module follows one piece of PyTorch's CUDA code (lab.measure.sim.ports says which file and
version) so that a fake run allocates what the GPU run would. A new "CUDA does X differently"
goes here, and into the tracker's policy (lab.measure.sim.dispatch.policy) when it changes
what an op allocates. Import the modules themselves:

- autocast: CUDA autocast's op lists and weight-cast cache;
- sdpa, sdpa_math: the attention kernel CUDA picks, its saved tensors and scratch; the math
  backend's CUDA branches and `_safe_softmax`;
- dropout: the fused kernel's bool mask;
- optim: the foreach implementation optimizers left at their default take on CUDA;
- reduce: the staging buffer and semaphores of long reductions (Reduce.cuh);
- cudnn_conv: cuDNN's convolution workspaces (the plan's, and the benchmark search's block);
- grad_accumulate: gradients summed in place, as on real tensors (a run without the tracker);
- offload: saved tensors in pinned host memory (`save_on_cpu`), the pinned host allocator;
- fsdp_offload: FSDP2's CPUOffloadPolicy.
"""

__all__ = ["autocast", "cudnn_conv", "dropout", "fsdp_offload", "grad_accumulate", "offload",
           "optim", "reduce", "sdpa", "sdpa_math"]
