"""The CUDA facade: a user's unmodified CUDA script, run in sim (`memlab profile --mode sim`).

What a script's `torch.cuda` calls, `cuda` tensors and library calls meet in sim goes here; what
the ops allocate is the rest of sim. Import the modules themselves:

- cuda_facade: `CudaFacade`, the one context manager, and `INTERCEPTED`, its table of patches
  (docs/SIMULATION.md renders it);
- runtime: torch.cuda / torch.accelerator answered from the card's row (streams, events, RNG);
- calls: the script's calls into torch's libraries (autocast, GradScaler, save/load, DataLoader);
- placement: where tensors land (a TorchFunctionMode: the GPU's fake, the host's real);
- memory_api: torch.cuda's allocator API answered by the allocator model (also in lessons' runs);
- script_values: stand-in values, and what the result must say the script did.
"""

__all__ = ["calls", "cuda_facade", "memory_api", "placement", "runtime", "script_values"]
