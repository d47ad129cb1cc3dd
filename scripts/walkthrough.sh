#!/usr/bin/env bash
# The README walkthrough, runnable: every command a new user types, in a scratch directory,
# against the built `svc` (run `npm ci` first). Prints each command and its real output.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
export HOME="$work/home" SVC_MANAGEMENT_LISTEN=127.0.0.1:19090 SVC_NODE_LISTEN=127.0.0.1:19091
export SVC_MANAGEMENT_URL=http://127.0.0.1:19090 SVC_NODE_URL=http://127.0.0.1:19091
mkdir -p "$HOME"
svc() { node "$repo/packages/cli/dist/bin.js" "$@"; }
run() { printf '$ %s\n' "$*"; "$@" 2>&1; printf '\n'; }
field() { node -e 'const j=JSON.parse(require("fs").readFileSync(0,"utf8"));process.stdout.write(String(j[process.argv[1]]))' "$1"; }

run svc auth init demo
token=$(svc auth init demo --json | field bootstrap_token)
echo '# (re-running init before enrollment supersedes the first token; the new one is used below)'
echo
run svc auth keygen --out admin.pem
pub=$(svc auth pubkey --key admin.pem)
run svc auth enroll "$token" "$pub" demo --name laptop
run svc auth enroll "$token" "$pub" demo
node "$repo/packages/cli/dist/bin.js" serve demo > serve.out 2> serve.log &
server=$!
for _ in $(seq 1 50); do grep -q "node surface listening" serve.out 2>/dev/null && break; sleep 0.2; done
echo '$ svc serve demo &'; cat serve.out; echo
run curl -s http://127.0.0.1:19090/health
run svc auth login --key admin.pem
run svc auth whoami
run svc auth refresh

echo '# an outside client: curl, openssl and xxd only'
openssl genpkey -algorithm ed25519 -out other.pem
echo '$ curl -s -H "content-type: application/json" -d "{\"public_key\":\"<hex>\"}" http://127.0.0.1:19090/v1/auth/challenges'
other=$(svc auth pubkey --key other.pem)
curl -s -H 'content-type: application/json' -d "{\"public_key\":\"$other\"}" http://127.0.0.1:19090/v1/auth/challenges | tee chl.json; echo; echo
challenge=$(field challenge < chl.json); cid=$(field challenge_id < chl.json)
printf %s "$challenge" > challenge.txt
sig=$(openssl pkeyutl -sign -rawin -inkey other.pem -in challenge.txt | xxd -p -c 256)
echo '$ curl -s ... -d "{\"challenge_id\":\"...\",\"signature\":\"<openssl signature>\"}" /v1/auth/sessions   # key not enrolled'
curl -s -H 'content-type: application/json' -d "{\"challenge_id\":\"$cid\",\"signature\":\"$sig\"}" http://127.0.0.1:19090/v1/auth/sessions; echo; echo
echo '$ curl -s -H "Host: evil.example" http://127.0.0.1:19090/health   # DNS rebinding'
curl -s -H 'Host: evil.example' http://127.0.0.1:19090/health; echo; echo

echo '# pairing a second device, then signing in with it'
echo '$ svc auth pair --name laptop-2'
svc auth pair --name laptop-2 2>&1 | tee pair.out; echo
intent=$(awk '/^intent:/{print $2}' pair.out); code=$(awk '/^code:/{print $2}' pair.out)
run svc auth keygen --out laptop2.pem
run svc auth pair complete --intent "$intent" --code "$code" --key laptop2.pem
run svc auth login --key laptop2.pem --credentials laptop2.json
run svc auth devices demo

echo '# signed diagnostics, checked with openssl as an outside party would'
echo '$ curl -s -H "authorization: Bearer <token>" -H "content-type: application/json" -d "{\"nonce\":\"n-2026-11-22\"}" http://127.0.0.1:19091/edge/0-alpha/diagnostics > diag.json'
at=$(field access_token < "$HOME/.config/svc/credentials.json")
curl -s -H "authorization: Bearer $at" -H 'content-type: application/json' -d '{"nonce":"n-2026-11-22"}' http://127.0.0.1:19091/edge/0-alpha/diagnostics > diag.json
# An independent RFC 8785 implementation (the canonicalize package, wherever npm placed it).
canon=$(ls "$repo"/node_modules/canonicalize/lib/canonicalize.js "$repo"/packages/*/node_modules/canonicalize/lib/canonicalize.js 2>/dev/null | head -1)
node --input-type=module -e 'import fs from "node:fs";const c=(await import(process.argv[1])).default;const d=JSON.parse(fs.readFileSync("diag.json","utf8"));fs.writeFileSync("payload.json",c(d.payload));fs.writeFileSync("sig.bin",Buffer.from(d.signature,"hex"));fs.writeFileSync("pub.der",Buffer.concat([Buffer.from("302a300506032b6570032100","hex"),Buffer.from(d.public_key,"hex")]));console.log(c(d.payload).slice(0,300)+"…")' "$canon"
echo
run openssl pkeyutl -verify -pubin -keyform DER -inkey pub.der -rawin -in payload.json -sigfile sig.bin

run svc auth logout
run svc auth whoami
run svc auth audit demo
run svc auth audit verify demo

echo '# tampering with the installed store addon stops the service before the database opens'
echo '// edited' >> demo/.svc/packages/svc-store-sqlite@0.1.0/dist/index.js
run svc auth devices demo
