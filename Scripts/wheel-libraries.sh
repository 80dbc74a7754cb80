#!/usr/bin/env bash
# Puts an installed libmodelc into the Python package for `make wheel`:
#
#   Scripts/wheel-libraries.sh ROOT PACKAGE_DIR
#
# ROOT is an install's PREFIX (Scripts/install.sh). ROOT/lib/libmodelc.so.N becomes
# PACKAGE_DIR/libmodelc.so (what modelc/_native.py loads) with RUNPATH $ORIGIN/_runtime, and the
# libraries of ROOT/lib/modelc/ that it loads (the Swift runtime) go into PACKAGE_DIR/_runtime/.
set -euo pipefail
fail() { echo "wheel: $*" >&2; exit 1; }
[ $# -eq 2 ] || fail "usage: $0 ROOT PACKAGE_DIR"
root=$1 package=$2
library=$(ls "$root"/lib/libmodelc.so.[0-9]* 2>/dev/null | head -1)
[ -n "$library" ] || fail "no libmodelc.so.N in $root/lib"
rm -rf "$package/_runtime"
mkdir -p "$package/_runtime"
install -m 0755 "$library" "$package/libmodelc.so"
patchelf --set-rpath '$ORIGIN/_runtime' "$package/libmodelc.so"
private=$(cd "$root/lib/modelc" && pwd)
count=0
for path in $(ldd "$library" | awk '$2 == "=>" {print $3}'); do
    case $path in "$private"/*) install -m 0755 "$path" "$package/_runtime/"; count=$((count + 1)) ;; esac
done
[ -f "$package/_runtime/libswiftCore.so" ] || fail "libswiftCore.so was not among the libraries $library loads from $private"
echo "wheel: libmodelc.so and $count runtime libraries in $package"
