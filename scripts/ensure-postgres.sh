#!/usr/bin/env bash
# Makes sure a PostgreSQL server answers on 127.0.0.1:5432 with trust auth for local tests.
# The store refuses such a server unless accepted: every test project and the bench set
# :store/allow-unauthenticated true (packages/store-postgres/test/real/unauthenticated-role.test.ts tests the refusal).
# Uses the one already running when there is one; otherwise installs Debian's server
# package if needed and starts a throwaway cluster owned by the postgres user.
set -euo pipefail
HOST=127.0.0.1
PORT=${PGPORT:-5432}

ready() { pg_isready -q -h "$HOST" -p "$PORT" >/dev/null 2>&1; }

if command -v pg_isready >/dev/null 2>&1 && ready; then
  echo "postgres: already running on $HOST:$PORT"
  exit 0
fi

installed_here=no
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "postgres: installing Debian's postgresql package"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql >/dev/null
  installed_here=yes
fi

# A packaged cluster that is merely stopped: start it.
if command -v pg_ctlcluster >/dev/null 2>&1 && ls /etc/postgresql/*/main >/dev/null 2>&1; then
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  if [ "$installed_here" = yes ]; then
    # A server this script just installed is a throwaway test server: Debian's default asks
    # for passwords over TCP, the tests connect as postgres with trust on loopback only.
    hba=/etc/postgresql/$version/main/pg_hba.conf
    { echo "host all all 127.0.0.1/32 trust"; echo "host all all ::1/128 trust"; cat "$hba"; } > "$hba.new" && mv "$hba.new" "$hba"
    chown postgres:postgres "$hba"
  fi
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  for _ in $(seq 1 30); do ready && break; sleep 1; done
fi

if ! ready; then
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  data=/tmp/svc-ci-postgres
  if [ ! -d "$data" ]; then
    install -d -o postgres -g postgres -m 0700 "$data"
    su postgres -c "$bin/initdb -D $data -A trust -U postgres" >/dev/null
  fi
  su postgres -c "$bin/pg_ctl -D $data -o '-h $HOST -p $PORT -k /tmp' -l $data/log -w start" >/dev/null
fi

for _ in $(seq 1 30); do ready && break; sleep 1; done
ready || { echo "postgres: not answering on $HOST:$PORT" >&2; exit 1; }
psql -h "$HOST" -p "$PORT" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1 ||
  psql -h "$HOST" -p "$PORT" -U postgres -c "CREATE DATABASE test" >/dev/null
echo "postgres: running on $HOST:$PORT"
