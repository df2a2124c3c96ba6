#!/bin/sh
# Shared by both runtime images (Dockerfile and Dockerfile.prebuilt), run once at build time
# as root on a Debian bookworm base: CA certificates (outbound HTTPS), the tools' programs
# (git, python3, man-db), the unprivileged user the services run as (uid/gid 10001, no
# shell, no home outside /data), the data directory.
set -eu
# The built-in tools' programs: git (`git`), python3 (`math`), man-db with the base pages
# (`man`; slim images exclude /usr/share/man from dpkg, so that exclusion is lifted first),
# util-linux's unshare (the `math` sandbox's network namespace).
if [ -f /etc/dpkg/dpkg.cfg.d/docker ]; then
  sed -i '\|/usr/share/man|d' /etc/dpkg/dpkg.cfg.d/docker
fi
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
  ca-certificates git python3 man-db manpages util-linux
rm -rf /var/lib/apt/lists/*
groupadd --system --gid 10001 turnstone
useradd --system --uid 10001 --gid 10001 --home-dir /data --no-create-home \
  --shell /usr/sbin/nologin turnstone
mkdir -p /data
chown 10001:10001 /data
chmod 0750 /data
