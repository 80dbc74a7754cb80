#!/usr/bin/env bash
# Builds modelc_VERSION_ARCH.deb from an optimized build (`make deb`):
#
#   Scripts/make-deb.sh BIN_DIR OUT_DIR
#
# The package's files are what `Scripts/install.sh BIN_DIR STAGE /usr` installs (the Swift runtime
# in /usr/lib/modelc/, man page gzipped as Debian does). Its dependencies are computed, not listed:
# - Depends: dpkg-shlibdeps over every ELF file of the package (the libraries they link:
#   oneDNN, protobuf-c, OpenSSL's libcrypto, liblbfgs, dlib, libc, libstdc++ …), and over a
#   throwaway library linked against the libraries modelc opens with dlopen at first use, whose
#   sonames are read from Sources/ (each C shim's modelc_library_open("libNAME.so.N")): OpenBLAS,
#   libvips, libjpeg, libcurl, libarchive, libmicrohttpd. dpkg-shlibdeps cannot see a dlopen.
# - Recommends: the same for Graphviz (libgvc, libcgraph), used only to draw graphs
#   (`inspect --graph`, training reports).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "make deb: $*" >&2; exit 1; }

[ $# -eq 2 ] || fail "usage: $0 BIN_DIR OUT_DIR"
bin_dir=$1 out_dir=$2
command -v dpkg-deb >/dev/null || fail "dpkg-deb not found: a .deb is built on Debian or Ubuntu (package dpkg)"
command -v dpkg-shlibdeps >/dev/null || fail "dpkg-shlibdeps not found (package dpkg-dev)"
compiler=$(command -v "${CC:-cc}" || command -v gcc || command -v clang) \
    || fail "no C compiler (cc, gcc or clang) to link the probe of the dlopen'ed libraries (package gcc)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage=$work/modelc
"$here/Scripts/install.sh" "$bin_dir" "$stage" /usr >/dev/null
gzip -9n "$stage/usr/share/man/man1/modelc.1"

version=$("$stage/usr/bin/modelc" --version | awk '{print $2}')
arch=$(dpkg --print-architecture)

# The libraries opened with dlopen, by soname, from the C shims' sources.
dlopened=$(grep -rhoE 'modelc_library_open\("lib[A-Za-z0-9_+-]+\.so\.[0-9.]+"' "$here/Sources" \
    | sed -E 's/.*\("(.*)"/\1/' | sort -u)
[ -n "$dlopened" ] || fail "found no modelc_library_open(\"lib….so.N\") calls in Sources/"
depends_probe=() recommends_probe=()
for soname in $dlopened; do
    case $soname in
        libgvc.so.*|libcgraph.so.*) recommends_probe+=("-l:$soname") ;;
        *) depends_probe+=("-l:$soname") ;;
    esac
done
probe() { # NAME LIBRARIES…: a shared object that needs exactly those libraries.
    local name=$1; shift
    echo 'void modelc_probe(void) {}' > "$work/probe.c"
    "$compiler" -shared -fPIC -o "$work/$name.so" "$work/probe.c" -Wl,--no-as-needed "$@" \
        || fail "could not link against $* (install them: Scripts/install-deps.sh)"
}
probe depends "${depends_probe[@]}"
probe recommends "${recommends_probe[@]}"

# dpkg-shlibdeps reads debian/control and resolves the package's own libraries (lib/modelc/)
# through the files' RUNPATH ($ORIGIN), found in the staged tree.
mkdir -p "$work/debian"
printf 'Source: modelc\n\nPackage: modelc\nArchitecture: any\n' > "$work/debian/control"
mapfile -t elf_files < <(find "$stage" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec sh -c \
    'head -c 4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
substvars=$(cd "$work" && dpkg-shlibdeps -O -l"$stage/usr/lib/modelc" -l"$stage/usr/lib" \
    -dDepends "${elf_files[@]}" "$work/depends.so" -dRecommends "$work/recommends.so" 2> "$work/shlibdeps.log") \
    || { cat "$work/shlibdeps.log" >&2; fail "dpkg-shlibdeps failed"; }
depends=$(sed -n 's/^shlibs:Depends=//p' <<<"$substvars")
recommends=$(sed -n 's/^shlibs:Recommends=//p' <<<"$substvars")
[ -n "$depends" ] || fail "dpkg-shlibdeps computed no Depends"

mkdir -p "$stage/DEBIAN" "$stage/usr/share/doc/modelc"
cat > "$stage/usr/share/doc/modelc/copyright" <<'EOF'
modelc: fetch, compile, load and run Core ML models on Linux.
License: Apache-2.0 (/usr/share/common-licenses/Apache-2.0).

/usr/lib/modelc/ also holds the Swift runtime that modelc and libmodelc.so were built with (the
Swift standard library, Foundation, Dispatch and the ICU data Foundation uses); its license is
/usr/share/doc/modelc/LICENSE.swift-runtime.txt, as the Swift toolchain ships it.
EOF
cat > "$stage/DEBIAN/control" <<EOF
Package: modelc
Version: $version
Architecture: $arch
Maintainer: modelc maintainers <maintainers@users.noreply.github.com>
Installed-Size: $(du -sk "$stage/usr" | cut -f1)
Depends: $depends
Recommends: $recommends
Section: science
Priority: optional
Description: fetch, compile, load and run Core ML models on Linux
 modelc reads Core ML models (.mlmodel, .mlpackage), validates and compiles
 them, and runs their predictions: classic models, neural networks and ML
 programs. The package holds the modelc command (man page, bash, zsh and fish
 completions), the C library libmodelc.so with modelc.h and modelc.pc, and the
 Swift runtime both need, in /usr/lib/modelc.
EOF
echo "activate-noawait ldconfig" > "$stage/DEBIAN/triggers"
(cd "$stage" && find usr -type f -print0 | sort -z | xargs -0 md5sum) > "$stage/DEBIAN/md5sums"

mkdir -p "$out_dir"
deb="$out_dir/modelc_${version}_${arch}.deb"
# xz as Debian compresses (21 MB, about a minute here); DEB_COMPRESSION=-Zgzip for a quick build (32 MB, 4 s).
dpkg-deb --root-owner-group ${DEB_COMPRESSION:--Zxz} --build "$stage" "$deb" >/dev/null
echo "$deb: $(du -h "$deb" | cut -f1), installed $(du -sh "$stage/usr" | cut -f1)"
echo "  Depends: $depends"
echo "  Recommends: $recommends"
