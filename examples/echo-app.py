#!/usr/bin/env python3
"""A stand-in for "your application": any HTTP server in any language, behind `svc serve`.

It answers every request with what the gateway sent it: the path, the `Svc-*` identity
headers, and every other header that could carry an identity (`Authorization`, `X-*`), so you
can see that forged ones never arrive. Standard library only. The `Svc-Assertion` is shown by
its JOSE header; a real application VERIFIES it (docs/assertion.md shows how, in Python with
PyJWT and in Node with @svc/assertion) rather than trusting the plain `Svc-*` headers, unless
nothing but the gateway can reach it.

    python3 examples/echo-app.py 127.0.0.1:3000
"""
import base64
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def jose_header(jws):
    try:
        part = jws.split(".")[0]
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except Exception:  # noqa: BLE001 - shown as received
        return "not a compact JWS"


class Echo(BaseHTTPRequestHandler):
    def answer(self):
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        seen = {}
        for name, value in self.headers.items():
            lower = name.lower()
            if lower == "svc-assertion":
                seen[lower] = jose_header(value)
            elif lower.startswith("svc-") or lower.startswith("x-") or lower in ("authorization", "remote-user"):
                seen[lower] = value
        body = json.dumps({"path": self.path, "headers": dict(sorted(seen.items()))}).encode() + b"\n"
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = answer

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    host, _, port = (sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:3000").rpartition(":")
    server = ThreadingHTTPServer((host, int(port)), Echo)
    print(f"echo app listening on http://{host}:{server.server_address[1]}", flush=True)
    server.serve_forever()
