#!/usr/bin/env bash
# The lesson's request, with curl, against a running nucleus-server: the 8 most likely next tokens
# and their logprobs must equal nc::top_logprobs on the model's logits for the prompt (computed by
# nucleus_lesson_reference, without the server), and agree with llama.cpp's answer on the F32 weights
# (LLAMA_CPP_FIXTURE, recorded by tests/interop/interop.py fixture-f32): the same tokens in the same
# rank order (where llama.cpp's neighbours are more than the tolerance apart) and logprobs within it.
# Usage: lesson.sh SERVER_BINARY REFERENCE_BINARY MODEL LLAMA_CPP_FIXTURE
set -euo pipefail
server=$1 reference=$2 model=$3 fixture=$4
[ -f "$model" ] || { echo "NUCLEUS_SKIP: no SmolLM2 model"; exit 77; }
command -v curl >/dev/null || { echo "NUCLEUS_SKIP: no curl"; exit 77; }
prompt="Kubernetes pods are scheduled by the"
log=$(mktemp)
"$server" --model "$model" --port 0 --ctx 512 >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 600); do
  grep -q "listening on" "$log" && break
  kill -0 $pid 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.1
done
port=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1 | cut -d: -f3)
got=$(curl -s "localhost:$port/v1/completions" -H 'Content-Type: application/json' \
  -d "{\"prompt\":\"$prompt\",\"max_tokens\":1,\"logprobs\":8}")
want=$("$reference" "$model" "$prompt" 8)
wide=$("$reference" "$model" "$prompt" 32)
python3 - "$got" "$want" "$wide" "$fixture" "$prompt" <<'PY'
import json, sys
got, want, wide = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
with open(sys.argv[4]) as f:
    peer = json.load(f)["lesson"]
top = got["choices"][0]["logprobs"]["top_logprobs"][0]
print("server:   ", json.dumps(top))
print("reference:", json.dumps({t["text"]: t["logprob"] for t in want["top"]}))
ok = len(top) == 8 == len(want["top"])
ok = ok and list(top) == [t["text"] for t in want["top"]]  # the same tokens, in rank order
ok = ok and all(abs(top[t["text"]] - t["logprob"]) <= 1e-6 for t in want["top"])
ok = ok and got["usage"]["prompt_tokens"] == want["prompt_tokens"]
print("the lesson's request: " + ("the 8 logprobs equal nc::top_logprobs" if ok else "MISMATCH"))

# llama.cpp on the F32 weights (f32 KV cache, no flash attention): its logits differ from nucleus's by
# float rounding only (tests/model/llama_cpp_f32.cpp: max 2e-3 over 626 positions).
tol = 2e-3
text_of = {t["id"]: t["text"] for t in wide["top"]}
agree = peer["prompt"] == sys.argv[5] and len(peer["tokens"]) == got["usage"]["prompt_tokens"]
print("llama.cpp:", json.dumps({text_of.get(t["id"], t["id"]): round(t["logprob"], 6) for t in peer["top"][:8]}))
names = list(top)
for rank, t in enumerate(peer["top"][:8]):
    text = text_of.get(t["id"])
    if text is None or text not in top or abs(top[text] - t["logprob"]) > tol:
        agree = False
        continue
    # Rank order: the server's rank equals llama.cpp's unless a neighbour is within the tolerance.
    near = [u["id"] for u in peer["top"][:9] if abs(u["logprob"] - t["logprob"]) <= tol]
    if names.index(text) != rank and len(near) < 2:
        agree = False
print("the lesson's request: " + ("llama.cpp's 8 on the F32 weights agree" if agree else "MISMATCH with llama.cpp"))
sys.exit(0 if ok and agree else 1)
PY
kill -TERM $pid
wait $pid
