#!/usr/bin/env bash
# The lesson's request, with curl, against a running nucleus-server: the 8 most likely next tokens
# and their logprobs must equal nc::top_logprobs on the model's logits for the prompt (computed by
# nucleus_lesson_reference, without the server).
# Usage: lesson.sh SERVER_BINARY REFERENCE_BINARY MODEL
set -euo pipefail
server=$1 reference=$2 model=$3
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
python3 - "$got" "$want" <<'PY'
import json, sys
got, want = json.loads(sys.argv[1]), json.loads(sys.argv[2])
top = got["choices"][0]["logprobs"]["top_logprobs"][0]
print("server:   ", json.dumps(top))
print("reference:", json.dumps({t["text"]: t["logprob"] for t in want["top"]}))
ok = len(top) == 8 == len(want["top"])
ok = ok and list(top) == [t["text"] for t in want["top"]]  # the same tokens, in rank order
ok = ok and all(abs(top[t["text"]] - t["logprob"]) <= 1e-6 for t in want["top"])
ok = ok and got["usage"]["prompt_tokens"] == want["prompt_tokens"]
print("the lesson's request: " + ("the 8 logprobs equal nc::top_logprobs" if ok else "MISMATCH"))
sys.exit(0 if ok else 1)
PY
kill -TERM $pid
wait $pid
