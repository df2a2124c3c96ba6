#!/bin/bash
# The compose stack's one-shot `secrets` service: makes every secret the stack needs as a file
# in the `secrets` volume, once; later runs keep them (like the Helm chart's `lookup`), so an
# upgrade or a restart never rotates them by accident. Nothing is printed but file names.
#
#   jwt_secret          HS256 secret nodes, bridges and the console share
#   auth_token          a static full-access token (console login, the SDK, admin scripts)
#   redis_password      Redis' password (redis.conf carries it as `requirepass`)
#   postgres_password   the PostgreSQL user's password
#   db_url              the nodes' PostgreSQL URL, password included
#
# The files are world-readable inside the volume because the Redis and PostgreSQL images run
# as their own users; only this stack's containers mount the volume.
set -euo pipefail
dir="${1:-/run/turnstone-secrets}"
random_hex() { od -An -N32 -tx1 /dev/urandom | tr -d ' \n'; }
make_secret() {
  local name="$1" value="$2"
  [ -s "$dir/$name" ] && return 0
  umask 022
  printf '%s' "$value" >"$dir/$name.tmp"
  mv "$dir/$name.tmp" "$dir/$name"
  echo "created $name"
}
make_secret jwt_secret "$(random_hex)"
make_secret auth_token "$(random_hex)"
make_secret redis_password "$(random_hex)"
make_secret postgres_password "$(random_hex)"
make_secret db_url "postgresql://turnstone:$(cat "$dir/postgres_password")@postgres:5432/turnstone"
make_secret redis.conf "requirepass $(cat "$dir/redis_password")"$'\n'
