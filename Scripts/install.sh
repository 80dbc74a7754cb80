#!/usr/bin/env bash
# Installs modelc from an optimized build (`make install` runs it over .build/dist/release):
#
#   Scripts/install.sh BIN_DIR DESTDIR PREFIX             install
#   Scripts/install.sh --uninstall DESTDIR PREFIX         remove what an install put there
#
# BIN_DIR holds modelc, libModelcC.so, libModelcFaces.so and libModelcGRPC.so as SwiftPM built them. Under
# DESTDIR/PREFIX it writes (docs/install.md):
#
#   bin/modelc                        the CLI
#   lib/libmodelc.so.ABI              the C interface (SONAME libmodelc.so.ABI, ABI from include/modelc.h)
#   lib/libmodelc.so -> libmodelc.so.ABI
#   lib/modelc/                       private: libModelcFaces.so (opened by modelc at the first face
#                                     request), libModelcGRPC.so (opened by `modelc serve` for its gRPC
#                                     port) and the Swift runtime the four need
#   lib/pkgconfig/modelc.pc, include/modelc.h
#   share/man/man1/modelc.1           help2man over --help, with each command's help
#   share/bash-completion/completions/modelc, share/zsh/…/_modelc,
#   share/fish/vendor_completions.d/modelc.fish
#
# The Swift runtime (libswiftCore, Foundation, ICU data, Dispatch, …) is not on a Debian system,
# so every library the four files load that no Debian package owns is copied into lib/modelc/
# (strip --strip-debug), and each installed file's RUNPATH is set relative to itself with patchelf
# ($ORIGIN/../lib/modelc, $ORIGIN/modelc, $ORIGIN): the tree works wherever it is unpacked,
# and nothing in it refers to the toolchain or the build directory.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)

fail() { echo "install: $*" >&2; exit 1; }

zsh_dir() { # Debian's zsh reads vendor-completions under /usr, site-functions elsewhere.
    if [ "$1" = /usr ]; then echo share/zsh/vendor-completions; else echo share/zsh/site-functions; fi
}

# Every path an install writes, relative to PREFIX (lib/modelc/ as a whole).
installed_paths() {
    echo bin/modelc
    echo lib/libmodelc.so
    ls "$1/lib" 2>/dev/null | grep -E '^libmodelc\.so\.[0-9]+$' | sed 's|^|lib/|' || true
    echo lib/modelc
    echo lib/pkgconfig/modelc.pc
    echo include/modelc.h
    echo share/man/man1/modelc.1
    echo share/bash-completion/completions/modelc
    echo "$(zsh_dir "$2")/_modelc"
    echo share/fish/vendor_completions.d/modelc.fish
    echo share/doc/modelc
}

if [ "${1:-}" = --uninstall ]; then
    [ $# -eq 3 ] || fail "usage: $0 --uninstall DESTDIR PREFIX"
    root="$2$3"
    installed_paths "$root" "$3" | while read -r path; do rm -rf "${root:?}/$path"; done
    echo "removed modelc from $root"
    exit 0
fi

[ $# -eq 3 ] || fail "usage: $0 BIN_DIR DESTDIR PREFIX"
bin_dir=$1 destdir=$2 prefix=$3
case $prefix in /*) ;; *) fail "PREFIX must be an absolute path, not '$prefix'" ;; esac
for product in modelc libModelcC.so libModelcFaces.so libModelcGRPC.so; do
    [ -f "$bin_dir/$product" ] || fail "$bin_dir/$product is missing: build it first (make dist)"
done
for tool in patchelf help2man python3 strip ldd; do
    command -v "$tool" >/dev/null || fail "$tool not found (make install installs patchelf and help2man with Scripts/install-deps.sh)"
done

abi=$(sed -n 's/^#define MODELC_ABI_VERSION \([0-9][0-9]*\)$/\1/p' "$here/include/modelc.h")
[ -n "$abi" ] || fail "no MODELC_ABI_VERSION in include/modelc.h"
version=$("$bin_dir/modelc" --version | awk '{print $2}')
[ -n "$version" ] || fail "'$bin_dir/modelc --version' printed no version"

root="$destdir$prefix"
private="$root/lib/modelc"
rm -rf "$private"
mkdir -p "$root/bin" "$private" "$root/lib/pkgconfig" "$root/include" "$root/share/man/man1" \
         "$root/share/bash-completion/completions" "$root/$(zsh_dir "$prefix")" \
         "$root/share/fish/vendor_completions.d"

# Whether a Debian package owns a library (as ldd printed its path; /lib is /usr/lib since usrmerge).
debian_owns() {
    command -v dpkg-query >/dev/null || { case $1 in /lib/*|/lib64/*|/usr/lib/*|/usr/lib64/*) return 0 ;; *) return 1 ;; esac; }
    local real; real=$(readlink -f "$1")
    local path
    for path in "$1" "$real" "${1#/usr}" "/usr$1" "${real#/usr}" "/usr$real"; do
        dpkg-query -S "$path" >/dev/null 2>&1 && return 0
    done
    return 1
}

# The libraries the four files load (transitively) that no Debian package provides.
ldd_output=$(ldd "$bin_dir/modelc" "$bin_dir/libModelcC.so" "$bin_dir/libModelcFaces.so" "$bin_dir/libModelcGRPC.so")
if grep -q 'not found' <<<"$ldd_output"; then
    fail "libraries not found: $(grep 'not found' <<<"$ldd_output" | awk '{print $1}' | sort -u | tr '\n' ' ')"
fi
shipped=()
while read -r library; do
    case $(basename "$library") in libModelcC.so|libModelcFaces.so|libModelcGRPC.so) continue ;; esac
    debian_owns "$library" || shipped+=("$library")
done < <(awk '$2 == "=>" && $3 ~ /^\// {print $3}' <<<"$ldd_output" | sort -u)

copy() { # SOURCE DESTINATION MODE RUNPATH: copied without debugging information, its RUNPATH set.
    install -m "$3" "$1" "$2"
    strip --strip-debug "$2"
    patchelf --set-rpath "$4" "$2"
}

copy "$bin_dir/modelc" "$root/bin/modelc" 0755 '$ORIGIN/../lib/modelc'
copy "$bin_dir/libModelcC.so" "$root/lib/libmodelc.so.$abi" 0644 '$ORIGIN/modelc'
patchelf --set-soname "libmodelc.so.$abi" "$root/lib/libmodelc.so.$abi"
ln -sf "libmodelc.so.$abi" "$root/lib/libmodelc.so"
copy "$bin_dir/libModelcFaces.so" "$private/libModelcFaces.so" 0644 '$ORIGIN'
copy "$bin_dir/libModelcGRPC.so" "$private/libModelcGRPC.so" 0644 '$ORIGIN'
for library in "${shipped[@]}"; do
    copy "$library" "$private/$(basename "$library")" 0644 '$ORIGIN'
done

# The Swift runtime's license, from the toolchain the libraries came from (usr/lib/swift/linux/
# beside usr/share/swift/LICENSE.txt).
for library in "${shipped[@]}"; do
    license="$(dirname "$library")/../../../share/swift/LICENSE.txt"
    if [ "$(basename "$library")" = libswiftCore.so ] && [ -f "$license" ]; then
        mkdir -p "$root/share/doc/modelc"
        install -m 0644 "$license" "$root/share/doc/modelc/LICENSE.swift-runtime.txt"
    fi
done

install -m 0644 "$here/include/modelc.h" "$root/include/modelc.h"
cat > "$root/lib/pkgconfig/modelc.pc" <<EOF
prefix=$prefix
exec_prefix=\${prefix}
libdir=\${exec_prefix}/lib
includedir=\${prefix}/include

Name: modelc
Description: Run Core ML models on Linux: modelc's C interface
Version: $version
Libs: -L\${libdir} -lmodelc
Cflags: -I\${includedir}
EOF
chmod 0644 "$root/lib/pkgconfig/modelc.pc"

# The man page and completions, from the installed binary's own help (which also proves it runs).
generated=$(mktemp -d)
trap 'rm -rf "$generated"' EXIT
env -u LD_LIBRARY_PATH python3 "$here/Scripts/cli-docs.py" "$root/bin/modelc" "$generated"
install -m 0644 "$generated/modelc.1" "$root/share/man/man1/modelc.1"
install -m 0644 "$generated/modelc.bash" "$root/share/bash-completion/completions/modelc"
install -m 0644 "$generated/_modelc" "$root/$(zsh_dir "$prefix")/_modelc"
install -m 0644 "$generated/modelc.fish" "$root/share/fish/vendor_completions.d/modelc.fish"

# A system-wide install: let the dynamic linker's cache know libmodelc.so.ABI.
if [ -z "$destdir" ] && [ "$(id -u)" -eq 0 ] && command -v ldconfig >/dev/null; then
    ldconfig
fi
size=$(du -shc "$root/bin/modelc" "$root/lib/libmodelc.so.$abi" "$private" | tail -1 | cut -f1)
echo "installed modelc $version into $root: bin/modelc, lib/libmodelc.so.$abi, lib/modelc/ (libModelcFaces.so, libModelcGRPC.so and ${#shipped[@]} Swift runtime libraries), $size"
