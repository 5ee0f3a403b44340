#!/usr/bin/env python3
"""Records llama.cpp's logits (through llama-cpp-python) for fixed prompts on a GGUF model, for the nucleus
reference forward pass to be compared against; optionally times llama.cpp on this machine.

usage:
  interop.py record [--model GGUF] [--out JSON] [--top K]
  interop.py bench  [--model GGUF] [--threads N]

record stores, for every prompt position, llama.cpp's token ids (so no tokenizer is needed on the C++
side), its argmax and its K largest logits (ids and values). The full logit rows would make a file of
hundreds of megabytes; the top K rows are where a forward pass that has gone wrong shows it first.
Exit code 77 (ctest SKIP_RETURN_CODE) when llama_cpp, numpy or the model is unavailable.
"""

import argparse
import json
import os
import sys
import time

PROMPTS = [
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "One, two, three, four, five, six, seven, eight, nine,",
    "The chemical symbol for gold is Au and the chemical symbol for silver is",
    "<|im_start|>user\nTranslate to French: I like apples.<|im_end|>\n<|im_start|>assistant\n",
    "Once upon a time, in a small village at the edge of a great forest, there lived a",
    "import numpy as np\n\nx = np.arange(10)\nprint(x.",
    "Paris is the capital of France, Berlin is the capital of Germany, and Rome is the capital of",
]


def default_model():
    """$NUCLEUS_SMOLLM2_GGUF, else scripts/find-model's answer (the one way every test finds it)."""
    path = os.environ.get("NUCLEUS_SMOLLM2_GGUF")
    if path is not None:  # set, even empty, by CMake: its answer stands (empty: no model)
        return path or None
    import subprocess
    find = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "find-model")
    r = subprocess.run([sys.executable, find], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def open_model(path, threads, logits_all):
    import llama_cpp
    return llama_cpp.Llama(model_path=path, n_ctx=512, n_batch=512, n_threads=threads,
                           n_threads_batch=threads, logits_all=logits_all, verbose=False, seed=0)


def record(args):
    import numpy as np
    import llama_cpp
    llm = open_model(args.model, args.threads, logits_all=True)
    out = {
        "model": os.path.basename(args.model),
        "generator": "tests/interop/interop.py record",
        "llama_cpp_python": llama_cpp.__version__,
        "top_k": args.top,
        "prompts": [],
    }
    for text in PROMPTS:
        tokens = llm.tokenize(text.encode(), add_bos=True, special=True)
        llm.reset()
        llm.eval(tokens)
        scores = np.array(llm.scores[: len(tokens)], dtype=np.float32)
        positions = []
        for row in scores:
            top = np.argsort(-row, kind="stable")[: args.top]
            positions.append({"ids": [int(i) for i in top], "logits": [float(f"{row[i]:.7g}") for i in top]})
        out["prompts"].append({"text": text, "tokens": [int(t) for t in tokens], "positions": positions})
        print(f"{len(tokens):3d} tokens, next {llm.detokenize([int(np.argmax(scores[-1]))])!r}: {text[:40]!r}")
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {args.out}")


def bench(args):
    for threads in args.threads_list:
        llm = open_model(args.model, threads, logits_all=False)
        prompt = llm.tokenize(PROMPTS[7].encode() * 6, add_bos=True)[:128]
        llm.reset()
        llm.eval(prompt[:8])  # warm-up
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(prompt)
        t_prefill = time.perf_counter() - t0
        n_decode = 64
        t0 = time.perf_counter()
        for i in range(n_decode):
            llm.eval([prompt[i % len(prompt)]])
        t_decode = time.perf_counter() - t0
        print(f"llama.cpp threads={threads}: prefill {len(prompt) / t_prefill:.1f} tok/s ({len(prompt)} tokens), "
              f"decode {n_decode / t_decode:.1f} tok/s")
        del llm


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["record", "bench"])
    p.add_argument("--model", default=default_model())
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "model", "llama_cpp_logits.json"))
    p.add_argument("--top", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    args.threads_list = sorted({1, args.threads})
    try:
        import numpy  # noqa: F401
        import llama_cpp  # noqa: F401
    except ImportError as e:
        print(f"interop.py: skipping, {e}")
        sys.exit(77)
    if not args.model or not os.path.exists(args.model):
        print("interop.py: skipping, no GGUF model (scripts/deps installs it, or pass --model)")
        sys.exit(77)
    record(args) if args.mode == "record" else bench(args)


if __name__ == "__main__":
    main()
