#!/usr/bin/python3
"""An application behind the svc auth gateway, in Python, verifying Svc-Assertion with PyJWT.

    /usr/bin/python3 assertion-upstream.py JWKS_URL AUDIENCE PUBLIC_ORIGIN

Listens on 127.0.0.1 (a free port, printed as "listening PORT"), and answers every request
200 {"sub": ...} when its Svc-Assertion verifies, else 401 {"reason": ...}. Needs Debian's
python3-jwt and python3-cryptography (EdDSA).
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import jwt

JWKS_URL, AUDIENCE, PUBLIC_ORIGIN = sys.argv[1], sys.argv[2], sys.argv[3].rstrip("/")
# Fetches the gateway's /.svc/jwks.json, caches it 5 minutes, and fetches it again for an unknown kid.
jwks = jwt.PyJWKClient(JWKS_URL)


def verify(token, method, path):
    """The claims of a valid assertion for this request; raises on anything else."""
    if jwt.get_unverified_header(token).get("typ") != "svc-assertion+jwt":
        raise jwt.InvalidTokenError("typ is not svc-assertion+jwt")
    key = jwks.get_signing_key_from_jwt(token)
    claims = jwt.decode(
        token,
        key.key,
        algorithms=["EdDSA"],  # never the token's own choice
        audience=AUDIENCE,
        leeway=5,
        options={"require": ["iss", "aud", "sub", "sid", "dev", "realm", "iat", "exp", "jti", "htm", "htu"]},
    )
    if claims["exp"] - claims["iat"] > 60:
        raise jwt.InvalidTokenError("lifetime over 60 s")
    # The request binding: the method, and scheme://host/path as callers addressed the gateway.
    htu = PUBLIC_ORIGIN + urlsplit(path).path
    if claims["htm"] != method or claims["htu"] != htu:
        raise jwt.InvalidTokenError(f"request binding: issued for {claims['htm']} {claims['htu']}, not {method} {htu}")
    return claims


class Handler(BaseHTTPRequestHandler):
    def answer(self):
        token = self.headers.get("Svc-Assertion")
        try:
            if token is None:
                raise jwt.InvalidTokenError("no Svc-Assertion")
            status, body = 200, {"sub": verify(token, self.command, self.path)["sub"]}
        except (jwt.PyJWTError, KeyError, ValueError) as error:
            status, body = 401, {"reason": f"{type(error).__name__}: {error}"}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = answer

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening {server.server_address[1]}", flush=True)
server.serve_forever()
