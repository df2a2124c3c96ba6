#!/bin/sh
# Shared by both runtime images (Dockerfile and Dockerfile.prebuilt), run once at build time
# as root on a Debian bookworm base: CA certificates (outbound HTTPS), the unprivileged user
# the services run as (uid/gid 10001, no shell, no home outside /data), the data directory.
set -eu
if ! dpkg-query -W -f='${Status}' ca-certificates 2>/dev/null | grep -q 'ok installed'; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates
  rm -rf /var/lib/apt/lists/*
fi
groupadd --system --gid 10001 turnstone
useradd --system --uid 10001 --gid 10001 --home-dir /data --no-create-home \
  --shell /usr/sbin/nologin turnstone
mkdir -p /data
chown 10001:10001 /data
chmod 0750 /data
