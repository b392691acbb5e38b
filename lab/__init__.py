"""GPU Memory Lab: see how PyTorch uses GPU memory, by measuring it."""

__version__ = "0.1.0"
