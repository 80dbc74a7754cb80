#!/usr/bin/env bash
# `make test-deb-fresh DEB=…`: the package on a fresh Debian 12. Not part of `make test`: it needs
# root and Debian's mirror, and takes several minutes (a minimal bookworm of about 230 MB, then
# the package's ~170 dependencies).
#
# debootstrap --variant=minbase bookworm into a scratch root, `apt-get install ./modelc_….deb`
# there (apt resolves the Depends from the mirror), then in that root: modelc --version, a
# prediction checked against the reference, classify (libvips), detect --faces (the private
# libModelcFaces.so), man page and completions in place. Ends with "deb-fresh: N passed, N failed".
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
deb=${1:?usage: $0 MODELC_DEB}
deb=$(readlink -f "$deb")
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" -eq 0 ] || { echo "deb-fresh: needs root (debootstrap, chroot, mount)" >&2; exit 1; }
[ -f "$deb" ] || { echo "deb-fresh: $deb not found (make deb)" >&2; exit 1; }
command -v debootstrap >/dev/null || "$repo/Scripts/install-deps.sh" debootstrap

root=$(mktemp -d "${TMPDIR:-/tmp}/modelc-deb-fresh.XXXXXX")
cleanup() { umount "$root/proc" 2>/dev/null; rm -rf "$root"; }
trap cleanup EXIT
passed=0 failed=0
check() {
    local name=$1; shift
    local output
    if output=$("$@" 2>&1); then passed=$((passed + 1)); echo "ok   $name"
    else failed=$((failed + 1)); echo "FAIL $name"; sed 's/^/     /' <<<"$output"; fi
}
started=$(date +%s)

echo "== debootstrap --variant=minbase bookworm $root"
if ! debootstrap --variant=minbase bookworm "$root" "$mirror" > "$root.debootstrap.log" 2>&1; then
    tail -20 "$root.debootstrap.log"; rm -f "$root.debootstrap.log"
    echo "deb-fresh: 0 passed, 1 failed"; exit 1
fi
rm -f "$root.debootstrap.log"
echo "$(chroot "$root" dpkg-query -W | wc -l) packages ($(( $(date +%s) - started )) s)"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"  # the loader finds $ORIGIN through /proc/self/exe
mkdir -p "$root/fixtures"
cp "$deb" "$root/tmp/"
cp -r "$repo/Fixtures/Models/MLProgram.mlpackage" "$repo/Fixtures/Models/ImageClassifier.mlmodel" \
      "$repo/Fixtures/Samples/ball-1.png" "$repo/Fixtures/Faces/astronaut.jpg" "$root/fixtures/"

in_root() { chroot "$root" env -i PATH=/usr/bin:/bin HOME=/tmp MODELC_CACHE=/tmp/cache sh -c "cd /fixtures && $1"; }
check "apt-get install ./$(basename "$deb") resolves its Depends from the mirror" \
    in_root "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq /tmp/$(basename "$deb") >/tmp/apt.log 2>&1 || { tail -20 /tmp/apt.log; exit 1; }"
echo "$(chroot "$root" dpkg-query -W | wc -l) packages after ($(( $(date +%s) - started )) s)"
check "modelc --version" in_root "modelc --version | grep -q '^modelc '"
check "modelc predict matches the reference" in_root \
    "modelc predict MLProgram.mlpackage --input 'x=[[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]]' | grep -qF '[[0.3153'"
check "modelc classify (libvips)" in_root "modelc classify ImageClassifier.mlmodel ball-1.png --top 1 | grep -q '^  [0-9.]*  [a-z]'"
check "modelc detect --faces (libModelcFaces.so)" in_root "modelc detect --faces astronaut.jpg | grep -q ': 1 face'"
check "man page, completions, libmodelc.so.1 in place" in_root \
    "test -f /usr/share/man/man1/modelc.1.gz && test -f /usr/share/bash-completion/completions/modelc && test -L /usr/lib/libmodelc.so"

echo "took $(( $(date +%s) - started )) s"
echo "deb-fresh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
