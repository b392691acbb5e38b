"""A plain training script of a Llama layout: built on the CPU, moved to the GPU, bf16 autocast."""
import json, sys
import torch
from transformers import AutoConfig, AutoModelForCausalLM

d = json.load(open(sys.argv[1])); d = {k: v for k, v in d.items() if not k.startswith("_")}
cfg = AutoConfig.for_model(d.pop("model_type"), **d); cfg.use_cache = False
model = AutoModelForCausalLM.from_config(cfg)
if "bf16" in sys.argv[2:]:
    model = model.to(torch.bfloat16)  # pure bf16 weights and Adam state
model = model.to("cuda")
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(3):
    ids = torch.randint(0, cfg.vocab_size, (1, 512)).to("cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
    print("step", step, loss.item())
print("max allocated", torch.cuda.max_memory_allocated())
