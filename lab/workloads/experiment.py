"""The generic experiment: one registered workload trained (or evaluated) with one TrainConfig.

Run by `lab.runner.worker` like a lesson's experiment.py (RunRequest.experiment =
lab.workloads.registry.EXPERIMENT, variant "combo"). `run.p` carries everything: `workload` (a
registry name), `config` (a TrainConfig as a dict), `steps` and the workload's sizes (batch,
seq, layout, d_model, ...); `optimizer` is the spec the result reports.
"""

from lab.workloads.config import TrainConfig
from lab.workloads.registry import workload_for
from lab.workloads.tasks import task_for
from lab.workloads.train import evaluate, train

# run.p keys that are not sizes (world_size, sim_rank: the ranks of ddp/zero1/fsdp)
NOT_SIZES = ("workload", "config", "optimizer", "steps", "world_size", "sim_rank")


def combo(run):
    workload = workload_for(run.p.workload, run.params)
    cfg = TrainConfig.from_dict(run.p.config)
    workload.check(cfg, run.params)
    task = task_for(workload, {k: v for k, v in run.params.items() if k not in NOT_SIZES})
    steps = int(run.p.steps)
    if cfg.precision == "fp16" and not run.is_cuda and not cfg.eval:
        run.note("fp16 without a GradScaler here: the scaler is made on CUDA only (it reads "
                 "values); its memory is a few scalars")
    if cfg.eval:
        evaluate(run, task, cfg, steps)
    else:
        train(run, task, cfg, steps)
