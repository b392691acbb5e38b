"""Causal LMs from a `config.json`: the shipped ones (assets/models) and a user's file. Torch-free.

    shipped_models()                 {"llama-3.2-1b": ShippedModel(...), ...}  (the app lists these)
    read_config("path/config.json")  the config as a dict, or ConfigError (one line: why not)

The lab builds a config with random weights (`AutoModelForCausalLM.from_config`, no hub
download, no code from the config) and trains it with the plain loop a user writes
(lab/workloads/tasks.py `HFModel`). What it cannot build is refused here, before anything runs,
with the reason: a missing file, malformed JSON, no `model_type`, remote code (`auto_map`), a
multimodal model, quantized weights (their kernels need real checkpoints), or - in sim - a
mixture of experts (which tokens reach which expert depends on values fake tensors do not have).
Checks that need transformers (an unknown `model_type`, not a causal LM) are in
lab/workloads/models.py `hf_config_object`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.paths import ASSETS_DIR

MODELS_DIR = ASSETS_DIR / "models"
# families whose shipped configs are tested in sim (tests/unit/test_hf_models.py); any other
# causal LM transformers knows is built too, with a note
TESTED_FAMILIES = ("llama", "qwen2", "mistral", "gemma", "phi", "gpt2")
DEFAULT_BATCH = 4
DEFAULT_SEQ = 1024

# keys that mark a config the lab does not build, and why
_MULTIMODAL = ("vision_config", "audio_config", "text_config", "vision_tower", "speech_config",
               "image_token_id", "image_token_index", "mm_projector_type")
_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts",
            "num_experts_per_tok")


# sizes the lab and transformers compute with: each, when given, a whole number (a string such
# as "big" reached transformers' own validation, which raises outside ValueError/TypeError)
_SIZES = ("hidden_size", "n_embd", "d_model", "num_hidden_layers", "n_layer", "num_layers",
          "num_attention_heads", "n_head", "num_key_value_heads", "intermediate_size", "n_inner",
          "vocab_size", "max_position_embeddings", "n_positions", "n_ctx", "seq_length",
          "head_dim")
MAX_SIZE = 10**9  # beyond any model's dimension: a typo or a damaged file


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) or value == value else "NaN"
    return text if len(text) <= 40 else text[:37] + "…"


class ConfigError(ValueError):
    """A config the lab cannot build; the message is one line and says why."""


@dataclass(frozen=True)
class ShippedModel:
    name: str  # the file's stem: `--model NAME`
    path: Path
    model_type: str
    layers: int
    hidden: int
    vocab: int
    max_positions: int

    @property
    def title(self) -> str:
        return (f"{self.model_type} config ({self.layers} layers, hidden {self.hidden:,}, "
                f"vocab {self.vocab:,}): the plain Hugging Face training loop, random weights")


def _first(d: dict[str, Any], *keys: str, default: int = 0) -> int:
    for k in keys:
        if isinstance(d.get(k), int):
            return d[k]
    return default


def max_positions(d: dict[str, Any]) -> int:
    """The longest sequence the config's position embedding / rope is sized for (0: unknown)."""
    return _first(d, "max_position_embeddings", "n_positions", "n_ctx", "seq_length")


def shipped_models() -> dict[str, ShippedModel]:
    """The configs in assets/models, by name (reads nine small JSON files, imports nothing)."""
    out = {}
    for path in sorted(MODELS_DIR.glob("*.json")):
        d = json.loads(path.read_text())
        out[path.stem] = ShippedModel(
            path.stem, path, d.get("model_type", "?"),
            _first(d, "num_hidden_layers", "n_layer"), _first(d, "hidden_size", "n_embd"),
            _first(d, "vocab_size"), max_positions(d))
    return out


def config_path(spec: str) -> Path:
    """A shipped model's name or a path to a .json file -> the file (not checked further)."""
    shipped = MODELS_DIR / f"{spec}.json"
    if "/" not in spec and not spec.endswith(".json") and shipped.is_file():
        return shipped
    return Path(spec).expanduser()


def read_config(spec: str | Path, simulated: bool = False) -> dict[str, Any]:
    """The config as a dict, or ConfigError naming the file and what is wrong with it."""
    from lab.user_files import CONFIG_LIMIT, UserFileError, read_user_file

    path = config_path(str(spec))
    try:
        text = read_user_file(path, CONFIG_LIMIT).decode("utf-8")
    except UserFileError as e:  # missing, a folder, a FIFO, /dev/zero, 1 GB
        raise ConfigError(str(e)) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text; a config.json is JSON") from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: "
                          f"{e.msg})") from None
    except (RecursionError, ValueError) as e:  # nested too deep; an int of 5,000 digits
        raise ConfigError(f"{path}: not a config.json ({type(e).__name__}: "
                          f"{str(e).splitlines()[0][:100]})") from None
    if not isinstance(d, dict):
        raise ConfigError(f"{path}: a config.json holds one JSON object, not a "
                          f"{type(d).__name__}")
    check_config(d, path, simulated)
    return d


def check_config(d: dict[str, Any], where: Path | str = "config", simulated: bool = False) -> None:
    """ConfigError for what the lab cannot build (module docstring), torch-free."""
    if "auto_map" in d:
        names = d["auto_map"] if isinstance(d["auto_map"], dict) else {}
        raise ConfigError(f"{where}: needs remote code (auto_map: "
                          f"{', '.join(sorted(map(str, names)))[:200]}); the lab runs no code "
                          "that comes with a config, only models transformers itself defines")
    mm = next((k for k in _MULTIMODAL if k in d), None)
    if mm:
        raise ConfigError(f"{where}: a multimodal model (it has {mm}); the lab builds text-only "
                          "causal language models")
    q = d.get("quantization_config")
    if q:
        method = q.get("quant_method", "?") if isinstance(q, dict) else q
        raise ConfigError(f"{where}: quantized weights ({method}); their kernels need the real "
                          "checkpoint, and the lab builds random fp32/bf16 weights")
    if not isinstance(d.get("model_type"), str) or not d["model_type"]:
        raise ConfigError(f"{where}: no model_type; a Hugging Face config.json names its "
                          "architecture there (e.g. \"llama\")")
    for key in _SIZES:
        value = d.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or not 1 <= value <= MAX_SIZE):
            raise ConfigError(f"{where}: {key} is {_shown(value)}; it must be a whole number "
                              f"from 1 to {MAX_SIZE:,}")
    experts = next((k for k in _EXPERTS if isinstance(d.get(k), int) and d[k] > 1), None)
    if experts and simulated:
        raise ConfigError(f"{where}: a mixture of experts ({experts}={d[experts]}); which "
                          "tokens reach which expert depends on values a simulation does not "
                          "have, so sim cannot size it; run it on CUDA (--mode cuda)")


def check_seq(d: dict[str, Any], seq: int, where: str = "config") -> None:
    n = max_positions(d)
    if n and seq > n:
        raise ConfigError(f"{where}: --seq {seq} is longer than the {n} positions the model "
                          "is built for")


def default_seq(d: dict[str, Any]) -> int:
    n = max_positions(d)
    return min(DEFAULT_SEQ, n) if n else DEFAULT_SEQ


__all__ = ["ConfigError", "DEFAULT_BATCH", "DEFAULT_SEQ", "MODELS_DIR", "ShippedModel",
           "TESTED_FAMILIES", "check_config", "check_seq", "config_path", "default_seq",
           "max_positions", "read_config", "shipped_models"]
