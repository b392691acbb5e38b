"""The simulator (sim mode): fake tensors taking CUDA's code paths, and a model of the caching allocator.

Import the modules themselves; this package's import is light (torch-free), so that the GPU
table (`lab.measure.sim.gpus`) answers the CLI's argument checks without importing torch.
"""
