"""nucleus-server end to end: the official openai client, bad input, a client that leaves mid-stream
or before its non-streamed answer, a client that trickles its headers, 32 concurrent clients whose
seeded outputs must equal the same requests run alone, and SIGTERM.

Usage: test_server.py --server BINARY --model GGUF   (ctest: nucleus_server; under ASan in the
sanitizer pass of scripts/test, where any leak or memory error fails the exit-code check)."""
import http.client
import json
import os
import select
import socket
import sys
import threading
import time

import harness

opts = harness.args(sys.argv)
try:
    import openai
except ImportError:
    print("NUCLEUS_SKIP: the openai package is missing (scripts/deps installs it)")
    sys.exit(harness.SKIP)

# Under the sanitizers the model's forward pass runs 10-20x slower, and it is not what they are here
# for (nucleus_model_smollm2 runs it under ASan). There (scripts/test sets NUCLEUS_SERVER_TEST_SMALL=1
# under ASan+UBSan and under TSan) the server loads a small model with the real model's tokenizer,
# name and chat template (small_model.py), and the whole test runs on it.
SMALL = os.environ.get("NUCLEUS_SERVER_TEST_SMALL") == "1"
model_file = opts["--model"]
if SMALL:
    import atexit
    import shutil
    import tempfile

    try:
        import small_model
    except ImportError as e:  # numpy or gguf missing (scripts/deps installs both): the real model, slowly
        print(f"test_server.py: no small model ({e}); the real one under the sanitizer")
    else:
        small_dir = tempfile.mkdtemp(prefix="nucleus-server-test-")
        atexit.register(shutil.rmtree, small_dir, True)
        model_file = os.path.join(small_dir, "SmolLM2-small.gguf")  # the stem is the model's id
        small_model.write(opts["--model"], model_file)
CTX = 1024
MAX_BODY = 256 * 1024
READ_LIMIT = 2  # seconds a request may take to arrive (--request-read-timeout)
server = harness.Server(opts["--server"], model_file, "--ctx", str(CTX), "--max-batch", "8",
                        "--threads", "2", "--max-body", str(MAX_BODY), "--request-read-timeout", str(READ_LIMIT))
t = harness.Checks()


def report_server(exc_type, exc, tb):
    """An uncaught error (the server gone mid-request, say): the server's state and its last output
    (a sanitizer's report goes there), then the error."""
    code = server.proc.poll()
    state = "still running" if code is None else f"exited with {code}"
    print(f"test_server.py: uncaught {exc_type.__name__}; nucleus-server {state}; its last output:\n" +
          "".join(server.lines[-80:]), flush=True)
    sys.__excepthook__(exc_type, exc, tb)


sys.excepthook = report_server
# One retry: the server closes a connection idle for 2 s (its keep-alive), httpx keeps one pooled for
# 5 s, so a request can go out on a connection the server has just closed ("Server disconnected
# without sending a response": seen once under TSan on a loaded machine). A server that died fails the
# retry as well; error statuses the checks expect (4xx) are never retried.
client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=1, timeout=600)

# --- what a client sees first -------------------------------------------------------------------
banner = "".join(server.lines)
t.check("binds to 127.0.0.1 by default and says so", "http://127.0.0.1:" in banner and "this machine only" in banner,
        banner)
t.check("GET /health", server.health()["status"] == "ok")
models = client.models.list()
model = models.data[0].id
t.check("GET /v1/models through the client", len(models.data) == 1 and model.startswith("SmolLM2"), str(models))

# --- completions through the official client ------------------------------------------------------
prompt = "The three primary colors are"
kw = dict(model=model, prompt=prompt, max_tokens=10, temperature=0.8, top_p=0.95, seed=7, logprobs=3)
one = client.completions.create(n=1, **kw)
t.check("a completion through the client", one.choices[0].finish_reason in ("stop", "length"))
a = client.completions.create(n=2, **kw)
b = client.completions.create(n=2, **kw)
t.check("completions: n choices", len(a.choices) == 2 and [c.index for c in a.choices] == [0, 1])
t.check("completions: same seed, same text and logprobs",
        [c.model_dump() for c in a.choices] == [c.model_dump() for c in b.choices])
t.check("completions: choice 0 of n = 2 is the n = 1 answer", a.choices[0].model_dump() == one.choices[0].model_dump())
t.check("completions: usage counts tokens",
        a.usage.prompt_tokens > 0 and a.usage.total_tokens == a.usage.prompt_tokens + a.usage.completion_tokens
        and 0 < a.usage.completion_tokens <= 20, str(a.usage))
for c in a.choices:
    lp = c.logprobs
    t.check("completions: logprobs per token", len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs)
            == len(lp.text_offset) and len(lp.tokens) >= 1, str(lp))
    t.check("completions: tokens join to the text", "".join(lp.tokens) == c.text or c.finish_reason == "stop",
            f"{lp.tokens!r} vs {c.text!r}")
    t.check("completions: 3 alternatives, in descending order",
            all(len(d) == 3 and list(d.values()) == sorted(d.values(), reverse=True) for d in lp.top_logprobs),
            str(lp.top_logprobs))
    t.check("completions: logprobs <= 0", all(x <= 0 for x in lp.token_logprobs))
    t.check("completions: offsets follow the text",
            all(lp.text_offset[i + 1] - lp.text_offset[i] == len(lp.tokens[i].encode()) for i in range(len(lp.tokens) - 1))
            or any("\ufffd" in x for x in lp.tokens), str(lp.text_offset))
    t.check("completions: finish_reason", c.finish_reason in ("stop", "length"), c.finish_reason)

streamed = list(client.completions.create(stream=True, **kw))
text = "".join(ch.choices[0].text for ch in streamed if ch.choices)
t.check("completions stream: same text as without stream", text == one.choices[0].text, f"{text!r} vs {one.choices[0].text!r}")
t.check("completions stream: ends with a finish_reason", streamed[-1].choices[0].finish_reason == one.choices[0].finish_reason)
usage_stream = list(client.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
t.check("completions stream: include_usage", usage_stream[-1].usage is not None
        and usage_stream[-1].usage.completion_tokens == one.usage.completion_tokens, str(usage_stream[-1]))

# Greedy is greedy whatever the seed; a stop string cuts the text before it, also when streamed.
g1 = client.completions.create(model=model, prompt=prompt, max_tokens=16, temperature=0, seed=1)
g2 = client.completions.create(model=model, prompt=prompt, max_tokens=16, temperature=0, seed=2)
t.check("temperature 0 ignores the seed", g1.choices[0].text == g2.choices[0].text)
greedy = g1.choices[0].text
words = greedy.split(" ")
if len(words) > 3:
    stop = " " + words[3][:3] if words[3] else ","
    cut = client.completions.create(model=model, prompt=prompt, max_tokens=16, temperature=0, stop=[stop, "\u2603"])
    want = greedy[:greedy.index(stop)]
    t.check("stop: the text ends before the stop string", cut.choices[0].text == want and
            cut.choices[0].finish_reason == "stop", f"{cut.choices[0].text!r} vs {want!r}")
    chunks = list(client.completions.create(model=model, prompt=prompt, max_tokens=16, temperature=0, stop=[stop],
                                            stream=True))
    t.check("stop: the same when streamed", "".join(c.choices[0].text for c in chunks if c.choices) == want)
first = client.completions.create(model=model, prompt=prompt, max_tokens=1, temperature=0, logprobs=1)
top_token = first.choices[0].logprobs.tokens[0]
dist = server.post("/v1/nucleus/distribution", {"prompt": prompt, "temperature": 0, "top": 2})[1]
banned = client.completions.create(model=model, prompt=prompt, max_tokens=1, temperature=0,
                                   logit_bias={str(dist["tokens"][0]["id"]): -100})
t.check("logit_bias -100 removes the greedy token", banned.choices[0].text != top_token and
        banned.choices[0].text == dist["tokens"][1]["text"], f"{banned.choices[0].text!r}")
echo = client.completions.create(model=model, prompt=prompt, max_tokens=3, temperature=0, echo=True)
t.check("echo: the prompt comes first", echo.choices[0].text.startswith(prompt) and echo.choices[0].text[len(prompt):] ==
        greedy[:len(echo.choices[0].text) - len(prompt)])

# --- chat ---------------------------------------------------------------------------------------------
messages = [{"role": "user", "content": "Name a fruit."}]
chat = client.chat.completions.create(model=model, messages=messages, max_tokens=12, seed=3,
                                      temperature=0.7, logprobs=True, top_logprobs=2)
msg = chat.choices[0]
content = msg.logprobs.content
t.check("chat: assistant message", msg.message.role == "assistant" and len(msg.message.content) > 0, str(msg))
t.check("chat: logprob bytes spell the content",
        bytes(b for c in content for b in c.bytes).decode(errors="replace") == msg.message.content
        or msg.finish_reason == "stop", str(content))
t.check("chat: top_logprobs 2 each", all(len(c.top_logprobs) == 2 for c in content))
chat_stream = list(client.chat.completions.create(model=model, messages=messages, max_tokens=12,
                                                  seed=3, temperature=0.7, stream=True))
t.check("chat stream: role first, same content",
        chat_stream[0].choices[0].delta.role == "assistant" and
        "".join(c.choices[0].delta.content or "" for c in chat_stream if c.choices) == msg.message.content)
t.check("chat stream: finish_reason", chat_stream[-1].choices[0].finish_reason == msg.finish_reason)
try:
    client.chat.completions.create(model=model, messages=messages, temperature=-1)
    t.check("the client sees a 400 for a bad knob", False, "no error")
except openai.BadRequestError as e:
    t.check("the client sees a 400 for a bad knob", e.status_code == 400 and e.body.get("param") == "temperature", str(e))

# --- the distribution endpoint agrees with a one-token completion -----------------------------------
knobs = {"temperature": 0.9, "top_k": 5, "top_p": 0.9, "seed": 11}
status, d = server.post("/v1/nucleus/distribution", {"prompt": prompt, "top": 20, **knobs})
one_token = server.post("/v1/completions", {"prompt": prompt, "max_tokens": 1, **knobs})[1]
t.check("distribution: its seeded sample is the completion's first token",
        status == 200 and d["sample"]["text"] == one_token["choices"][0]["text"], f"{d.get('sample')} vs {one_token}")
kept = [x for x in d["tokens"] if x["kept"]]
t.check("distribution: survivors renormalized", len(kept) == d["kept"] <= 5 and abs(sum(x["p"] for x in kept) - 1) < 1e-5,
        str(d))
t.check("distribution: raw probabilities descend", all(d["tokens"][i]["p_raw"] >= d["tokens"][i + 1]["p_raw"]
                                                       for i in range(len(d["tokens"]) - 1)))

# --- bad input: a clear error naming the parameter --------------------------------------------------
long_prompt = "word " * (CTX + 100)
faults = [
    ("/v1/completions", b"{not json", 400, None),
    ("/v1/completions", b"[1, 2]", 400, None),
    ("/v1/completions", b'{"prompt": "x", "temperature": 8e999}', 400, None),
    ("/v1/completions", {"prompt": 5}, 400, "prompt"),
    ("/v1/completions", {"prompt": "x", "temperature": "hot"}, 400, "temperature"),
    ("/v1/completions", {"prompt": "x", "top_p": 2}, 400, "top_p"),
    ("/v1/completions", {"prompt": "x", "top_k": 1.5}, 400, "top_k"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "n": 100}, 400, "n"),
    ("/v1/completions", {"prompt": "x", "logprobs": 99}, 400, "logprobs"),
    ("/v1/completions", {"prompt": "x", "logit_bias": {"999999": 1}}, 400, "logit_bias.999999"),
    ("/v1/completions", {"prompt": "x", "logit_bias": {"12": 500}}, 400, "logit_bias.12"),
    ("/v1/completions", {"prompt": "x", "logit_bias": {"twelve": 1}}, 400, "logit_bias.twelve"),
    ("/v1/completions", {"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, 400, "stop"),
    ("/v1/completions", {"prompt": "x", "stream": "yes"}, 400, "stream"),
    ("/v1/completions", {"prompt": "x", "frobnicate": 1}, 400, "frobnicate"),
    ("/v1/completions", {"prompt": "x", "nucleus": {"top_n_sigma": "x"}}, 400, "nucleus.top_n_sigma"),
    ("/v1/completions", {"prompt": "x", "nucleus": {"mirostat": 5}}, 400, "nucleus.mirostat"),
    ("/v1/completions", {"prompt": "x", "nucleus": {"preset": "vllm", "typical_p": 0.5}}, 400, "nucleus.typical_p"),
    ("/v1/completions", {"prompt": "x", "presence_penalty": 1, "nucleus": {"preset": "hf"}}, 400, "presence_penalty"),
    ("/v1/completions", {"prompt": "x", "nucleus": {"preset": "ollama"}}, 400, "nucleus.preset"),
    ("/v1/completions", {"prompt": "x", "nucleus": {"gremlins": 1}}, 400, "nucleus.gremlins"),
    ("/v1/completions", {"prompt": long_prompt}, 400, "prompt"),
    ("/v1/completions", {"prompt": "x", "max_tokens": CTX}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": [999999]}, 400, "prompt"),
    ("/v1/completions", {"prompt": ""}, 400, "prompt"),
    ("/v1/completions", {"max_tokens": 3}, 400, "prompt"),
    ("/v1/chat/completions", {"messages": "hi"}, 400, "messages"),
    ("/v1/chat/completions", {"messages": []}, 400, "messages"),
    ("/v1/chat/completions", {"messages": [{"role": "robot", "content": "x"}]}, 400, "messages[0].role"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": 7}]}, 400, "messages[0].content"),
    ("/v1/chat/completions", {"messages": messages, "top_logprobs": 2}, 400, "top_logprobs"),
    ("/v1/chat/completions", {"messages": messages, "prompt": "x"}, 400, "prompt"),
    ("/v1/nucleus/distribution", {"prompt": "x", "top": 1000}, 400, "top"),
]
for path, body, want_status, want_param in faults:
    status, res = server.request("POST", path, raw=body if isinstance(body, bytes) else None,
                                 body=None if isinstance(body, bytes) else body)
    shape = isinstance(res, dict) and set(res.get("error", {})) == {"message", "type", "param", "code"}
    t.check(f"fault {path} {str(body)[:60]}: {want_status} naming {want_param}",
            status == want_status and shape and res["error"]["param"] == want_param, f"{status} {res}")
status, res = server.request("POST", "/v1/completions", raw=b'{"prompt": "' + b"a" * (MAX_BODY + 10) + b'"}')
t.check("oversized body: 413 with an error object", status == 413 and "error" in res, f"{status} {res}")
status, res = server.request("GET", "/v1/nope")
t.check("unknown endpoint: 404", status == 404, f"{status} {res}")
t.check("still healthy after the faults", server.health()["status"] == "ok")

# --- a client that leaves mid-stream frees its sequence -----------------------------------------------
before = server.health()["nucleus"]["tokens"]
conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
long_tokens = CTX - 64
conn.request("POST", "/v1/completions", body=json.dumps({"prompt": "Count: 1, 2, 3,", "max_tokens": long_tokens,
                                                         "stream": True, "nucleus": {"ignore_eos": True}}),
             headers={"Content-Type": "application/json"})
res = conn.getresponse()
got = [res.fp.readline() for _ in range(6)]
conn.sock.close()
conn.close()
deadline = time.time() + 300
# The scheduler counts a step's sequences after the step's forward pass, so the first tokens can reach
# the client before the health counts them: wait for the count first, or "active" may still read 0.
while server.health()["nucleus"]["tokens"] - before < 1 and time.time() < deadline:
    time.sleep(0.01)
while server.health()["nucleus"]["active"] > 0 and time.time() < deadline:
    time.sleep(0.05)
generated = server.health()["nucleus"]["tokens"] - before
t.check("disconnect: the sequence left the batch", server.health()["nucleus"]["active"] == 0)
t.check("disconnect: it stopped early", generated < long_tokens, f"{generated} of {long_tokens} tokens generated")
after = client.completions.create(n=1, **kw)
t.check("disconnect: the server goes on", after.choices[0].model_dump() == one.choices[0].model_dump())

# --- a client that leaves before a non-streamed answer frees its sequence too ----------------------------
before = server.health()["nucleus"]["tokens"]
body = json.dumps({"prompt": "Count: 1, 2, 3,", "max_tokens": long_tokens, "nucleus": {"ignore_eos": True}}).encode()
sock = socket.create_connection(("127.0.0.1", server.port))
sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             b"Content-Length: %d\r\n\r\n" % len(body) + body)
deadline = time.time() + 300
while server.health()["nucleus"]["tokens"] - before < 2 and time.time() < deadline:
    time.sleep(0.01)
sock.close()
left = time.time()
while server.health()["nucleus"]["active"] > 0 and time.time() < deadline:
    time.sleep(0.05)
generated = server.health()["nucleus"]["tokens"] - before
t.check("disconnect, not streamed: the sequence left the batch", server.health()["nucleus"]["active"] == 0,
        f"still active {time.time() - left:.1f} s after the client left")
t.check("disconnect, not streamed: it stopped early", generated < long_tokens,
        f"{generated} of {long_tokens} tokens generated")

# --- a client that trickles its headers is cut off: the whole request has READ_LIMIT seconds ------------
# A byte every 0.2 s beats any per-read timeout; only a deadline on the whole request ends it.
sock = socket.create_connection(("127.0.0.1", server.port))
start = time.time()
sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
closed = None
while closed is None and time.time() - start < READ_LIMIT + 10:
    try:
        if select.select([sock], [], [], 0.2)[0]:
            closed = sock.recv(4096)  # the end (b""), or whatever the server says before closing
        else:
            sock.sendall(b"a")
    except OSError as e:  # reset, or a broken pipe
        closed = repr(e)
took = time.time() - start
sock.close()
t.check("trickled headers: the server closes the connection", closed is not None,
        f"still open after {took:.1f} s of one byte per 0.2 s")
t.check("trickled headers: within the request's time limit", took < READ_LIMIT + 2, f"{took:.1f} s")
t.check("trickled headers: the server goes on", server.health()["status"] == "ok")

# --- a new connection's first request may come after the keep-alive idle time (2 s) -----------------------
# A connected client may wait for the CPU before it writes: the first request has the read timeout (5 s).
# (Before, the idle rule closed such a connection at 2 s and its request was answered by a reset.)
sock = socket.create_connection(("127.0.0.1", server.port))
time.sleep(3.0)
body = json.dumps({"prompt": "Hi", "max_tokens": 1}).encode()
reply = b""
try:
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    sock.settimeout(300)
    while b"\r\n\r\n" not in reply:
        chunk = sock.recv(4096)
        if not chunk:
            break
        reply += chunk
except OSError as e:  # reset, or a broken pipe
    reply += repr(e).encode()
sock.close()
t.check("a first request 3 s after connecting is answered", reply.startswith(b"HTTP/1.1 200"), reply[:200])


# --- 32 concurrent clients: each seeded output equals the same request alone --------------------------
def spec(i):
    base = {"max_tokens": 6 + i % 5, "seed": 100 + i, "temperature": [0.0, 0.7, 1.0, 1.3][i % 4]}
    if i % 3 == 0:
        base["top_k"] = 20
    if i % 4 == 1:
        base["top_p"] = 0.9
    if i % 5 == 2:
        base["nucleus"] = {"preset": "llama_cpp", "typical_p": 0.95}
    if i % 6 == 3:
        base["repetition_penalty"] = 1.2
    if i % 7 == 4:
        base["logprobs"] = 2
    stream = i % 2 == 1
    if i % 8 < 5:
        body = {"prompt": f"Fact number {i}: the", **base, "stream": stream}
        return "/v1/completions", body
    body = {"messages": [{"role": "user", "content": f"Give me word number {i}."}], **base, "stream": stream}
    if "logprobs" in body:
        body["top_logprobs"] = body.pop("logprobs")
        body["logprobs"] = True
    return "/v1/chat/completions", body


def run(path, body):
    """The response without its id and time; a stream as its list of chunks."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    res = conn.getresponse()
    raw = res.read().decode()
    conn.close()
    if not body.get("stream"):
        j = json.loads(raw)
        j.pop("id", None)
        j.pop("created", None)
        return res.status, j
    chunks = []
    for line in raw.split("\n\n"):
        if line.startswith("data: ") and line != "data: [DONE]":
            j = json.loads(line[6:])
            j.pop("id", None)
            j.pop("created", None)
            chunks.append(j)
    return res.status, {"chunks": chunks, "done": raw.rstrip().endswith("data: [DONE]")}


specs = [spec(i) for i in range(32)]
compared = list(range(len(specs)))
alone = {i: run(*specs[i]) for i in compared}
together = [None] * len(specs)


def client_thread(i):
    together[i] = run(*specs[i])


threads = [threading.Thread(target=client_thread, args=(i,)) for i in range(len(specs))]
for th in threads:
    th.start()
for th in threads:
    th.join()
t.check(f"{len(specs)} concurrent clients: every request succeeded", all(r and r[0] == 200 for r in together),
        str([r[0] if r else None for r in together]))
same = [i for i in compared if together[i] == alone[i]]
t.check(f"{len(specs)} concurrent clients: outputs equal the requests alone ({len(compared)} compared)",
        len(same) == len(compared), f"differ: {[i for i in compared if i not in same]}")
t.check(f"{len(specs)} concurrent clients: batches formed", server.health()["nucleus"]["steps"] < server.health()["nucleus"]["tokens"])

# --- SIGTERM drains in-flight requests ----------------------------------------------------------------
drained = {}
DRAIN_TOKENS = 24


def in_flight():
    drained["res"] = run("/v1/completions", {"prompt": "Once upon a time", "max_tokens": DRAIN_TOKENS, "seed": 5,
                                             "nucleus": {"ignore_eos": True}})


th = threading.Thread(target=in_flight)
th.start()
deadline = time.time() + 120
while server.health()["nucleus"]["active"] == 0 and time.time() < deadline:
    time.sleep(0.01)
code = server.stop()
th.join()
status, res = drained.get("res", (None, None))
t.check("SIGTERM: the in-flight request completes", status == 200 and res["choices"][0]["finish_reason"] == "length"
        and res["usage"]["completion_tokens"] == DRAIN_TOKENS, f"{status} {res}")
t.check("SIGTERM: exit code 0 (under ASan: and no leak)", code == 0, f"{code}\n" + "".join(server.lines[-30:]))
t.finish()
