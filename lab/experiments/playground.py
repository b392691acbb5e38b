"""The language-model layouts as playground workloads (`memlab compare gpt2-small ...`).

Adapters only: a playground `Techniques` combination becomes the lessons' `TrainConfig`, and
the lessons' own train/eval steps run it, so the playground and the lessons measure the same
code. Registered through `lab.playground.workloads`' hook; importing this module stays cheap
(torch is imported when a worker calls a step).
"""

from __future__ import annotations

from lab.playground.techniques import KINDS
from lab.playground.workloads import Workload


def _config(t):
    from .train import TrainConfig

    impl = {"default": "foreach", "forloop": "for-loop"}.get(t.impl, t.impl)
    optimizer = {"adam": "adamw"}.get(t.optimizer, t.optimizer)
    return TrainConfig(precision=t.amp or "fp32", checkpointing="blocks" if t.ckpt else "none",
                       micro_batches=t.accum, optimizer=optimizer, impl=impl,
                       set_to_none=t.set_to_none)


def lm_step(run, t) -> None:
    """Train (or, with `eval`, evaluate) run.p.layout for run.p.steps steps."""
    from .train import Workload as Work
    from .train import eval_loss, get_batch, setup, train

    work = Work(layout=run.p.layout, batch=run.p.batch, seq=run.p.seq, config=_config(t))
    if t.optimizer == "adam":
        run.note("adam runs as AdamW on the language models: the same state (exp_avg, exp_avg_sq)")
    if getattr(t, "parallel", "none") != "none":  # ddp | zero1 | fsdp on run.p.world_size ranks
        from .parallel import train_parallel

        train_parallel(run, work, t.parallel, run.p.steps)
        return
    if t.eval:
        lay, model, _, _ = setup(run, work, with_optimizer=False)
        for i in range(run.p.steps):
            x, y = get_batch(run, lay, work, i)
            loss = eval_loss(run, model, x, y, "no_grad", work.config.precision, f"eval {i}")
            run.metric("loss", run.item(loss))
        return
    train(run, work, run.p.steps)


_LM_KINDS = frozenset(KINDS)
PLAYGROUND_WORKLOADS = [
    Workload(name="gpt2-tiny", title="a 2-layer byte-level transformer on the bundled corpus",
             sizes={"small": {"layout": "tiny", "batch": 8, "seq": 64},
                    "seed": {"layout": "tiny", "batch": 64, "seq": 256}},
             step="lab.experiments.playground:lm_step", supports=_LM_KINDS, unit="tokens"),
    Workload(name="gpt2-small", title="GPT-2 124M (transformers config, random weights)",
             sizes={"small": {"layout": "tiny", "batch": 8, "seq": 64},
                    "seed": {"layout": "gpt2-124m", "batch": 8, "seq": 1024}},
             step="lab.experiments.playground:lm_step", supports=_LM_KINDS, unit="tokens",
             notes=("small scale uses the tiny layout: GPT-2 124M does not train in seconds on a CPU",)),
    Workload(name="qwen2-1.5b", title="a Qwen2-style 1.5B layout (28 layers, random weights)",
             sizes={"small": {"layout": "tiny", "batch": 8, "seq": 64},
                    "seed": {"layout": "qwen2-1.5b", "batch": 16, "seq": 256}},
             step="lab.experiments.playground:lm_step", supports=_LM_KINDS, unit="tokens",
             notes=("small scale uses the tiny layout",)),
]
