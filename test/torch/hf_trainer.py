"""Hugging Face's Trainer, unchanged, on three small causal language models built from their
configurations (no download): GPT-2, Llama (grouped-query attention, RMSNorm, rotary positions)
and Mixtral (a mixture of experts, whose router counts tokens per expert with histc). Started by
torchrun with two ranks: under fgpu on fake GPUs (NCCL), or with --cpu on the CPU (gloo), the
reference. Rank 0 writes every model's logged losses to --out. Exits 77 without transformers or
accelerate."""

import argparse
import json
import os
import sys

import torch
from torch.utils.data import Dataset

try:
    import accelerate  # noqa: F401  (the Trainer needs it)
    import transformers
except ImportError as e:
    print(f"hf_trainer: {e} (scripts/setup-torch installs transformers and accelerate when the package index is "
          "reachable)", flush=True)
    sys.exit(77)

VOCAB = 128


class Tokens(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        ids = torch.randint(0, VOCAB, (32,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


def models():
    small = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=64)
    yield "gpt2", transformers.GPT2LMHeadModel, transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=2, n_head=4, attn_pdrop=0.0, resid_pdrop=0.0,
        embd_pdrop=0.0)
    yield "llama", transformers.LlamaForCausalLM, transformers.LlamaConfig(**small)
    yield "mixtral", transformers.MixtralForCausalLM, transformers.MixtralConfig(
        num_local_experts=4, num_experts_per_tok=2, **small)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    transformers.logging.set_verbosity_error()
    losses = {}
    for name, model_class, config in models():
        torch.manual_seed(0)
        model = model_class(config)
        args = transformers.TrainingArguments(
            output_dir=os.path.join(os.path.dirname(a.out), name), per_device_train_batch_size=4, max_steps=4,
            logging_steps=1, learning_rate=1e-3, report_to=[], save_strategy="no", use_cpu=a.cpu,
            ddp_backend="gloo" if a.cpu else "nccl", disable_tqdm=True, seed=0)
        trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens())
        trainer.train()
        losses[name] = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    if int(os.environ.get("RANK", "0")) == 0:
        with open(a.out, "w") as f:
            json.dump(losses, f)
        print("hf_trainer:", json.dumps(losses), flush=True)
    # The Trainer leaves its process group to the caller. Left alive, gloo's worker threads can
    # abort the interpreter as it finalizes ("terminate called without an active exception").
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
