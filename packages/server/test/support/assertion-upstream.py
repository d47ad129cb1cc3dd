#!/usr/bin/python3
"""An application behind the svc auth gateway, in Python, verifying Svc-Assertion with PyJWT.

    /usr/bin/python3 assertion-upstream.py JWKS_URL AUDIENCE PUBLIC_ORIGIN

Listens on 127.0.0.1 (a free port, printed as "listening PORT"), and answers every request
200 {"sub": ..., "email", "email_verified", "name", "groups" (each when known), "headers": {...}}
when its Svc-Assertion verifies, else 401 {"reason": ...}. "headers" is who the caller is as the
plain headers say it: Svc-Email, Svc-Name (percent-decoded) and Svc-Groups (split at commas), each
when sent. Prints one line per verified request (who it was). Needs Debian's python3-jwt and
python3-cryptography (EdDSA).
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

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


def who(claims, headers):
    """Who the caller is: the assertion's claims (each absent when unknown), and the plain headers."""
    out = {"sub": claims["sub"]}
    for name in ("email", "email_verified", "name", "groups"):
        if name in claims:
            out[name] = claims[name]
    plain = {}
    if headers.get("Svc-Email") is not None:
        plain["email"] = headers["Svc-Email"]  # ASCII: an internationalised domain arrives as xn--...
    if headers.get("Svc-Name") is not None:
        plain["name"] = unquote(headers["Svc-Name"], encoding="utf-8", errors="strict")  # percent-encoded UTF-8
    if headers.get("Svc-Groups") is not None:
        plain["groups"] = headers["Svc-Groups"].split(",")
    out["headers"] = plain
    return out


class Handler(BaseHTTPRequestHandler):
    def answer(self):
        token = self.headers.get("Svc-Assertion")
        try:
            if token is None:
                raise jwt.InvalidTokenError("no Svc-Assertion")
            status, body = 200, who(verify(token, self.command, self.path), self.headers)
            print(f"verified {body['sub']}: email={body.get('email')} name={body.get('name')} groups={body.get('groups')}", flush=True)
        except (jwt.PyJWTError, KeyError, ValueError) as error:
            status, body = 401, {"reason": f"{type(error).__name__}: {error}"}
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = answer

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening {server.server_address[1]}", flush=True)
server.serve_forever()
