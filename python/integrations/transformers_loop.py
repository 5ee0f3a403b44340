#!/usr/bin/env python3
"""nucleus as the sampler of a Hugging Face transformers decode loop, checked against the C++ one.

SmolLM2-135M-Instruct is loaded by transformers from the project's GGUF (``gguf_file=``, which
dequantizes it to float32); each step's last-position logits (a torch CPU tensor) go straight to
``nucleus.Sampler.sample`` with the draw key (seed, position = tokens generated so far), as the C++
``generate`` example (examples/generate.cpp) does over nucleus's own forward pass. Both loops start
from the prompt ids the C++ tokenizer made (transformers' tokenizer must give the same ids too).

The check: step by step, while both histories are equal, wherever the two forward passes agree on
the row's argmax, the drawn tokens must be equal; the first step where the argmaxes differ ends the
comparison (the forward passes, not the samplers, disagree there). Each case must compare at least
--min-steps steps. Exit 0 when every case holds, 1 otherwise.

Opt-in tier (PyPI's torch brings gigabytes of CUDA libraries): scripts/test-transformers installs
torch, transformers, accelerate and gguf into a virtual environment and runs this.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import torch
import transformers

import nucleus

# (name, generate's --preset or knobs, the same knobs for nucleus.Sampler, seed)
CASES = [
    ("greedy (preset eval)", ["--preset", "eval"], dict(temperature=0.0), 0),
    ("chat T 0.7 top-p 0.9, seed 7", ["--preset", "chat"], dict(temperature=0.7, top_p=0.9), 7),
    ("chat T 0.7 top-p 0.9, seed 12345", ["--preset", "chat"], dict(temperature=0.7, top_p=0.9), 12345),
    ("T 1.0 top-k 40 min-p 0.05, seed 3", ["--temperature", "1.0", "--top-k", "40", "--min-p", "0.05"],
     dict(temperature=1.0, top_k=40, min_p=0.05), 3),
]


def run_cpp(generate, model, prompt, knobs, seed, max_tokens):
    out = subprocess.run([generate, "--model", model, "--prompt", prompt, "--seed", str(seed), "--max-tokens",
                          str(max_tokens), "--ids", *knobs], check=True, capture_output=True, text=True).stdout
    lines = [l for l in out.splitlines() if l.strip()]
    assert lines[0].startswith("prompt:"), out
    prompt_ids = [int(x) for x in lines[0].split()[1:]]
    steps = [tuple(int(x) for x in l.split()) for l in lines[1:]]
    return prompt_ids, [s[0] for s in steps], [s[1] for s in steps]


@torch.inference_mode()
def run_hf(model, prompt_ids, sampler, seed, max_tokens, eos):
    out = model(torch.tensor([prompt_ids]), use_cache=True)
    tokens, argmaxes, gaps = [], [], []
    for position in range(max_tokens):
        row = out.logits[0, -1].to(torch.float32).contiguous()  # read in place by nucleus (DLPack)
        top2 = torch.topk(row, 2)
        argmaxes.append(int(top2.indices[0]))
        gaps.append(float(top2.values[0] - top2.values[1]))
        r = sampler.sample(row, seed=seed, position=position)
        if r.status != "ok" or r.token == eos:
            break
        tokens.append(int(r.token))
        if position + 1 < max_tokens:
            out = model(torch.tensor([[r.token]]), past_key_values=out.past_key_values, use_cache=True)
    return tokens, argmaxes, gaps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generate", required=True, help="the C++ generate example (build/examples/generate)")
    ap.add_argument("--model", required=True, help="SmolLM2-135M-Instruct's GGUF (scripts/find-model)")
    ap.add_argument("--prompt", default="Write one sentence about Kubernetes.")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--min-steps", type=int, default=16)
    a = ap.parse_args()

    d, f = os.path.dirname(a.model), os.path.basename(a.model)
    model = transformers.AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32).eval()
    tok = transformers.AutoTokenizer.from_pretrained(d, gguf_file=f)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, nucleus {nucleus.__version__}; "
          f"{type(model).__name__}, vocab {model.config.vocab_size}, eos {eos}")
    hf_prompt = tok.apply_chat_template([{"role": "user", "content": a.prompt}], add_generation_prompt=True)
    if isinstance(hf_prompt, dict) or hasattr(hf_prompt, "keys"):
        hf_prompt = hf_prompt["input_ids"]
    failed = False
    for name, knobs, params, seed in CASES:
        prompt_ids, cpp_tokens, cpp_argmax = run_cpp(a.generate, a.model, a.prompt, knobs, seed, a.max_tokens)
        if list(hf_prompt) != prompt_ids:
            print(f"FAIL {name}: transformers' chat template gives other prompt ids than nucleus's tokenizer:\n"
                  f"  {list(hf_prompt)}\n  {prompt_ids}")
            failed = True
        sampler = nucleus.Sampler("nucleus", **params)
        hf_tokens, hf_argmax, gaps = run_hf(model, prompt_ids, sampler, seed, a.max_tokens, eos)
        compared, why = 0, "end of both"
        n = max(len(cpp_tokens), len(hf_tokens))
        for i in range(n):
            if i >= len(cpp_tokens) or i >= len(hf_tokens):
                why = f"only one loop went on at step {i} (C++ {len(cpp_tokens)} tokens, transformers {len(hf_tokens)})"
                failed = failed or cpp_argmax[i:i + 1] == hf_argmax[i:i + 1]
                break
            if cpp_argmax[i] != hf_argmax[i]:
                why = (f"the forward passes' argmax differ at step {i} (C++ {cpp_argmax[i]}, transformers "
                       f"{hf_argmax[i]}, transformers' top-2 gap {gaps[i]:.2e})")
                break
            if cpp_tokens[i] != hf_tokens[i]:
                print(f"FAIL {name}: step {i}: C++ drew {cpp_tokens[i]}, transformers + nucleus drew "
                      f"{hf_tokens[i]}, with the same argmax {cpp_argmax[i]}")
                failed = True
                break
            compared += 1
        if compared < min(a.min_steps, n):
            print(f"FAIL {name}: only {compared} steps compared (at least {a.min_steps} wanted): {why}")
            failed = True
        else:
            print(f"ok   {name}: {compared} of {n} tokens equal; stopped: {why}")
        print(f"     text: {tok.decode(hf_tokens[:compared])!r}")
    print("transformers loop:", "FAILED" if failed else "every case holds")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
