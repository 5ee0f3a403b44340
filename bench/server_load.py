"""A bounded loopback load test of nucleus-server: N requests, C at a time, all on 127.0.0.1.
Reports requests/s, tokens/s, p50/p99 latency, and the share of the scheduler's step time spent
sampling (from /health's counters, before and after). Not a pass/fail test.

Usage: python3 bench/server_load.py [--url http://127.0.0.1:8080] [--requests 200] [--concurrency 16]
                                    [--max-tokens 16] [--stream]"""
import argparse
import concurrent.futures
import http.client
import json
import statistics
import time
import urllib.parse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--stream", action="store_true")
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    if u.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("server_load.py drives a loopback server only")

    def call(method, path, body=None):
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
        conn.request(method, path, body=json.dumps(body) if body else None, headers={"Content-Type": "application/json"})
        res = conn.getresponse()
        data = res.read().decode()
        conn.close()
        return res.status, data

    knobs = [{"temperature": 0.7, "top_p": 0.9}, {"temperature": 1.0, "top_k": 40}, {"temperature": 0},
             {"temperature": 0.8, "min_p": 0.05, "nucleus": {"preset": "llama_cpp"}}]

    def one(i):
        body = {"prompt": f"Request {i}: tell me about the number {i}.", "max_tokens": a.max_tokens, "seed": i,
                "stream": a.stream, "nucleus": {"ignore_eos": True}, **knobs[i % len(knobs)]}
        if "nucleus" in knobs[i % len(knobs)]:
            body["nucleus"] = {**knobs[i % len(knobs)]["nucleus"], "ignore_eos": True}
        t0 = time.perf_counter()
        status, data = call("POST", "/v1/completions", body)
        dt = time.perf_counter() - t0
        if status != 200:
            raise RuntimeError(f"request {i}: {status} {data[:200]}")
        if a.stream:
            chunks = [json.loads(x[6:]) for x in data.split("\n\n") if x.startswith("data: {")]
            tokens = sum(1 for c in chunks for ch in c["choices"] if ch.get("finish_reason") is None) - 1
        else:
            tokens = json.loads(data)["usage"]["completion_tokens"]
        return dt, tokens

    before = json.loads(call("GET", "/health")[1])["nucleus"]
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(a.concurrency) as pool:
        results = list(pool.map(one, range(a.requests)))
    wall = time.perf_counter() - t0
    after = json.loads(call("GET", "/health")[1])["nucleus"]
    lat = sorted(r[0] for r in results)
    tokens = sum(r[1] for r in results)
    d = {k: after[k] - before[k] for k in ("steps", "tokens", "step_seconds", "sample_seconds", "forward_seconds",
                                            "prefill_seconds")}
    print(f"{a.requests} requests, {a.concurrency} concurrent, max_tokens {a.max_tokens}, stream {a.stream}")
    print(f"  wall {wall:.2f} s: {a.requests / wall:.2f} requests/s, {tokens / wall:.1f} tokens/s")
    print(f"  latency p50 {statistics.median(lat) * 1000:.0f} ms, p99 {lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1000:.0f} ms")
    print(f"  scheduler: {d['steps']} steps, {d['tokens'] / max(1, d['steps']):.2f} rows per step")
    busy = d["step_seconds"] + d["prefill_seconds"]
    print(f"  sampling {d['sample_seconds'] / max(busy, 1e-9) * 100:.2f}% of step + prefill time "
          f"({d['sample_seconds'] * 1e6 / max(1, d['tokens']):.1f} us per row); forward passes "
          f"{d['forward_seconds'] / max(busy, 1e-9) * 100:.1f}%, prefill {d['prefill_seconds'] / max(busy, 1e-9) * 100:.1f}%")


if __name__ == "__main__":
    main()
