#!/bin/sh
# svc auth container entrypoint (POSIX sh).
#
# With no arguments: on the first start, when the control directory is empty, it runs
# `svc auth init` on the project once, which creates the project (project.edn, the pinned store
# addon), the control database and the node key, and prints the one-time bootstrap token
# (single use, valid 15 minutes) to stdout, that is the container log. Later starts find the
# control directory populated, skip that step and never print a token again. Then it replaces
# itself with `svc serve` (exec: svc becomes the container's main process and gets SIGTERM itself).
#
# With arguments it runs them instead, e.g. `docker compose run --rm svc svc auth init /srv/project`.
#
# Environment:
#   SVC_PROJECT_DIR   the project directory (default /srv/project)
#   SVC_CONTROL_DIR   the control directory (default /var/lib/svc/control); read by svc too
#   SVC_AUTO_INIT     1 (default): initialise an empty control directory; 0: never (for nodes
#                     that share a PostgreSQL store, initialised once with an explicit step)
#   SVC_BIN           the svc executable (default: svc on PATH)
set -eu
umask 077

project=${SVC_PROJECT_DIR:-/srv/project}
SVC_CONTROL_DIR=${SVC_CONTROL_DIR:-/var/lib/svc/control}
export SVC_CONTROL_DIR
svc=${SVC_BIN:-svc}

if [ "$#" -gt 0 ]; then
  exec "$@"
fi

# Empty: missing, or holding nothing but a filesystem's lost+found.
control_is_empty() {
  [ ! -d "$SVC_CONTROL_DIR" ] && return 0
  for entry in "$SVC_CONTROL_DIR"/* "$SVC_CONTROL_DIR"/.[!.]* "$SVC_CONTROL_DIR"/..?*; do
    [ -e "$entry" ] || [ -L "$entry" ] || continue
    [ "$entry" = "$SVC_CONTROL_DIR/lost+found" ] && continue
    return 1
  done
  return 0
}

if [ "${SVC_AUTO_INIT:-1}" = 1 ] && control_is_empty; then
  echo "svc entrypoint: empty control directory $SVC_CONTROL_DIR: first start, initialising $project"
  if ! init=$("$svc" auth init "$project" --json); then
    echo "svc entrypoint: svc auth init failed; nothing was served" >&2
    exit 1
  fi
  # The token goes to stdout (the container log) this once, on one line; it is never logged by svc.
  printf '%s' "$init" | node -e '
    const j = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
    const p = process.argv[1];
    console.log(`svc entrypoint: project ${j.project}, control db ${j.control_db}`);
    console.log(`svc entrypoint: bootstrap token ${j.bootstrap_token} (single use, expires ${j.expires_at}); shown once, never again on restart`);
    console.log(`svc entrypoint: enroll the first admin device: docker exec -it <container> svc auth enroll <TOKEN> <PUBHEX> ${p}`);
    console.log(`svc entrypoint: a new token before that enrollment: docker exec -it <container> svc auth init ${p}`);
  ' "$project"
fi

exec "$svc" serve "$project"
