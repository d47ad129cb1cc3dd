"""A DPoP client (RFC 9449) of svc auth in Python, with `cryptography` and PyJWT only.

Usage: dpop_client.py <base URL> <device key PEM file>

Signs the device in (challenge, Ed25519 signature), then uses and refreshes the session with
DPoP proofs signed by the same key, and prints one JSON line of what the server answered.
"""
import base64
import hashlib
import json
import sys
import time
import urllib.error
import urllib.request
import uuid

import jwt
from cryptography.hazmat.primitives import serialization

base, key_file = sys.argv[1], sys.argv[2]
with open(key_file, "rb") as f:
    key = serialization.load_pem_private_key(f.read(), password=None)
raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


JWK = {"kty": "OKP", "crv": "Ed25519", "x": b64url(raw)}


def proof(method, url, access_token=None, jti=None):
    claims = {"htm": method, "htu": url, "iat": int(time.time()), "jti": jti or str(uuid.uuid4())}
    if access_token is not None:
        claims["ath"] = b64url(hashlib.sha256(access_token.encode("ascii")).digest())
    return jwt.encode(claims, key, algorithm="EdDSA", headers={"typ": "dpop+jwt", "jwk": JWK})


def call(method, path, body=None, headers=None):
    data = None if body is None else json.dumps(body).encode("utf-8")
    req = urllib.request.Request(base + path, data=data, method=method, headers=dict(headers or {}))
    if data is not None:
        req.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(req) as res:
            return res.status, json.loads(res.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


out = {}
_, chl = call("POST", "/v1/auth/challenges", {"public_key": raw.hex()})
signature = key.sign(chl["challenge"].encode("utf-8")).hex()
status, pair = call("POST", "/v1/auth/sessions", {"challenge_id": chl["challenge_id"], "signature": signature})
out["signin"] = status
out["token_type"] = pair["token_type"]


def authorization(token):
    return {"authorization": f"{pair['token_type']} {token}"}


def me(access):
    headers = authorization(access)
    if pair["token_type"] == "DPoP":
        headers["dpop"] = proof("GET", base + "/v1/auth/me", access)
    return call("GET", "/v1/auth/me", headers=headers)


status, principal = me(pair["access_token"])
out["me"] = status
out["session_matches"] = principal.get("session") == pair["session_id"]

refresh_url = base + "/v1/auth/refresh"
status, refused = call("POST", "/v1/auth/refresh", {"refresh_token": pair["refresh_token"]})
out["refresh_without_proof"] = refused.get("code")

once = proof("POST", refresh_url)
status, rotated = call("POST", "/v1/auth/refresh", {"refresh_token": pair["refresh_token"]}, {"dpop": once})
out["refresh"] = status
status, replayed = call("POST", "/v1/auth/refresh", {"refresh_token": rotated["refresh_token"]}, {"dpop": once})
out["replayed_proof"] = replayed.get("code")

pair = rotated
status, _ = me(pair["access_token"])
out["me_after_refresh"] = status
print(json.dumps(out))
