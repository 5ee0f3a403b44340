#!/usr/bin/env python3
"""Extract a GGUF's tokenizer.ggml.* metadata into JSON (the fields of nucleus::model::tokenizer_data).

    python3 tests/tokenizer/dump_vocab.py --out vocab.json [--model PATH]

Exits 77 (ctest's skip code here) when the model or the `gguf` package is not installed.
"""
import argparse
import json
import os
import sys

SKIP = 77


def default_model():
    """$NUCLEUS_SMOLLM2_GGUF, else scripts/find-model's answer (the one way every test finds it)."""
    path = os.environ.get("NUCLEUS_SMOLLM2_GGUF")
    if path is not None:  # set, even empty, by CMake: its answer stands (empty: no model)
        return path or None
    import subprocess
    find = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "find-model")
    r = subprocess.run([sys.executable, find], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", help="GGUF file (default: $NUCLEUS_SMOLLM2_GGUF, else scripts/find-model)")
    args = ap.parse_args()

    def skip(why):
        if os.path.exists(args.out):
            os.remove(args.out)  # never leave a stale fixture behind for the C++ test
        print(f"SKIP: {why}", file=sys.stderr)
        sys.exit(SKIP)

    model = args.model or default_model()
    if model is None:
        skip("SmolLM2-135M-Instruct GGUF not found (scripts/deps installs it)")
    if not os.path.exists(model):
        skip(f"{model} not found")
    try:
        from gguf import GGUFReader
    except ImportError:
        skip("the gguf package is not installed")
    # Reading 49k strings through GGUFReader takes seconds: reuse an output newer than its inputs.
    model = os.path.abspath(model)
    if os.path.exists(args.out) and os.path.getmtime(args.out) > max(
        os.path.getmtime(model), os.path.getmtime(os.path.abspath(__file__))
    ):
        with open(args.out, encoding="utf-8") as f:
            if json.load(f).get("source") == model:
                print(f"{args.out} is up to date")
                return

    reader = GGUFReader(model)

    def field(name, default=None):
        f = reader.fields.get(name)
        return default if f is None else f.contents()

    def strings(name):
        f = reader.fields.get(name)
        if f is None:
            return []
        # Raw bytes, decoded strictly: a token that is not UTF-8 must fail here, not be mangled.
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    doc = {
        "source": model,
        "tokens": strings("tokenizer.ggml.tokens"),
        "merges": strings("tokenizer.ggml.merges"),
        "token_types": [int(t) for t in field("tokenizer.ggml.token_type", [])],
        "pre": field("tokenizer.ggml.pre", ""),
        "bos": int(field("tokenizer.ggml.bos_token_id", -1)),
        "eos": int(field("tokenizer.ggml.eos_token_id", -1)),
        "unk": int(field("tokenizer.ggml.unknown_token_id", -1)),
        "pad": int(field("tokenizer.ggml.padding_token_id", -1)),
        "add_bos": bool(field("tokenizer.ggml.add_bos_token", False)),
    }
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)
    os.replace(tmp, args.out)
    print(f"{len(doc['tokens'])} tokens, {len(doc['merges'])} merges, pre={doc['pre']!r} -> {args.out}")


if __name__ == "__main__":
    main()
