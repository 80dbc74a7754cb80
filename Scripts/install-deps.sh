#!/usr/bin/env bash
# Installs the Debian packages modelc builds against, when any is missing.
# Used by `make run` and `make test`, so a fresh machine sets itself up.
# nginx is for the tests and `make bench` (a real web server to download from);
# they start their own on a loopback port and never use the system service.
set -euo pipefail

packages=(pkg-config libprotobuf-c-dev libgrpc++-dev libssl-dev libcurl4-openssl-dev libarchive-dev libopenblas-dev libdnnl-dev libvips-dev libjpeg-dev liblbfgs-dev libdlib-dev libmicrohttpd-dev libgvc6 "$@")
missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$package")
    fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing missing packages: ${missing[*]}" >&2
if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
