#!/bin/sh
# svc auth container entrypoint (POSIX sh, umask 077).
#
#   (no arguments)  On the first start, when the control directory is empty, initialise: run
#                   `svc auth init` on the project once, which creates the project (project.edn,
#                   the pinned store addon), the control database and the node key, and write the
#                   one-time bootstrap token (single use, valid 15 minutes) to the owner-only file
#                   $SVC_CONTROL_DIR/bootstrap-token. The token is never printed: the container
#                   log is read by more people and kept longer than the token deserves. Enroll
#                   with it from standard input (`svc auth enroll - ...`), never as an argument.
#                   Later starts find the control directory populated, skip this and issue no
#                   token. Then replace this shell with `svc serve` (exec: svc is the
#                   container's main process and gets SIGTERM).
#   init            Only the initialisation, whatever the control directory holds, then exit:
#                   the explicit first-run step for nodes that share a PostgreSQL store.
#   anything else   Run it, e.g. `svc auth enroll ...`.
#
# Environment:
#   SVC_PROJECT_DIR   the project directory (default /srv/project)
#   SVC_PROJECT_EDN   a project.edn to copy into the project when it has none (default: none,
#                     and `svc auth init` writes the default SQLite project)
#   SVC_CONTROL_DIR   the control directory (default /var/lib/svc/control); read by svc too
#   SVC_AUTO_INIT     1 (default): initialise an empty control directory on start; 0: never
#   SVC_BIN           the svc executable (default: svc on PATH)
set -eu
umask 077

project=${SVC_PROJECT_DIR:-/srv/project}
SVC_CONTROL_DIR=${SVC_CONTROL_DIR:-/var/lib/svc/control}
export SVC_CONTROL_DIR
svc=${SVC_BIN:-svc}

say() { printf 'svc entrypoint: %s\n' "$*"; }

# Empty: missing, or holding nothing but a filesystem's lost+found.
control_is_empty() {
  [ -d "$SVC_CONTROL_DIR" ] || return 0
  for entry in "$SVC_CONTROL_DIR"/* "$SVC_CONTROL_DIR"/.[!.]* "$SVC_CONTROL_DIR"/..?*; do
    [ -e "$entry" ] || [ -L "$entry" ] || continue
    [ "$entry" = "$SVC_CONTROL_DIR/lost+found" ] && continue
    return 1
  done
  return 0
}

initialise() {
  if [ -n "${SVC_PROJECT_EDN:-}" ] && [ ! -e "$project/project.edn" ]; then
    # Explicit checks: `set -e` does not apply inside a function called from `||`.
    mkdir -p "$project" || return 1
    cp "$SVC_PROJECT_EDN" "$project/project.edn" || return 1
    say "copied $SVC_PROJECT_EDN to $project/project.edn"
  fi
  token_file="$SVC_CONTROL_DIR/bootstrap-token"
  # Only the JSON goes through this shell (printf is a builtin: no process arguments); the token
  # goes from it to the file, never to stdout or stderr.
  if ! init=$("$svc" auth init "$project" --json); then
    say "svc auth init $project failed" >&2
    return 1
  fi
  printf '%s' "$init" | node -e '
    const fs = require("node:fs");
    const j = JSON.parse(fs.readFileSync(0, "utf8"));
    const [p, file] = process.argv.slice(1);
    // A fresh owner-only file: an old one (a link included) is removed, then O_EXCL creates it.
    fs.rmSync(file, { force: true });
    fs.writeFileSync(file, `${j.bootstrap_token}\n`, { mode: 0o600, flag: "wx" });
    const say = (s) => console.log(`svc entrypoint: ${s}`);
    say(`initialised project ${j.project}, control store ${j.control_db}`);
    say(`the one-time bootstrap token (single use, expires ${j.expires_at}) is in ${file} (mode 0600); it is not printed`);
    say(`enroll the first admin device: docker exec -i <container> sh -c '"'"'svc auth enroll - <PUBHEX> ${p} < ${file}'"'"'`);
    say(`a new token before that enrollment: docker exec <container> svc auth init ${p} --token-only | docker exec -i <container> svc auth enroll - <PUBHEX> ${p}`);
  ' "$project" "$token_file"
}

case "${1-}" in
  '') ;;
  init)
    initialise
    exit 0
    ;;
  *) exec "$@" ;;
esac

if [ "${SVC_AUTO_INIT:-1}" = 1 ] && control_is_empty; then
  say "empty control directory $SVC_CONTROL_DIR: first start"
  initialise || {
    say 'initialisation failed; nothing is served' >&2
    exit 1
  }
fi

exec "$svc" serve "$project"
