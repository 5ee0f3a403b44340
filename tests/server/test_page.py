"""The distribution page in a real browser: headless Chromium loads GET / from a running server with
a prompt and knobs in its address, the page's own script calls the server, and the rendered bars are
read back from the DOM and checked against the API's numbers. A screenshot is saved as an artifact.

Usage: test_page.py --server BINARY --model GGUF --out DIR"""
import html.parser
import os
import shutil
import subprocess
import sys
import urllib.parse

import harness

opts = harness.args(sys.argv)
chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
if not chromium:
    print("NUCLEUS_SKIP: no chromium (Debian: apt-get install chromium; scripts/deps installs it)")
    sys.exit(harness.SKIP)
out_dir = opts["--out"] or "."
os.makedirs(out_dir, exist_ok=True)

server = harness.Server(opts["--server"], opts["--model"], "--ctx", "512")
t = harness.Checks()


def browse(query, *extra):
    url = server.url + "/?" + urllib.parse.urlencode(query)
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--disable-extensions",
           f"--user-data-dir={out_dir}/chromium-profile", "--virtual-time-budget=30000", *extra, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


class Bars(html.parser.HTMLParser):
    """The page's rendered state: every bar's data-* attributes, the summary and the picks."""

    def __init__(self):
        super().__init__()
        self.bars, self.ready, self.kept, self.sample = [], None, None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "body":
            self.ready = a.get("data-ready")
        if "bar" in classes:
            self.bars.append({"id": int(a["data-id"]), "p": float(a["data-p"]), "p_raw": float(a["data-praw"]),
                              "kept": a["data-kept"] == "1", "cut_class": "cut" in classes})
        if a.get("id") == "summary" and "data-kept" in a:
            self.kept = int(a["data-kept"])
        if a.get("id") == "picks" and "data-sample" in a:
            self.sample = int(a["data-sample"])


cases = [
    {"prompt": "Kubernetes pods are scheduled by the", "temperature": "0.7", "top_k": "8", "seed": "3", "sample": "1"},
    {"prompt": "The best thing about Paris is", "temperature": "1.3", "top_p": "0.3", "min_p": "0.02",
     "preset": "hf", "seed": "9", "sample": "1"},
    {"prompt": "Write a haiku about the sea.", "chat": "1", "temperature": "0.5", "top_k": "30", "top_p": "0.8",
     "preset": "llama_cpp", "seed": "1", "sample": "1"},
]
for n, q in enumerate(cases):
    run = browse(q, "--dump-dom")
    page = Bars()
    page.feed(run.stdout)
    t.check(f"page {n}: rendered", run.returncode == 0 and page.ready == "1" and len(page.bars) == 20,
            f"rc {run.returncode}, ready {page.ready}, {len(page.bars)} bars\n{run.stderr[-2000:]}")
    body = {"top": 20, "seed": int(q["seed"]), "temperature": float(q["temperature"]),
            "top_k": int(q.get("top_k", 0)), "top_p": float(q.get("top_p", 1)), "min_p": float(q.get("min_p", 0)),
            "nucleus": {"preset": q.get("preset", "nucleus")}}
    if q.get("chat") == "1":
        body["messages"] = [{"role": "user", "content": q["prompt"]}]
    else:
        body["prompt"] = q["prompt"]
    status, api = server.post("/v1/nucleus/distribution", body)
    t.check(f"page {n}: the API answers", status == 200, str(api))
    t.check(f"page {n}: as many bars as the API has tokens", status == 200 and len(page.bars) == len(api["tokens"]),
            f"{len(page.bars)} bars, API {len(api.get('tokens', [])) if status == 200 else status}")
    if status != 200 or len(page.bars) != len(api["tokens"]):
        continue  # (failed above; the per-bar checks below need both lists)
    t.check(f"page {n}: the bars are the API's tokens in order", [b["id"] for b in page.bars] ==
            [x["id"] for x in api["tokens"]])
    t.check(f"page {n}: survivors and cut tokens as the API says", all(
        b["kept"] == x["kept"] and b["cut_class"] == (not x["kept"]) for b, x in zip(page.bars, api["tokens"])))
    t.check(f"page {n}: probabilities before and after the knobs", all(
        abs(b["p"] - x["p"]) <= 1e-9 and abs(b["p_raw"] - x["p_raw"]) <= 1e-12 for b, x in zip(page.bars, api["tokens"])))
    t.check(f"page {n}: the knobs cut something", 0 < api["kept"] < api["vocab"] and
            any(not x["kept"] for x in api["tokens"]), str(api["kept"]))
    t.check(f"page {n}: survivor count and seeded sample", page.kept == api["kept"] and
            page.sample == api["sample"]["id"], f"{page.kept} {page.sample} vs {api['kept']} {api.get('sample')}")

shot = os.path.join(out_dir, "page.png")
if os.path.exists(shot):
    os.remove(shot)
run = browse(cases[0], f"--screenshot={shot}", "--window-size=1100,1300")
with open(shot, "rb") if os.path.exists(shot) else open(os.devnull, "rb") as f:
    head = f.read(8)
t.check("screenshot saved", head == b"\x89PNG\r\n\x1a\n", run.stderr[-2000:])
print("screenshot:", shot)
t.finish(server)
