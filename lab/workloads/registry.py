"""What can be trained: the workload registry and the language-model layouts. Torch-free.

The app and the CLI list workloads, default sizes and units from here without importing torch;
lab/workloads/tasks.py builds them (torch, transformers) when a worker runs one.

    name        family  sizes (seed scale)                                   unit
    linear      linear  batch 5000, nn.Linear(10_000, 50_000)  (lesson 01)    samples
    mlp         mlp     batch 16, seq 1024, 24 residual MLP blocks of 2048    tokens
    gpt2-tiny   lm      the 2-layer byte-level GPT-2 on the bundled corpus    tokens
    gpt2-small  lm      GPT-2 124M                                            tokens
    qwen2-1.5b  lm      the Qwen2-1.5B layout                                 tokens
    llama-3.2-1b, gpt2, ...  hf   a shipped config.json (assets/models), batch 4 x 1024   tokens

Language models are `transformers` configs with random weights (no hub). Family "lm" trains
the lab's layouts with the lab's step (logits, then cross_entropy); family "hf" is a causal LM
from a config.json - a shipped one, registered here under its file's name, or a user's file
(`config_workload`) - trained with the plain loop a user writes, `model(input_ids=ids,
labels=ids).loss` (lab/workloads/tasks.py `HFModel`). Its size `model` names the config:
`{"model": "llama-3.2-1b" or "/path/config.json", "batch": 4, "seq": 1024}`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import KINDS, ComboError, TrainConfig


# ---- language-model layouts (the lessons name these in lesson.toml: layout = "gpt2-124m") -------
@dataclass(frozen=True)
class Layout:
    """A causal LM's shape. All fp32 parameters, dropout off (nanoGPT's pre-training default and
    Qwen2's config; it also makes gradient accumulation exactly equal to the full batch)."""

    name: str
    family: str  # "gpt2" | "qwen2": which transformers class builds it
    vocab_size: int  # V
    n_layer: int  # transformer blocks
    n_head: int  # query heads
    n_embd: int  # C, the residual width
    max_seq: int  # longest sequence the position embedding / rope is sized for
    n_kv_head: int = 0  # qwen2: key/value heads (grouped-query attention); 0 = n_head
    d_ff: int = 0  # MLP hidden width; 0 = 4 * n_embd (GPT-2)
    params: int = 0  # parameter count, for reference (a test checks it against the model)


LAYOUTS: dict[str, Layout] = {
    # GPT-2 small: 124,439,808 parameters (the LM head is tied to the token embedding)
    "gpt2-124m": Layout("gpt2-124m", "gpt2", vocab_size=50257, n_layer=12, n_head=12, n_embd=768,
                        max_seq=1024, params=124_439_808),
    # Qwen2-1.5B: 12 query / 2 KV heads, SwiGLU MLP 8,960, tied embeddings
    "qwen2-1.5b": Layout("qwen2-1.5b", "qwen2", vocab_size=151936, n_layer=28, n_head=12,
                         n_embd=1536, max_seq=32768, n_kv_head=2, d_ff=8960,
                         params=1_543_714_304),
    # a 2-layer GPT-2 over bytes (vocab 256) for CPU runs on the bundled corpus
    "tiny": Layout("tiny", "gpt2", vocab_size=256, n_layer=2, n_head=4, n_embd=128, max_seq=256,
                   params=462_336),
}


def layout(name: str) -> Layout:
    try:
        return LAYOUTS[name]
    except KeyError:
        raise ValueError(f"unknown layout {name!r}; known: {', '.join(LAYOUTS)}") from None


# ---- workloads ------------------------------------------------------------------------------------
# the experiment file every workload runs in (a worker imports it like a lesson's experiment.py)
EXPERIMENT = str(Path(__file__).with_name("experiment.py"))
VARIANT = "combo"
COMMON = {"steps": 2}  # every workload: optimizer steps (or evaluation passes) per run


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    family: str  # "linear" | "mlp" | "lm" | "hf": which task in lab/workloads/tasks.py builds it
    sizes: dict[str, dict[str, Any]]  # scale ("small" | "seed") -> default sizes
    unit: str = "samples"  # throughput unit: "tokens" (batch × seq) or "samples" (batch)
    supports: frozenset = frozenset(KINDS)  # which token kinds make sense here
    notes: tuple[str, ...] = field(default=())

    def default_sizes(self, scale: str) -> dict[str, Any]:
        if scale not in self.sizes:
            raise KeyError(f"workload {self.name!r} has no {scale!r} sizes "
                           f"(it has {', '.join(self.sizes)})")
        return {**COMMON, **self.sizes[scale]}

    def size_names(self) -> list[str]:
        return list(dict.fromkeys(k for s in self.sizes.values() for k in {**COMMON, **s}))

    def items_per_step(self, sizes: dict[str, Any]) -> int:
        """Tokens (or samples) one optimizer step processes."""
        n = int(sizes.get("batch", 1))
        return n * int(sizes.get("seq", 1)) if self.unit == "tokens" else n

    def check(self, cfg: TrainConfig, sizes: dict[str, Any] | None = None) -> None:
        """ComboError (one line) when this workload cannot run `cfg` (at these sizes)."""
        missing = cfg.kinds() - set(self.supports)
        if missing:
            raise ComboError(f"workload {self.name!r} does not support "
                             f"{', '.join(sorted(missing))} (combination {cfg.label!r})")
        if sizes is not None:
            batch = int(sizes.get("batch", 1))
            if batch % cfg.micro_batches:
                raise ComboError(f"batch {batch} is not divisible by accum{cfg.micro_batches}")


_LM_SMALL = {"layout": "tiny", "batch": 8, "seq": 64}
_REGISTRY: dict[str, Workload] = {}


def register(w: Workload) -> Workload:
    _REGISTRY[w.name] = w
    return w


register(Workload(
    name="linear", family="linear", unit="samples",
    title="one big nn.Linear trained with MSE (lesson 01's layer)",
    sizes={"small": {"batch": 256, "d_in": 512, "d_out": 2048},
           "seed": {"batch": 5000, "d_in": 10_000, "d_out": 50_000}},
    supports=frozenset(KINDS) - {"checkpointing", "parallel", "offload"},  # one layer: nothing to recompute
))
register(Workload(
    name="mlp", family="mlp", unit="tokens",
    title="a residual MLP stack on (batch, seq, d_model): a transformer's feed-forward halves",
    sizes={"small": {"batch": 4, "seq": 64, "d_model": 128, "hidden_mult": 4, "layers": 4},
           "seed": {"batch": 16, "seq": 1024, "d_model": 2048, "hidden_mult": 4, "layers": 24}},
    supports=frozenset(KINDS) - {"parallel", "offload"},  # ddp/zero1/fsdp: the language models
))
register(Workload(
    name="gpt2-tiny", family="lm", unit="tokens",
    title="a 2-layer byte-level transformer on the bundled corpus",
    sizes={"small": dict(_LM_SMALL), "seed": {"layout": "tiny", "batch": 64, "seq": 256}},
))
register(Workload(
    name="gpt2-small", family="lm", unit="tokens",
    title="GPT-2 124M (transformers config, random weights)",
    sizes={"small": dict(_LM_SMALL), "seed": {"layout": "gpt2-124m", "batch": 8, "seq": 1024}},
    notes=("small scale uses the tiny layout: GPT-2 124M does not train in seconds on a CPU",),
))
register(Workload(
    name="qwen2-1.5b", family="lm", unit="tokens",
    title="a Qwen2-style 1.5B layout (28 layers, random weights)",
    sizes={"small": dict(_LM_SMALL), "seed": {"layout": "qwen2-1.5b", "batch": 16, "seq": 256}},
    notes=("small scale uses the tiny layout",),
))


# ---- causal LMs from a config.json (family "hf") ------------------------------------------------
HF_NOTES = ("the plain Hugging Face loop: model(input_ids=ids, labels=ids).loss, backward(), "
            "step(), zero_grad(set_to_none=True); ckpt is transformers' gradient checkpointing "
            "(use_reentrant=False); the weights are fp32 (pure-bf16: bf16) whatever the config's "
            "torch_dtype says",
            "seed sizes only: sim at full size in seconds, or cuda")


def hf_workload(name: str, title: str, model: str, seq: int) -> Workload:
    from .hf_config import DEFAULT_BATCH

    return Workload(name=name, family="hf", unit="tokens", title=title,
                    sizes={"seed": {"model": model, "batch": DEFAULT_BATCH, "seq": seq}},
                    notes=HF_NOTES)


def config_workload(path: str) -> Workload:
    """A user's config.json as a workload (not registered: it lives as long as the command).
    Raises ConfigError (hf_config) when the lab cannot build it."""
    from .hf_config import default_seq, read_config

    d = read_config(path)
    resolved = str(Path(path).expanduser().resolve())
    return hf_workload(Path(path).stem, f"{d['model_type']} config from {path}: the plain "
                       "Hugging Face training loop, random weights", resolved, default_seq(d))


def _register_shipped() -> None:
    from .hf_config import DEFAULT_SEQ, shipped_models

    for m in shipped_models().values():
        seq = min(DEFAULT_SEQ, m.max_positions) if m.max_positions else DEFAULT_SEQ
        register(hf_workload(m.name, m.title, m.name, seq))


_register_shipped()


def workload_for(name: str, sizes: dict[str, Any]) -> Workload:
    """What a worker runs: a registered workload, or the config.json its sizes name."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    if "model" in sizes:
        return config_workload(str(sizes["model"]))
    return get_workload(name)


def all_workloads() -> dict[str, Workload]:
    return dict(_REGISTRY)


def get_workload(name: str) -> Workload:
    if name not in _REGISTRY:
        raise KeyError(f"no workload {name!r}; the workloads: {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def parse_sizes(pairs: list[str]) -> dict[str, Any]:
    """['d_model=512', 'layout=tiny'] -> {'d_model': 512, 'layout': 'tiny'}."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{pair!r} is not KEY=VALUE (e.g. layers=8)")
        v: Any = value.strip()
        for cast in (int, float):
            try:
                v = cast(v)
                break
            except ValueError:
                continue
        out[key.strip()] = v
    return out


__all__ = ["COMMON", "EXPERIMENT", "HF_NOTES", "LAYOUTS", "Layout", "VARIANT", "Workload",
           "all_workloads", "config_workload", "get_workload", "hf_workload", "layout",
           "parse_sizes", "register", "workload_for"]
