"""`python -m lab.runner.worker REQUEST_JSON`: measure one variant and stream JSON lines.
`python -m lab.runner.worker --warm`: import first, say "ready", then read ONE request on stdin.

One process per variant: a fresh CUDA context and a clean caching allocator for every
measurement, and a crash, hang or OOM stays in this process. A warm worker only moves the
imports (torch, transformers, the lab's measure code) before the request; it never touches
CUDA before it knows its request, and it is never reused. Most warm workers are forks of a
zygote that did those imports once (lab.runner.zygote) and take this same `--warm` path.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading


BACKGROUND_NICE = 10  # RunRequest.background: below the run the learner waits for


def _open_protocol_stream():
    """Keep the real stdout for protocol lines; send fd 1 (prints, C++ logs) to stderr."""
    fd = os.dup(1)
    proto = os.fdopen(fd, "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    lock = threading.Lock()

    def emit(msg: dict) -> None:
        line = json.dumps(msg, separators=(",", ":"))
        with lock:
            try:
                proto.write(line + "\n")
                proto.flush()
            except OSError:  # nobody reads us any more (the runner died): a run for no one
                os._exit(70)

    emit.fd = fd  # type: ignore[attr-defined]  (a re-exec hands it back as fd 1)
    return emit


def load_experiment(path: str):
    spec = importlib.util.spec_from_file_location("memlab_experiment", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def warm_up(sim: bool = False) -> None:
    """What every variant would import anyway, paid before the request arrives.

    Measured on a 2-core laptop (torch 2.13 CPU): torch 1.2 s, transformers 0.5 s, the first
    TorchDispatchMode op (imports torch._dynamo) 1.1 s, the GPT-2/Qwen2 modelling code 0.7 s.
    No CUDA context is made here; the GPU a warm worker may use is fixed when it is spawned
    (CUDA_VISIBLE_DEVICES), since the driver reads that variable once, at its first call.
    `sim`: also what a sim run does first in a process (the zygote's warm-up).
    """
    import torch  # noqa: F401
    import transformers

    import lab.course.curriculum  # noqa: F401
    from lab.measure import measure

    measure.warm_up_dispatch_mode()
    for name in ("GPT2LMHeadModel", "Qwen2ForCausalLM", "AutoModelForCausalLM"):
        getattr(transformers, name, None)  # transformers imports models lazily, on attribute access
    import lab.workloads  # noqa: F401  (the lessons' experiments build on it)

    if not sim:
        return
    # the zygote's (sim and cpu runs): what a sim run does first, once per process (~0.1 s:
    # sim's modules, the fake-tensor shortcuts' checks against this torch, CUDA autocast's op
    # set), so a forked worker starts with them; facts about this torch, not about any run.
    # Not in a GPU worker's warm-up: it makes fake tensors, which a CUDA run has no use for.
    from lab.measure import torch_compat
    from lab.measure.backends import sim  # noqa: F401
    from lab.measure.sim.dispatch.fake_mode import SimFakeTensorMode

    SimFakeTensorMode(allow_non_fake_inputs=True)
    torch_compat.aten_ops_with_kernel("AutocastCPU")
    # ZeRO-1's optimizer (the many-gpus lesson): importing torch.distributed.optim compiles its functional
    # optimizers with TorchScript (~0.15 s), once here instead of in every zero1 run; an import,
    # no process group (sim's ranks, and cpu's gloo group, are made by the run)
    import torch.distributed.optim  # noqa: F401


def read_request(emit) -> tuple[str, dict[str, str]]:
    """A warm worker: say ready, wait for the one request, apply its environment."""
    emit({"type": "ready", "pid": os.getpid()})
    line = sys.stdin.readline()
    if not line:
        raise SystemExit(0)  # the runner went away before giving us work
    msg = json.loads(line)
    for name, value in (msg.get("env") or {}).items():
        os.environ[str(name)] = str(value)
    if msg.get("cwd") and os.path.isdir(msg["cwd"]):
        os.chdir(msg["cwd"])  # the client's: relative paths in the experiment mean what they did
    return json.dumps(msg["request"]), msg.get("env") or {}


def needs_cold_start(request: dict) -> bool:
    """Whether a warm worker must restart cold for `request`'s environment: yes when it has
    one, unless the run is simulated and the environment is only the allocator's settings.
    Those are read by CUDA's caching allocator when CUDA starts, which a simulated run never
    does; sim's allocator model reads them when its backend is built (lab.measure.backends.sim),
    as `memlab dev goldens` runs lesson 23 in one process. A cold start is a fresh import of
    torch and transformers (~4 s of CPU): most of lesson 23's `y` in sim."""
    env = request.get("env") or {}
    if not env or not isinstance(env, dict):
        return False
    from lab.measure.modes import MODE_INFO
    from lab.measure.sim.allocator.settings import ENV_VARS

    info = MODE_INFO.get(request.get("mode"))
    return not (info is not None and info.simulated and set(env) <= set(ENV_VARS))


def restart_cold_if_env(raw: str, emit) -> None:
    """A variant with an environment of its own (lesson 17's PYTORCH_CUDA_ALLOC_CONF) in a warm
    worker: torch is imported already and may have read that environment, so this process
    becomes a cold worker (exec: same pid, same pipes, same process group) that sets it first
    (`needs_cold_start` says when)."""
    try:
        request = json.loads(raw)
        if not needs_cold_start(request):
            return
        env = request["env"]
    except (ValueError, AttributeError, TypeError):  # a bad request: the normal path reports it
        return
    os.environ.update({str(k): str(v) for k, v in env.items()})
    sys.stdout.flush()
    os.dup2(emit.fd, 1)  # the protocol stream is stdout again for the new program
    os.execv(sys.executable, [sys.executable, "-m", "lab.runner.worker", raw])


def _init_distributed(mode: str):
    """A rank of a group (WORLD_SIZE > 1 in the environment): join it like a torchrun worker."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    import torch.distributed as dist

    from lab.measure.modes import mode_info

    dist.init_process_group(backend="nccl" if mode_info(mode).on_gpu else "gloo")
    return dist


def measure_request(req, fn=None, emit=None, turns=None):
    """What a worker measures for `req`, in this process: its spec (RunRequest.spec) over its
    mode's backend. `fn`: the variant's function (default: `req.variant` of `req.experiment`);
    `turns`: the runner service's GPU turns (a GPU run takes them). The variant's environment is
    set for the run and put back after. Tests, benches and `memlab dev goldens` run the worker's
    path in their own process with this."""
    from lab.measure.backends import backend_for
    from lab.measure.measure import measure
    from lab.measure.sim.gpus import gpu

    saved = {k: os.environ.get(k) for k in req.env}
    os.environ.update(req.env)  # before the experiment is imported, as in a worker
    try:
        if fn is None:
            fn = getattr(load_experiment(req.experiment), req.variant)
        # gpu: the card a sim run stands for (RunRequest.gpu, checked by the client)
        backend = backend_for(req.mode, gpu_memory=req.gpu_memory, turns=turns,
                              gpu=gpu(req.gpu) if req.gpu else None)
        return measure(fn, req.spec(), backend, emit)
    finally:
        for k, old in saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    emit = _open_protocol_stream()
    if argv and argv[0] == "--warm":
        warm_up()
        raw, _ = read_request(emit)
        restart_cold_if_env(raw, emit)
    else:
        raw = argv[0] if argv else ""
    from lab.runner.protocol import RunRequest

    try:
        req = RunRequest.from_json_dict(json.loads(raw))
        if not os.path.isfile(req.experiment):
            raise ValueError(f"no experiment file {req.experiment or '(none named)'}")
    except ValueError as e:  # not JSON, not a request of this install (SchemaError), no file
        emit({"type": "error", "error": f"bad request: {e}"})
        return 2
    # a variant's environment (e.g. PYTORCH_CUDA_ALLOC_CONF) is set before anything in this
    # process imports torch, which reads some of it once (lesson 17, the caching allocator)
    os.environ.update(req.env)

    if req.background and not req.mode_info.timed and hasattr(os, "nice"):
        os.nice(BACKGROUND_NICE)
    emit({"type": "started", "pid": os.getpid(), "lesson": req.lesson, "variant": req.variant,
          "mode": req.mode, "scale": req.scale,
          **({"rank": int(os.environ["RANK"])} if "RANK" in os.environ else {})})
    name = os.path.basename(req.experiment)
    try:
        module = load_experiment(req.experiment)
    except Exception as e:  # the lesson's code failed to import: report, don't crash
        emit({"type": "error", "error": f"{name}: {type(e).__name__}: {e}"})
        return 3
    fn = getattr(module, req.variant, None)
    if not callable(fn):
        emit({"type": "error", "error": f"bad request: {name} has no function {req.variant!r}"})
        return 2

    try:
        dist = _init_distributed(req.mode)
    except Exception as e:  # the rendezvous failed (a rank died before it, a port taken)
        emit({"type": "error", "error": f"torch.distributed: {type(e).__name__}: {e}"})
        return 4

    from lab.runner.gpu_turns import GpuTurns

    result = measure_request(req, fn, emit, turns=GpuTurns.from_env())
    emit({"type": "result", "result": result.to_dict()})
    if dist is not None:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
