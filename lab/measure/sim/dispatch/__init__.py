"""What sim does at each op: the fake tensor mode, and the tensor tracker's policy in sim.

The tracker (lab.measure.tracker) knows no mode; sim hands it `CudaPaths` (policy), which
reroutes ops CUDA runs differently, names what CUDA allocates beside the tensors, and answers
plain dispatch-cache hits of the fake mode directly. A change to how an op is dispatched or
answered goes here. Import the modules themselves:

- policy: `CudaPaths`, the tracker's policy in sim (lab.measure.sim.kernels does the work);
- fake_values: where libraries branch on tensor values fake tensors do not have;
- fake_mode: `SimFakeTensorMode`, FakeTensorMode through its dispatch cache the fast way, and
  `cached_answer`, the tracker's direct answers;
- fast_key, lean_output, unsafe_view, recipes: the steps of that fast path, each checked once
  per process against the stock way (every result the same; only faster).
"""

__all__ = ["fake_mode", "fake_values", "fast_key", "lean_output", "policy", "recipes",
           "unsafe_view"]
