"""The models: causal LMs from `transformers` configs (random weights, no hub) and the small
regression models of the playground (one nn.Linear, a residual MLP stack).

The model is built directly on `device` (`with torch.device(device)`), which is also what
makes it work under FakeTensorMode: `.to()` on fake parameters is refused there.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .registry import Layout, layout


# ---- language models --------------------------------------------------------------------------
def make_config(lay: Layout):
    """The transformers config for a layout (attention: PyTorch SDPA, no KV cache)."""
    if lay.family == "gpt2":
        from transformers import GPT2Config

        return GPT2Config(
            vocab_size=lay.vocab_size, n_positions=lay.max_seq, n_embd=lay.n_embd,
            n_layer=lay.n_layer, n_head=lay.n_head, n_inner=lay.d_ff or None,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            bos_token_id=lay.vocab_size - 1, eos_token_id=lay.vocab_size - 1,  # 50256 for GPT-2
            use_cache=False,  # training and loss evaluation: a KV cache would only cost memory
            attn_implementation="sdpa",
        )
    if lay.family == "qwen2":
        from transformers import Qwen2Config

        return Qwen2Config(
            vocab_size=lay.vocab_size, hidden_size=lay.n_embd, intermediate_size=lay.d_ff,
            num_hidden_layers=lay.n_layer, num_attention_heads=lay.n_head,
            num_key_value_heads=lay.n_kv_head or lay.n_head,
            max_position_embeddings=lay.max_seq, tie_word_embeddings=True,
            attention_dropout=0.0, use_cache=False, attn_implementation="sdpa",
        )
    raise ValueError(f"unknown model family {lay.family!r}")


def build_model(lay: Layout | str, device: torch.device | str, dtype: torch.dtype = torch.float32):
    """A randomly initialised causal LM on `device`, in training mode."""
    if isinstance(lay, str):
        lay = layout(lay)
    from transformers import AutoModelForCausalLM

    cfg = make_config(lay)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model.train()
    return model


def hf_config_object(d: dict):
    """The transformers config for a config.json's dict (lab.workloads.hf_config read and
    checked it), or ConfigError: a model_type transformers does not know, or not a causal LM."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from .hf_config import ConfigError

    d = dict(d)
    kind = d.pop("model_type")
    try:
        cfg = AutoConfig.for_model(kind, **d)
    except ValueError as e:
        if "Unrecognized model identifier" in str(e) or kind not in str(e):
            raise ConfigError(f"model_type {kind!r} is not one transformers knows (transformers "
                              "defines the architectures the lab builds; a newer transformers "
                              "may know it)") from None
        raise ConfigError(f"model_type {kind!r}: {str(e).splitlines()[0]}") from None
    except Exception as e:  # TypeError, KeyError, huggingface_hub's validation errors, ...
        first = " ".join(line.strip() for line in str(e).splitlines())[:200] or type(e).__name__
        raise ConfigError(f"model_type {kind!r}: transformers refused the config: "
                          f"{first}") from None
    if kind not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise ConfigError(f"model_type {kind!r} is not a causal language model "
                          "(AutoModelForCausalLM has no class for it)")
    cfg.use_cache = False  # training: a KV cache would only cost memory
    return cfg


def build_hf(d: dict, device: torch.device | str, dtype: torch.dtype = torch.float32):
    """`AutoModelForCausalLM.from_config` with random weights, on `device`, in training mode.
    The dtype is the combination's (fp32, or bf16 for pure-bf16), not the config's
    torch_dtype: transformers 5 would build a bf16 config in bf16 otherwise."""
    from transformers import AutoModelForCausalLM

    cfg = hf_config_object(d)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model.train()
    return model


def hf_loss(model, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The plain loop's loss: transformers shifts the labels and takes the cross-entropy
    (ForCausalLMLoss: logits upcast to fp32, ignore_index -100)."""
    return model(input_ids=x, labels=y).loss


def lm_loss(model, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=x).logits  # (B, T, V)
    return F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))  # scalar, fp32


# ---- regression models (the playground's linear and mlp) --------------------------------------
class LinearModel(nn.Module):
    def __init__(self, d_in: int, d_out: int, device=None, dtype=None):
        super().__init__()
        self.linear = nn.Linear(d_in, d_out, device=device, dtype=dtype)  # weight (d_out, d_in)

    def forward(self, x):  # (B, d_in) -> (B, d_out)
        return self.linear(x)


class MLPBlock(nn.Module):
    """x + W2·gelu(W1·norm(x)): the feed-forward half of a transformer block."""

    def __init__(self, d_model: int, hidden: int, device=None, dtype=None):
        super().__init__()
        self.norm = nn.LayerNorm(d_model, device=device, dtype=dtype)
        self.up = nn.Linear(d_model, hidden, device=device, dtype=dtype)  # (d, 4d)
        self.down = nn.Linear(hidden, d_model, device=device, dtype=dtype)  # (4d, d)

    def forward(self, x):  # (B, T, d)
        return x + self.down(F.gelu(self.up(self.norm(x))))


class MLPStack(nn.Module):
    def __init__(self, layers: int, d_model: int, hidden: int, device=None, dtype=None):
        super().__init__()
        self.blocks = nn.ModuleList(MLPBlock(d_model, hidden, device, dtype) for _ in range(layers))

    def forward(self, x):  # (B, T, d)
        for block in self.blocks:
            x = block(x)
        return x


def mse_loss(model, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(model(x), y)  # autocast runs mse_loss in fp32 (its fp32 op list)


# ---- what every model has ----------------------------------------------------------------------
def blocks(model: nn.Module) -> list[nn.Module]:
    """The repeated blocks, where checkpointing cuts: GPT2Block / Qwen2DecoderLayer / MLPBlock."""
    found = getattr(model, "blocks", None)
    if found is None:
        inner = getattr(model, "transformer", None) or getattr(model, "model", None)
        found = getattr(inner, "h", None) or getattr(inner, "layers", None)
    if found is None:
        raise ValueError(f"{type(model).__name__}: no repeated blocks to checkpoint")
    return list(found)



def count_params(model) -> int:
    return sum(p.numel() for p in model.parameters())



__all__ = ["LinearModel", "MLPBlock", "MLPStack", "blocks", "build_hf", "build_model",
           "count_params", "hf_config_object", "hf_loss", "lm_loss", "make_config", "mse_loss"]
