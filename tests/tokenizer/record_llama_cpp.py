#!/usr/bin/env python3
"""Record llama.cpp's tokenization of a fixed corpus as the tokenizer's ground truth.

Run by hand where llama-cpp-python and the SmolLM2 GGUF are installed; the output is committed
(tests/tokenizer/llama_cpp_tokens.json) so CI needs neither.

    python3 tests/tokenizer/record_llama_cpp.py [--model PATH] [--out PATH]
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# The SmolLM2-Instruct chat template, written out (keep in step with nucleus::model::chatml).
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def chatml(messages, add_generation_prompt=True):
    out = ""
    for i, (role, content) in enumerate(messages):
        if i == 0 and role != "system":
            out += "<|im_start|>system\n" + DEFAULT_SYSTEM + "<|im_end|>\n"
        out += "<|im_start|>" + role + "\n" + content + "<|im_end|>\n"
    if add_generation_prompt:
        out += "<|im_start|>assistant\n"
    return out


CHATS = [
    {"messages": [["user", "What is the capital of France?"]], "add_generation_prompt": True},
    {
        "messages": [
            ["system", "You are a terse assistant."],
            ["user", "Write a haiku about rust.\nMake it short."],
            ["assistant", "Orange bloom on steel,\nslow fire eating the girder."],
            ["user", "Thanks! 👍"],
        ],
        "add_generation_prompt": True,
    },
    {"messages": [["user", "Hi"], ["assistant", "Hello!"]], "add_generation_prompt": False},
]

CORPUS = [
    # ASCII prose
    "Hello world",
    "Hello, world! How are you today?",
    "The quick brown fox jumps over the lazy dog.",
    "ALL CAPS SENTENCE WITH NUMBERS 123ABC",
    "snake_case camelCase PascalCase kebab-case SCREAMING_CASE",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    # empty and whitespace only
    "",
    " ",
    "   ",
    "\n",
    "\n\n\n",
    "\t",
    # leading / trailing / runs of whitespace
    " leading space",
    "  two leading spaces",
    "    indented with four spaces",
    "trailing space ",
    "trailing spaces   ",
    "multiple   spaces   between    words",
    "     leading and trailing     ",
    "tabs\tand\ttabs\t\t\tmore",
    "new\nlines\n\nand\n\n\nmore\n",
    "\r\n windows line endings\r\n\r\n",
    "   \n\t  mixed whitespace \t\n  x",
    " \n \n  \n",
    # punctuation runs
    "!!!???...,,,;;;",
    "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!",
    "a...b---c___d",
    "(parentheses) [brackets] {braces} <angles>",
    "em\u2014dash en\u2013dash \u201cquotes\u201d \u2018single\u2019 \u2026",
    "x = y + z - w * v / u % t ^ s & r | q",
    "markdown **bold** _italic_ `code` # heading > quote",
    # digits and numbers
    "1234567890",
    "3.14159265358979323846",
    "The year 2024 had 366 days; 1,000,000 people.",
    "12345678901234567890123456789012345678901234567890",
    "phone: +1 (555) 123-4567",
    "mixed123numbers456in789words",
    "$100.00 \u20ac50 \u00a320 \u00a51000",
    "superscripts x\u00b2 y\u00b3 \u00bd \u00bc \u216b",
    "fullwidth \uff21\uff22\uff23\uff11\uff12\uff13",
    "math bold \U0001d400\U0001d401\U0001d402 \U0001d7cf\U0001d7d0\U0001d7d1",
    # contractions
    "I'm you're we've they'll she'd it's don't",
    "'s 're 've 'm 'll 'd 't",
    "IT'S UPPER CASE 'S 'RE 'LL",
    "rock'n'roll o'clock '' ''s",
    # accented Latin and other scripts
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9 co\u00f6perate",
    "\u00c5ngstr\u00f6m \u00d8resund \u0141\u00f3d\u017a \u00c7a\u011fr\u0131 \u0160koda",
    "combining: e\u0301 a\u0308 n\u0303",
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac: \u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03ba\u03cc\u03c3\u03bc\u03b5",
    "\u0420\u0443\u0441\u0441\u043a\u0438\u0439 \u0442\u0435\u043a\u0441\u0442: \u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!",
    "\u0423\u043a\u0440\u0430\u0457\u043d\u0441\u044c\u043a\u0430 \u043c\u043e\u0432\u0430: \u0407\u0436\u0430\u043a",
    "\u4e2d\u6587\u6d4b\u8bd5\uff1a\u4f60\u597d\uff0c\u4e16\u754c\uff01",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3001\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a\u3002",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4",
    "Arabic: \u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "Hindi: \u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
    "Thai: \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01",
    "Hebrew: \u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    # emoji
    "emoji \U0001f600\U0001f603\U0001f604 \U0001f389",
    "family \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 ZWJ",
    "flags \U0001f1fa\U0001f1f8\U0001f1eb\U0001f1f7 and skin tone \U0001f44d\U0001f3fd",
    "heart \u2764\ufe0f with variation selector",
    "\U0001f600",
    # unusual whitespace and controls
    "\u00a0non-breaking\u00a0space",
    "zero\u200bwidth space",
    "next\u0085line ideographic\u3000space line\u2028sep",
    "file\u001cseparators\u001d\u001e\u001f",
    "controls \u0001\u0002 \u007f end",
    "\u00ff\u00fe bytes above 0x7f: \u00ff \u00ad soft hyphen",
    # code
    "def foo(x):\n    return x * 2\n",
    "int main() {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}",
    "for (int i = 0; i < n; ++i) { a[i] += b[i]; }",
    "<tag attr=\"value\">content</tag>",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
    "https://example.com/path?query=1&b=2#frag user@example.com",
    # special tokens in text
    "<|im_start|>user\nHi<|im_end|>",
    "text before <|im_start|> and after",
    "<|endoftext|><|endoftext|>",
    "<|im_start|><|im_end|>",
    "not special: <|im_start or im_end|> <|im_end",
    "<filename>main.py<file_sep>print('hi')<|endoftext|>",
    " <|im_end|> \n<|im_start|>  ",
    # long inputs (no quadratic blow-up)
    "a" * 1000,
    "9" * 200,
    " " * 300 + "x",
    "\U0001f600" * 50,
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", help="SmolLM2-135M-Instruct GGUF (default: $NUCLEUS_SMOLLM2_GGUF, else scripts/find-model)")
    ap.add_argument("--out", default=os.path.join(HERE, "llama_cpp_tokens.json"))
    args = ap.parse_args()

    model = args.model or default_model()
    if model is None:
        sys.exit("SmolLM2-135M-Instruct GGUF not found (scripts/deps installs it)")

    import llama_cpp

    llm = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)

    def tok(text, special):
        # add_bos=True asks for the model's own special-token policy (add_bos_token in the GGUF).
        return llm.tokenize(text.encode("utf-8"), add_bos=True, special=special)

    cases = []
    for text in CORPUS:
        cases.append({"text": text, "ids": tok(text, True), "ids_no_special": tok(text, False)})
    chats = []
    for chat in CHATS:
        prompt = chatml(chat["messages"], chat["add_generation_prompt"])
        chats.append(dict(chat, prompt=prompt, ids=tok(prompt, True)))

    doc = {
        "model": os.path.basename(model),
        "llama_cpp_version": getattr(llama_cpp, "__version__", "unknown"),
        "add_special": True,
        "cases": cases,
        "chats": chats,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=True, indent=1)
        f.write("\n")
    print(f"recorded {len(cases)} strings and {len(chats)} chats to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
