"""Language-model layouts built from `transformers` configs, with random weights (no hub).

Three layouts, all fp32 parameters, dropout off (as in nanoGPT's pre-training default and
Qwen2's config; it also makes gradient accumulation exactly equal to the full batch):

  gpt2-124m   GPT-2 small: 12 layers, 12 heads, 768 wide, vocab 50,257, 1,024 positions.
              124,439,808 parameters (the LM head is tied to the token embedding).
  qwen2-1.5b  the Qwen2-1.5B layout: 28 layers, 1,536 wide, 12 query heads / 2 KV heads,
              MLP 8,960 (SwiGLU), vocab 151,936, tied embeddings. 1,543,714,304 parameters.
  tiny        a 2-layer GPT-2 over bytes (vocab 256) for CPU runs on the bundled corpus.

The model is built directly on `device` (`with torch.device(device)`), which is also what
makes it work under FakeTensorMode: `.to()` on fake parameters is refused there.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Layout:
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
    "gpt2-124m": Layout("gpt2-124m", "gpt2", vocab_size=50257, n_layer=12, n_head=12, n_embd=768,
                        max_seq=1024, params=124_439_808),
    "qwen2-1.5b": Layout("qwen2-1.5b", "qwen2", vocab_size=151936, n_layer=28, n_head=12,
                         n_embd=1536, max_seq=32768, n_kv_head=2, d_ff=8960,
                         params=1_543_714_304),
    "tiny": Layout("tiny", "gpt2", vocab_size=256, n_layer=2, n_head=4, n_embd=128, max_seq=256,
                   params=0),
}


def layout(name: str) -> Layout:
    try:
        return LAYOUTS[name]
    except KeyError:
        raise ValueError(f"unknown layout {name!r}; known: {', '.join(LAYOUTS)}") from None


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


def transformer_blocks(model) -> list[torch.nn.Module]:
    """The repeated blocks (GPT2Block / Qwen2DecoderLayer), where checkpointing cuts."""
    inner = getattr(model, "transformer", None) or getattr(model, "model", None)
    blocks = getattr(inner, "h", None) or getattr(inner, "layers", None)
    if blocks is None:
        raise ValueError(f"{type(model).__name__}: no transformer blocks found")
    return list(blocks)


def count_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def param_bytes(model) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())
