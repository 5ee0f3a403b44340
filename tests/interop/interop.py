#!/usr/bin/env python3
"""Records llama.cpp's logits (through llama-cpp-python) for fixed prompts on a GGUF model, for the nucleus
reference forward pass to be compared against; optionally times llama.cpp on this machine.

usage:
  interop.py record     [--model GGUF] [--out JSON] [--top K]
  interop.py record-f32 --model F32.gguf --out JSON [--kv f32|f16]
  interop.py fixture-f32 --model F32.gguf --out JSON
  interop.py bench      [--model GGUF] [--threads N]

record (the quantized-activation comparison, on the Q4_1 file) stores, for every prompt position,
llama.cpp's token ids (so no tokenizer is needed on the C++ side), its argmax and its K largest logits
(ids and values); the top K rows are where a forward pass that has gone wrong shows it first.

record-f32 (the fidelity comparison, on make_f32.py's all-F32 copy) runs F32_PROMPTS and stores every
full logit row: the JSON holds each prompt's text and llama.cpp's token ids, and names a file of
float32 rows (JSON's name with .f32, positions x vocab, little-endian) beside it. The KV cache is f32
unless --kv f16 (llama.cpp's default) is asked for, so that llama.cpp does every product in f32.
fixture-f32 writes the committed form of the same comparison (tests/model/fixtures/): for every position of
F32_PROMPTS llama.cpp's FIXTURE_TOP largest logits (ids and values, JSON's name with .top, per position
FIXTURE_TOP pairs of little-endian int32 id and float32 logit, in llama.cpp's rank order), the full rows
of the last position of FIXTURE_FULL_ROWS prompts (JSON's name with .f32), and the lesson's answer: the
16 largest log-softmax values of llama.cpp's row for LESSON_PROMPT, computed in double. KV cache f32 and
flash attention off (its CPU path rounds through f16), so llama.cpp does every product in f32.
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


# The fidelity prompts: none of them is in PROMPTS, and each kind of text the tokenizer and the model see
# (chat template, code, other scripts, emoji, numbers, odd whitespace) is there at least once.
F32_PROMPTS = [
    "<|im_start|>system\nYou are a concise assistant.<|im_end|>\n<|im_start|>user\n"
    "How many legs does a spider have?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nGive me three tips for sleeping better.<|im_end|>\n<|im_start|>assistant\n1.",
    "<|im_start|>user\nWhat is 17 * 23?<|im_end|>\n<|im_start|>assistant\n17 * 23 = 391"
    "<|im_end|>\n<|im_start|>user\nAnd 391 / 17?<|im_end|>\n<|im_start|>assistant\n",
    "#include <vector>\n\nint sum(const std::vector<int>& v) {\n  int s = 0;\n  for (int x : v) s +=",
    "SELECT name, COUNT(*) AS n\nFROM orders\nWHERE created_at >= '2024-01-01'\nGROUP BY",
    "function debounce(fn, ms) {\n\tlet t;\n\treturn (...args) => {\n\t\tclearTimeout(t);",
    "for f in *.txt; do\n  wc -l \"$f\" | awk '{print $1}'\ndone > counts.log",
    "Le petit chat dort sur le canapé pendant que la pluie tombe doucement sur les toits de",
    "Die Wissenschaftler untersuchten die Proben im Labor und stellten fest, dass",
    "Москва — столица России, а Санкт-Петербург был столицей до",
    "東京は日本の首都で、人口は約1400万人です。大阪は",
    "我今天去超市买了苹果、香蕉和牛奶，然后",
    "Party tonight 🎉🎉 bring snacks 🍕🍩 and music 🎶 — see you at 8 👋",
    "안녕하세요! 오늘 날씨가 정말 좋네요 ☀️ 산책하러",
    "In 1969, Apollo 11 landed on the Moon; Neil Armstrong and Buzz Aldrin walked on the surface while",
    "The price rose from $3.50 to $4.25 (a 21.4% increase) between Q1 and Q3 of 2023, and analysts expect",
    '{"id": 42, "tags": ["alpha", "beta"], "active": true, "score": 0.875, "owner": {"name":',
    "Roses are red,\n    violets are blue,\n\n\n    sugar   is sweet   and   so",
]


# The committed fixture's shape (fixture-f32) and the lesson's prompt (tests/server/lesson.sh).
FIXTURE_TOP = 64
FIXTURE_FULL_ROWS = 8
LESSON_PROMPT = "Kubernetes pods are scheduled by the"


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


def record_f32(args):
    import numpy as np
    import llama_cpp
    kv = llama_cpp.GGML_TYPE_F32 if args.kv == "f32" else llama_cpp.GGML_TYPE_F16
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=512, n_batch=512, n_threads=args.threads,
                          n_threads_batch=args.threads, logits_all=True, verbose=False, seed=0,
                          type_k=kv, type_v=kv, flash_attn=False)
    rows_path = os.path.splitext(args.out)[0] + ".f32"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    out = {
        "model": os.path.basename(args.model),
        "generator": "tests/interop/interop.py record-f32",
        "llama_cpp_python": llama_cpp.__version__,
        "kv_cache": args.kv,
        "vocab": llm.n_vocab(),
        "rows": os.path.basename(rows_path),
        "prompts": [],
    }
    t0 = time.perf_counter()
    with open(rows_path + ".tmp", "wb") as rows:
        for text in F32_PROMPTS:
            tokens = llm.tokenize(text.encode(), add_bos=True, special=True)
            llm.reset()
            llm.eval(tokens)
            scores = np.ascontiguousarray(llm.scores[: len(tokens)], dtype="<f4")
            rows.write(scores.tobytes())
            out["prompts"].append({"text": text, "tokens": [int(t) for t in tokens]})
            print(f"{len(tokens):3d} tokens, next {llm.detokenize([int(np.argmax(scores[-1]))])!r}: {text[:40]!r}")
    os.replace(rows_path + ".tmp", rows_path)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
    n = sum(len(p["tokens"]) for p in out["prompts"])
    print(f"wrote {args.out} and {rows_path}: {len(F32_PROMPTS)} prompts, {n} positions, "
          f"KV cache {args.kv}, {time.perf_counter() - t0:.1f} s")


def fixture_f32(args):
    import numpy as np
    import llama_cpp
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=512, n_batch=512, n_threads=args.threads,
                          n_threads_batch=args.threads, logits_all=True, verbose=False, seed=0,
                          type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32, flash_attn=False)
    base = os.path.splitext(args.out)[0]
    out = {
        "model": os.path.basename(args.model),
        "generator": "tests/interop/interop.py fixture-f32",
        "llama_cpp_python": llama_cpp.__version__,
        "kv_cache": "f32",
        "flash_attn": False,
        "vocab": llm.n_vocab(),
        "top": FIXTURE_TOP,
        "top_file": os.path.basename(base + ".top"),
        "rows_file": os.path.basename(base + ".f32"),
        "prompts": [],
    }
    # The full rows: the last position of prompts spread over the list (each kind of text once).
    full = sorted({round(i * (len(F32_PROMPTS) - 1) / (FIXTURE_FULL_ROWS - 1)) for i in range(FIXTURE_FULL_ROWS)})
    tops, rows = bytearray(), bytearray()
    pair = np.dtype([("id", "<i4"), ("logit", "<f4")])
    for n, text in enumerate(F32_PROMPTS):
        tokens = llm.tokenize(text.encode(), add_bos=True, special=True)
        llm.reset()
        llm.eval(tokens)
        scores = np.ascontiguousarray(llm.scores[: len(tokens)], dtype="<f4")
        for row in scores:
            ids = np.argsort(-row, kind="stable")[:FIXTURE_TOP]
            top = np.empty(FIXTURE_TOP, dtype=pair)
            top["id"], top["logit"] = ids, row[ids]
            tops += top.tobytes()
        entry = {"text": text, "tokens": [int(t) for t in tokens]}
        if n in full:
            entry["full_row"] = len(tokens) - 1
            rows += scores[-1].tobytes()
        out["prompts"].append(entry)
    tokens = llm.tokenize(LESSON_PROMPT.encode(), add_bos=True, special=True)
    llm.reset()
    llm.eval(tokens)
    row = np.asarray(llm.scores[len(tokens) - 1], dtype=np.float32).astype(np.float64)
    m = row.max()
    lp = row - (m + np.log(np.exp(row - m).sum()))
    order = np.argsort(-lp, kind="stable")[:16]
    out["lesson"] = {"prompt": LESSON_PROMPT, "tokens": [int(t) for t in tokens],
                     "top": [{"id": int(i), "text": llm.detokenize([int(i)]).decode("utf-8", "replace"),
                              "logprob": float(lp[i])} for i in order]}
    with open(base + ".top", "wb") as f:
        f.write(bytes(tops))
    with open(base + ".f32", "wb") as f:
        f.write(bytes(rows))
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    n = sum(len(p["tokens"]) for p in out["prompts"])
    print(f"wrote {args.out}: {len(F32_PROMPTS)} prompts, {n} positions, top {FIXTURE_TOP}, "
          f"{len(full)} full rows, lesson top-1 {out['lesson']['top'][0]['text']!r}")


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
    p.add_argument("mode", choices=["record", "record-f32", "fixture-f32", "bench"])
    p.add_argument("--model", default=default_model())
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "model", "llama_cpp_logits.json"))
    p.add_argument("--top", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--kv", choices=["f32", "f16"], default="f32", help="record-f32's KV cache type")
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
    {"record": record, "record-f32": record_f32, "fixture-f32": fixture_f32, "bench": bench}[args.mode](args)


if __name__ == "__main__":
    main()
