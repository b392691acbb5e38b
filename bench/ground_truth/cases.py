"""The ground-truth cases: which script, which arguments, which half of the split.

One table for the H200 runner (run_h200.py) and the comparison (bench/profile_vs_h200.py), so
both run exactly the same command. A case is a plain script and its arguments, run from `cwd`
(relative to the repository root) in a fresh process:

    hf/<config>/<combo>       bench/ground_truth/hf_loop.py on a published layout
    script/<name>/<variant>   a training script: public ones (nanoGPT, pytorch/examples) run
                              unmodified from .gt_scripts/ (bench/ground_truth/prepare.py copies
                              them from the repository at the commit named in SOURCES), ours
                              (hf_trainer.py, titan_style.py) from bench/ground_truth/
    fit/<config>/<combo>      the largest batch that runs under `cap_gib` (hf_loop.py)
    versions/<config>/<combo> an hf case on the H200's own transformers (not the carried one):
                              what the library version alone changes (outside the split)
    zoo/<category>/<name>     a practitioner's script of bench/ground_truth/zoo/ (CNNs, ViT,
                              MoE, seq2seq, MLM, generate, LoRA, Lightning, accumulation):
                              `zoo_cases()`, its own results file (ZOO_RESULTS), any card
    compiled/<pair>/<version> a script under torch.compile (`compiled`) and its eager twin
                              (`eager`): `compiled_cases()`, results COMPILED_RESULTS, any card

`tiny` is the same case at a size a CPU runs in seconds (run_h200.py --dry-run). The split
(tune / held_out) is assets/ground_truth/split.toml, fixed before any held-out number existed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = "bench/ground_truth"
CONFIGS = {p.stem: p for p in [*sorted((ROOT / "assets" / "models").glob("*.json")),
                                *sorted((ROOT / HERE / "configs").glob("*.json"))]}
SPLIT = ROOT / "assets" / "ground_truth" / "split.toml"

# Public scripts, run unmodified: the repository, the commit, the files copied to .gt_scripts/NAME
SOURCES = {
    "nanoGPT": {"repo": "karpathy/nanoGPT", "commit": "3adf61e154c3fe3fca428ad6bc3818b27a3b8291",
                "files": {"train.py": "train.py", "model.py": "model.py",
                          "configurator.py": "configurator.py"}},
    "word_language_model": {"repo": "pytorch/examples",
                            "commit": "77f55b912142e11fcfdf5b530231fb9c52f181e8",
                            "files": {"main.py": "word_language_model/main.py",
                                      "data.py": "word_language_model/data.py",
                                      "model.py": "word_language_model/model.py"}},
}


@dataclass
class Case:
    id: str
    group: str  # what the split assigns (an architecture or a script)
    script: str  # relative to the repository root
    args: list[str]
    tiny: list[str]  # the dry run's arguments (CPU, seconds)
    cwd: str = "."
    cap_gib: float | None = None  # fit cases: the cap the largest batch runs under
    batch_flag: str = "--batch"  # fit cases: the argument that sets the batch
    transformers: str = "carried"  # or "native": the H200's own version (versions/ cases)
    info: dict = field(default_factory=dict)
    gib: float | None = None  # GiB the GPU run needs, for scheduling only (zoo cases)
    alone: bool = False  # run with nothing beside it (cuDNN's algorithm search sees free memory)

    @property
    def kind(self) -> str:
        return self.id.split("/", 1)[0]

    @property
    def category(self) -> str:
        """zoo/cnn/resnet50-fp32 -> cnn; other cases: their kind."""
        return self.id.split("/")[1] if self.kind == "zoo" else self.kind


# hf cases: (config, --layers or None for the published count, batch, seq). Layers are cut only
# where the published depth would need more than ~12 GB of fp32 weights and Adam state.
HF = [
    ("gpt2", None, 8, 1024), ("llama-3.2-1b", 4, 4, 1024), ("qwen2.5-0.5b", None, 2, 1024),
    ("qwen2.5-1.5b", 6, 2, 1024), ("smollm2-135m", None, 4, 1024), ("smollm2-360m", None, 4, 1024),
    ("gemma-2b", 4, 2, 1024), ("phi-1.5", 8, 4, 1024), ("mistral-7b", 2, 4, 1024),
    ("qwen3-0.6b", None, 2, 1024), ("gemma2-2b", 4, 2, 1024), ("pythia-160m", None, 8, 1024),
    ("opt-350m", None, 4, 1024), ("gemma3-270m", None, 2, 1024), ("phi3-mini-4k", 3, 4, 1024),
    ("falcon-7b", 2, 2, 1024), ("stablelm-2-1.6b", 6, 4, 1024), ("olmo-1b", 6, 4, 1024),
    ("olmo2-1b", 4, 4, 1024), ("granite-3.0-2b", 6, 4, 1024), ("aya-expanse-8b", 2, 2, 512),
    ("starcoder2-3b", 3, 4, 1024), ("smollm3-3b", 4, 2, 1024), ("santacoder", 8, 4, 1024),
    ("bloom-560m", None, 2, 1024), ("gpt-j-6b", 2, 2, 1024),
]
COMBOS = ("fp32", "bf16", "bf16+ckpt")
# fit cases: (config, layers, combo, seq, cap GiB)
FIT = [
    ("gpt2", None, "fp32", 1024, 16), ("qwen3-0.6b", None, "bf16+ckpt", 1024, 24),
    ("olmo2-1b", 4, "bf16", 1024, 16), ("granite-3.0-2b", 6, "bf16+ckpt", 1024, 12),
]
VERSIONS = [("gemma2-2b", 4, 2, 1024)]  # softcapping: eager attention in newer transformers


def _hf_args(config: str, layers, combo: str, batch: int, seq: int) -> list[str]:
    args = ["--config", str(CONFIGS[config].relative_to(ROOT)), "--combo", combo,
            "--batch", str(batch), "--seq", str(seq), "--steps", "3"]
    return args + (["--layers", str(layers)] if layers else [])


def _tiny_hf(config: str, combo: str) -> list[str]:
    return ["--config", str(CONFIGS[config].relative_to(ROOT)), "--combo", combo, "--batch", "2",
            "--seq", "32", "--steps", "2", "--tiny", "--device", "cpu"]


NANOGPT_TINY = ["--device=cpu", "--dtype=float32", "--compile=False", "--batch_size=2",
                "--block_size=32", "--n_layer=2", "--n_head=2", "--n_embd=32", "--max_iters=1",
                "--eval_iters=1", "--eval_interval=1000", "--dataset=gt",
                "--gradient_accumulation_steps=2", "--out_dir=out-tiny"]


def _nanogpt(variant: str, extra: list[str]) -> Case:
    args = ["--dataset=gt", "--batch_size=12", "--block_size=1024", "--max_iters=2",
            "--gradient_accumulation_steps=2", "--eval_interval=1000", "--eval_iters=2",
            "--log_interval=1", "--out_dir=out-gt", *extra]
    return Case(f"script/nanogpt/{variant}", f"nanogpt/{variant}", ".gt_scripts/nanoGPT/train.py",
                args, NANOGPT_TINY, cwd=".gt_scripts/nanoGPT",
                info={"source": "nanoGPT", "data": "data/gt/{train,val}.bin: uint16 random tokens "
                      "(bench/ground_truth/data.py)", "optimizer_steps": 3})


def _wlm(variant: str, args: list[str]) -> Case:
    common = ["--data", "data/gt", "--lr", "0.001", "--epochs", "1", "--dry-run", "--accel", "--use-optimizer",
              "--save", "model-gt.pt"]
    tiny = ["--data", "data/gt", "--lr", "0.001", "--epochs", "1", "--dry-run", "--use-optimizer", "--save",
            "model-tiny.pt", "--model", args[1], "--emsize", "32", "--nhid", "64", "--nlayers", "1",
            "--nhead", "2", "--batch_size", "4", "--bptt", "16"]
    return Case(f"script/wlm/{variant}", f"wlm/{variant}", ".gt_scripts/word_language_model/main.py",
                common + args, tiny, cwd=".gt_scripts/word_language_model",
                info={"source": "word_language_model", "data": "data/gt/{train,valid,test}.txt: "
                      "random words from a 10,000-word vocabulary (bench/ground_truth/data.py)",
                      "optimizer_steps": 1})


def all_cases() -> list[Case]:
    out: list[Case] = []
    for config, layers, batch, seq in HF:
        for combo in COMBOS:
            out.append(Case(f"hf/{config}/{combo}", config, f"{HERE}/hf_loop.py",
                            _hf_args(config, layers, combo, batch, seq), _tiny_hf(config, combo),
                            info={"layers": layers}))
    # lesson 26's keep_grads: the same gpt2 fp32 loop with zero_grad(set_to_none=False)
    out.append(Case("hf/gpt2/fp32-keep-grads", "gpt2", f"{HERE}/hf_loop.py",
                    _hf_args("gpt2", None, "fp32", 8, 1024) + ["--no-set-to-none"],
                    _tiny_hf("gpt2", "fp32") + ["--no-set-to-none"]))
    tgpt2 = ["--config", "assets/models/gpt2.json", "--batch", "8", "--seq", "1024", "--steps", "3"]
    tiny_t = ["--config", "assets/models/gpt2.json", "--batch", "2", "--seq", "32", "--steps", "2",
              "--tiny", "--device", "cpu"]
    out += [
        _nanogpt("eager", ["--compile=False"]),
        _nanogpt("compiled", ["--compile=True"]),
        _nanogpt("medium-fp16", ["--compile=False", "--dtype=float16", "--n_layer=24",
                                 "--n_head=16", "--n_embd=1024", "--batch_size=8"]),
        Case("script/hf_trainer/gpt2-bf16", "hf_trainer/gpt2-bf16", f"{HERE}/hf_trainer.py",
             tgpt2 + ["--bf16"], tiny_t + ["--bf16"]),
        Case("script/hf_trainer/qwen3-ckpt", "hf_trainer/qwen3-ckpt", f"{HERE}/hf_trainer.py",
             ["--config", str(CONFIGS["qwen3-0.6b"].relative_to(ROOT)), "--layers", "12",
              "--batch", "4", "--seq", "1024", "--steps", "3", "--bf16", "--gradient-checkpointing"],
             ["--config", str(CONFIGS["qwen3-0.6b"].relative_to(ROOT)), "--batch", "2", "--seq",
              "32", "--steps", "2", "--bf16", "--gradient-checkpointing", "--tiny", "--device",
              "cpu"]),
        Case("script/titan/llama3-bf16", "titan/llama3-bf16", f"{HERE}/titan_style.py",
             ["--dim", "2048", "--layers", "8", "--heads", "32", "--kv-heads", "8", "--ffn-dim",
              "8192", "--vocab", "128256", "--batch", "4", "--seq", "1024", "--steps", "3", "--bf16"],
             ["--dim", "64", "--layers", "2", "--heads", "4", "--kv-heads", "2", "--ffn-dim", "128",
              "--vocab", "512", "--batch", "2", "--seq", "16", "--steps", "2", "--bf16", "--device",
              "cpu"]),
        Case("script/titan/llama3-fp32-ac", "titan/llama3-fp32-ac", f"{HERE}/titan_style.py",
             ["--dim", "2048", "--layers", "8", "--heads", "32", "--kv-heads", "8", "--ffn-dim",
              "8192", "--vocab", "128256", "--batch", "4", "--seq", "1024", "--steps", "3", "--ac",
              "full"],
             ["--dim", "64", "--layers", "2", "--heads", "4", "--kv-heads", "2", "--ffn-dim", "128",
              "--vocab", "512", "--batch", "2", "--seq", "16", "--steps", "2", "--ac", "full",
              "--device", "cpu"]),
        _wlm("transformer", ["--model", "Transformer", "--emsize", "1024", "--nhid", "4096",
                             "--nlayers", "6", "--nhead", "16", "--batch_size", "32", "--bptt",
                             "512"]),
        _wlm("lstm", ["--model", "LSTM", "--emsize", "1024", "--nhid", "1024", "--nlayers", "2",
                      "--batch_size", "64", "--bptt", "256"]),
    ]
    for config, layers, combo, seq, cap in FIT:
        args = _hf_args(config, layers, combo, 1, seq)
        out.append(Case(f"fit/{config}/{combo}", config, f"{HERE}/hf_loop.py", args,
                        _tiny_hf(config, combo), cap_gib=cap, info={"layers": layers}))
    for config, layers, batch, seq in VERSIONS:
        for combo in COMBOS:
            out.append(Case(f"versions/{config}/{combo}", "versions", f"{HERE}/hf_loop.py",
                            _hf_args(config, layers, combo, batch, seq), _tiny_hf(config, combo),
                            transformers="native", info={"layers": layers}))
    return out


ZOO = f"{HERE}/zoo"
ZOO_RESULTS = ROOT / "assets" / "ground_truth" / "zoo_gpu.json"
ZOO_CATEGORIES = ("cnn", "vit", "moe", "seq2seq", "encoder", "generate", "lora", "lightning",
                  "accum")
_CPU = ["--device", "cpu"]
# (id, script, arguments, GiB estimate, the tiny CPU arguments); the split is split.toml's
# [[added]] of 2026-12-07. Sizes: what a practitioner runs on one 80 GB card, each case well
# under a minute there; layers are cut only for the MoE layouts (2.4 GB of weights per
# Qwen3-30B-A3B block at fp32 Adam).
_ZOO = [
    ("cnn/resnet50-fp32", "resnet.py", "--depth 50 --batch 128", 18,
     "--tiny --batch 2 --steps 2"),
    ("cnn/resnet50-bf16-cl", "resnet.py", "--depth 50 --batch 128 --bf16 --channels-last", 14,
     "--tiny --batch 2 --steps 2 --bf16 --channels-last"),
    ("cnn/resnet101-fp32-cl", "resnet.py", "--depth 101 --batch 64 --channels-last", 16,
     "--tiny --depth 101 --batch 2 --steps 2 --channels-last"),
    ("cnn/unet-bf16", "unet.py", "--batch 16 --image 512 --bf16", 30,
     "--tiny --batch 2 --steps 2 --bf16"),
    ("vit/vit-b16-bf16", "vit.py", "--config vit-base-patch16-224 --batch 128 --bf16", 28,
     "--tiny --batch 2 --steps 2 --bf16"),
    ("vit/vit-l16-fp32", "vit.py", "--config vit-large-patch16-224 --batch 32", 30,
     "--config vit-large-patch16-224 --tiny --batch 2 --steps 2"),
    ("moe/qwen3-moe-bf16", "causal_lm.py",
     "--config qwen3-30b-a3b --layers 2 --batch 2 --seq 1024 --bf16", 44,
     "--config qwen3-30b-a3b --tiny --batch 2 --seq 16 --steps 2 --bf16"),
    ("moe/olmoe-bf16", "causal_lm.py",
     "--config olmoe-1b-7b --layers 2 --batch 4 --seq 1024 --bf16", 30,
     "--config olmoe-1b-7b --tiny --batch 2 --seq 16 --steps 2 --bf16"),
    ("moe/loop-bf16", "moe_loop.py", "--batch 8 --seq 1024 --bf16", 30,
     "--vocab 512 --dim 64 --layers 2 --heads 4 --hidden 128 --batch 2 --seq 16 --steps 2 "
     "--bf16"),
    ("moe/loop-fp32", "moe_loop.py", "--dim 768 --layers 6 --heads 12 --hidden 2048 --experts 16 "
     "--top-k 4 --batch 8 --seq 512", 24,
     "--vocab 512 --dim 64 --layers 2 --heads 4 --hidden 96 --experts 16 --top-k 4 --batch 2 "
     "--seq 16 --steps 2"),
    ("seq2seq/t5-base-fp32", "seq2seq.py", "--config t5-base --batch 16 --source 512 --target 128",
     24, "--config t5-base --tiny --batch 2 --source 16 --target 8 --steps 2"),
    ("seq2seq/bart-large-bf16", "seq2seq.py",
     "--config bart-large --batch 16 --source 512 --target 128 --bf16 --lr 3e-5", 24,
     "--config bart-large --tiny --batch 2 --source 16 --target 8 --steps 2 --bf16"),
    ("encoder/bert-large-mlm-bf16", "mlm.py", "--config bert-large-uncased --batch 32 --seq 512 "
     "--bf16", 28, "--config bert-large-uncased --tiny --batch 2 --seq 16 --steps 2 --bf16"),
    ("encoder/roberta-base-mlm-fp32", "mlm.py", "--config roberta-base --batch 32 --seq 512 "
     "--mask-token 50264", 28, "--config roberta-base --tiny --batch 2 --seq 16 --steps 2"),
    ("generate/llama-1b-dynamic", "generate.py", "--config llama-3.2-1b --batch 16 --prompt 512 "
     "--new 256 --cache dynamic", 10, "--tiny --batch 2 --prompt 8 --new 4 --cache dynamic"),
    ("generate/llama-1b-static", "generate.py", "--config llama-3.2-1b --batch 16 --prompt 512 "
     "--new 256 --cache static --no-compile", 10,
     "--tiny --batch 2 --prompt 8 --new 4 --cache static --no-compile"),
    ("lora/llama-1b-ckpt", "lora.py", "--config llama-3.2-1b --batch 4 --seq 1024 --rank 16 "
     "--checkpointing", 12, "--tiny --batch 2 --seq 16 --steps 2 --checkpointing"),
    ("lora/qwen2.5-1.5b", "lora.py", "--config qwen2.5-1.5b --batch 4 --seq 1024 --rank 8", 30,
     "--config qwen2.5-1.5b --tiny --batch 2 --seq 16 --steps 2 --rank 8"),
    ("lightning/gpt2-bf16", "lightning_lm.py", "--config gpt2 --batch 8 --seq 1024 --precision "
     "bf16-mixed", 20, "--config gpt2 --tiny --batch 2 --seq 16 --steps 2 --precision bf16-mixed"),
    ("lightning/llama-1b-fp32-accum", "lightning_lm.py", "--config llama-3.2-1b --layers 4 "
     "--batch 4 --seq 512 --precision 32-true --accumulate 2", 20,
     "--config llama-3.2-1b --tiny --batch 2 --seq 16 --steps 2 --precision 32-true "
     "--accumulate 2"),
    ("accum/qwen2.5-0.5b-bf16", "causal_lm.py", "--config qwen2.5-0.5b --batch 16 --micro-batch 4 "
     "--seq 1024 --bf16", 30, "--config qwen2.5-0.5b --tiny --batch 4 --micro-batch 2 --seq 16 "
     "--steps 2 --bf16"),
    ("accum/gpt2-fp32", "causal_lm.py", "--config gpt2 --batch 32 --micro-batch 8 --seq 1024", 30,
     "--config gpt2 --tiny --batch 4 --micro-batch 2 --seq 16 --steps 2"),
    # held out with scripts no tune case runs (split.toml's second [[added]] of 2026-12-07)
    ("vit/vit-plain-fp32", "vit_plain.py", "--dim 768 --depth 12 --heads 12 --batch 64", 24,
     "--image 32 --patch 8 --dim 64 --depth 2 --heads 4 --classes 10 --batch 2 --steps 2"),
    ("seq2seq/translate-fp32", "translate.py", "--batch 64 --source 256 --target 256", 24,
     "--vocab 512 --dim 64 --layers 2 --heads 4 --ffn 128 --batch 2 --source 16 --target 16 "
     "--steps 2"),
    ("accum/gpt-plain-bf16", "gpt_accum.py", "--layers 12 --dim 1024 --heads 16 --batch 32 "
     "--micro-batch 8 --seq 1024", 30, "--vocab 512 --layers 2 --dim 64 --heads 4 --batch 4 "
     "--micro-batch 2 --seq 16 --steps 2"),
    # held out, added after sim's cuDNN rules were written (split.toml's [[added]] of the
    # evening of 2026-12-07): other batches, depths, image sizes and layouts of the CNN scripts
    ("cnn/resnet50-fp32-b64", "resnet.py", "--depth 50 --batch 64", 10,
     "--tiny --batch 2 --steps 2"),
    ("cnn/resnet152-bf16", "resnet.py", "--depth 152 --batch 64 --bf16", 14,
     "--tiny --depth 152 --batch 2 --steps 2 --bf16"),
    ("cnn/unet-bf16-b8-384", "unet.py", "--batch 8 --image 384 --bf16", 10,
     "--tiny --batch 2 --steps 2 --bf16"),
    ("cnn/unet-bf16-cl", "unet.py", "--batch 16 --image 384 --bf16 --channels-last", 16,
     "--tiny --batch 2 --steps 2 --bf16 --channels-last"),
]


def zoo_cases() -> list[Case]:
    """The practitioner zoo: plain scripts of bench/ground_truth/zoo/, `python SCRIPT ARGS` on
    CUDA as they are; the table docs/ACCURACY.md is made from (bench/profile_vs_h200.py --suite
    zoo)."""
    out = []
    for name, script, args, gib, tiny in _ZOO:
        cid = f"zoo/{name}"
        out.append(Case(cid, cid, f"{ZOO}/{script}", args.split(), tiny.split() + _CPU,
                        gib=gib, alone=name.startswith("cnn/"), info={"category": cid.split("/")[1]}))
    return out


def with_batch(case: Case, batch: int) -> list[str]:
    """A fit case's arguments at another batch."""
    args = list(case.args)
    args[args.index(case.batch_flag) + 1] = str(batch)
    return args


def load_split() -> dict[str, str]:
    """group -> "tune" | "held_out" (assets/ground_truth/split.toml)."""
    import tomllib

    d = tomllib.loads(SPLIT.read_text())
    out = {}
    # the first split, then each later [[added]] table (its own date): groups never move
    for part in [{h: d[h]["groups"] for h in ("tune", "held_out")}, *d.get("added", [])]:
        for half in ("tune", "held_out"):
            for g in part[half]:
                if g in out:
                    raise ValueError(f"{SPLIT.name}: {g!r} is in both halves, or twice")
                out[g] = half
    return out


def half_of(case: Case, split: dict[str, str]) -> str:
    """tune / held_out; versions/ cases are outside the split."""
    if case.kind == "versions":
        return "versions"
    if case.group not in split:
        raise KeyError(f"{case.id}: group {case.group!r} is in neither half of {SPLIT.name}")
    return split[case.group]


COMPILED = f"{HERE}/compiled"
COMPILED_RESULTS = ROOT / "assets" / "ground_truth" / "compiled_gpu.json"
# Each pair: (name, script, the arguments both versions share, the compiled version's own, the
# eager twin's own, GiB estimate, the tiny CPU arguments). The split is split.toml's [[added]] of
# 2026-12-07 (issue 41), fixed before any of these had run. Sizes keep each compile well under a
# minute on the device's 16 cores with every case of the suite running at once.
_NANOGPT_SMALL = ["--dataset=gt", "--n_layer=4", "--n_head=12", "--n_embd=768", "--batch_size=8",
                  "--block_size=1024", "--max_iters=2", "--gradient_accumulation_steps=2",
                  "--eval_interval=1000", "--eval_iters=1", "--log_interval=1"]
_GPT = "--layers 4 --dim 768 --heads 12 --batch 8 --seq 1024 --steps 3"
_GPT_TINY = "--vocab 512 --layers 2 --dim 64 --heads 4 --batch 2 --seq 32 --steps 2 --device cpu"
_PAIRS = [
    ("nanogpt-small", ".gt_scripts/nanoGPT/train.py", " ".join(_NANOGPT_SMALL),
     "--compile=True --out_dir=out-gtc-compiled", "--compile=False --out_dir=out-gtc-eager", 7,
     " ".join(NANOGPT_TINY)),
    ("hf-gpt2-bf16", f"{HERE}/hf_loop.py", "--config assets/models/gpt2.json --layers 4 --combo "
     "bf16 --batch 8 --seq 1024 --steps 3", "--compile", "", 7,
     "--config assets/models/gpt2.json --combo bf16 --batch 2 --seq 32 --steps 2 --tiny "
     "--device cpu"),
    ("hf-llama-bf16-ckpt", f"{HERE}/hf_loop.py", "--config assets/models/llama-3.2-1b.json "
     "--layers 2 --combo bf16+ckpt --batch 4 --seq 1024 --steps 3", "--compile", "", 10,
     "--config assets/models/llama-3.2-1b.json --combo bf16+ckpt --batch 2 --seq 32 --steps 2 "
     "--tiny --device cpu"),
    ("gpt-fullgraph-fp32", f"{COMPILED}/gpt.py", _GPT, "--compile fullgraph", "--compile off", 9,
     _GPT_TINY + " --compile off"),
    ("gpt-breaks-bf16", f"{COMPILED}/gpt.py", _GPT + " --bf16", "--compile breaks",
     "--compile off", 7, _GPT_TINY + " --bf16 --compile off"),
    ("gpt-ckpt-bf16", f"{COMPILED}/gpt.py", _GPT + " --bf16 --ckpt", "--compile default",
     "--compile off", 5, _GPT_TINY + " --bf16 --ckpt --compile off"),
    ("cnn-resnet18-fp32", f"{COMPILED}/cnn.py", "--batch 64 --image 224 --steps 3",
     "--compile default", "--compile off", 6, "--batch 2 --image 32 --width 8 --steps 2 --device cpu "
     "--compile off"),
    ("cnn-resnet18-bf16", f"{COMPILED}/cnn.py", "--batch 96 --image 160 --steps 3 --bf16",
     "--compile default", "--compile off", 5, "--batch 2 --image 32 --width 8 --steps 2 --device cpu --bf16 "
     "--compile off"),
]
# The suite's own env: a cold Inductor cache per case (a user's first run: autotuning's scratch
# included) and two compile workers per process (every case compiles at once on 16 cores).
COMPILED_ENV = {"TORCHINDUCTOR_COMPILE_THREADS": "2"}


def compiled_cases() -> list[Case]:
    """Scripts under torch.compile, each beside its eager twin (the same script, compile off):
    the ground truth of sim's estimated compiled peak (bench/compiled_vs_gpu.py). The pair is
    the group the split assigns, so both versions land in the same half."""
    out = []
    for name, script, common, comp, eager, gib, tiny in _PAIRS:
        cwd = ".gt_scripts/nanoGPT" if script.startswith(".gt_scripts/nanoGPT") else "."
        info = {"pair": name}
        if cwd != ".":
            info.update(source="nanoGPT", data="data/gt/{train,val}.bin: uint16 random tokens "
                        "(bench/ground_truth/data.py)")
        for version, own in (("compiled", comp), ("eager", eager)):
            out.append(Case(f"compiled/{name}/{version}", f"compiled/{name}", script,
                            common.split() + own.split(), tiny.split(), cwd=cwd,
                            gib=gib if version == "compiled" else gib + 2,
                            info={**info, "version": version, "own": own.split()}))
    return out


SUITES = {"profile": all_cases, "zoo": zoo_cases, "compiled": compiled_cases}  # run_h200.py / profile_vs_h200.py --suite


if __name__ == "__main__":  # list the table (python cases.py [zoo])
    split = load_split()
    for c in SUITES[sys.argv[1] if len(sys.argv) > 1 else "profile"]():
        print(f"{half_of(c, split):<9} {c.id:<40} {c.script} {' '.join(c.args)}", file=sys.stdout)
