#!/usr/bin/env bash
# `make test-install`: modelc as a person gets it, run from where it was unpacked.
#
# 1. `make install DESTDIR=… PREFIX=/usr`: the file list; every ELF file's libraries resolve
#    inside the tree or to Debian's (no toolchain, no build directory, nothing missing);
#    `modelc --version`, a prediction of an ML program (the tensor engine, oneDNN, OpenBLAS), an
#    image classification (libvips) and a face detection (lib/modelc/libModelcFaces.so), in an
#    empty environment, with the Swift toolchain's runtime hidden where a mount namespace can be
#    made (root); a C program built with pkg-config against the installed modelc.h and libmodelc.
# 2. `make deb`: its fields and contents; `dpkg -x` into another root and the same runs from
#    there; every Depends known to apt, and `apt-get install --simulate` of the file.
# 3. `make wheel`: its files; installed with pip --no-index into a scratch directory, imported
#    and run with no MODELC_LIBRARY and no build tree on any path.
# 4. deploy/Dockerfile built and run where a Docker engine answers; skipped with a line if not.
#
# Ends with "install: N passed, N failed". MAKE and the make variables (DIST_BUILD, …) come from
# the calling make.
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
make=${MAKE:-make}
python=${PYVENV:-.venv-python}/bin/python
scratch=$(mktemp -d "${TMPDIR:-/tmp}/modelc-install-test.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
passed=0 failed=0
started=$(date +%s)

pass() { passed=$((passed + 1)); echo "ok   $1"; }
failure() { failed=$((failed + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/     /' <<<"$2"; return 0; }
# check NAME COMMAND…: passes when COMMAND exits 0; its output is shown when it fails.
check() {
    local name=$1; shift
    local output
    if output=$("$@" 2>&1); then pass "$name"; else failure "$name" "$output"; fi
}

# An environment with nothing of this shell's: no LD_LIBRARY_PATH, no MODELC_* variables.
# OpenBLAS' core type is kept where the machine sets it (older OpenBLAS builds miscompute without).
mkdir -p "$scratch/home"
clean=(env -i PATH=/usr/bin:/bin HOME="$scratch/home" MODELC_CACHE="$scratch/cache" LD_LIBRARY_PATH=)
for name in OPENBLAS_CORETYPE OPENBLAS_L2_SIZE; do
    [ -n "${!name:-}" ] && clean+=("$name=${!name}")
done

# The Swift toolchain's libraries hidden under an empty tmpfs in a mount namespace of the command's
# own, where this user may make one; otherwise the command runs as it is (and ldd is the check).
toolchain_lib=$(dirname "$(dirname "$(readlink -f "$(command -v swiftc || command -v swift)")")")/lib/swift
hide=()
if [ -d "$toolchain_lib" ] && unshare -m --propagation private true 2>/dev/null; then
    hide=(unshare -m --propagation private sh -c "mount -t tmpfs tmpfs '$toolchain_lib' && exec \"\$@\"" hide)
    echo "the toolchain's $toolchain_lib is hidden from the installed programs"
else
    echo "note: cannot make a mount namespace here; $toolchain_lib stays visible (ldd checks the paths)"
fi
run() { "${hide[@]}" "${clean[@]}" "$@"; }

program=Fixtures/Models/MLProgram.mlpackage
expected="0.31535 0.44750 0.16192 0.07523"
# predict_matches MODELC: the ML program's probabilities, within 1e-4 of the reference.
predict_matches() {
    local json
    json=$(run "$1" predict "$repo/$program" --input 'x=[[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]]' --json) || return 1
    python3 - "$json" "$expected" <<'EOF'
import json, sys
got = json.loads(sys.argv[1])["outputs"]["probs"]
got = [value for row in got for value in row] if isinstance(got[0], list) else got
want = [float(value) for value in sys.argv[2].split()]
assert len(got) == len(want) and all(abs(a - b) < 1e-4 for a, b in zip(got, want)), (got, want)
EOF
}
classifies() { run "$1" classify "$repo/Fixtures/Models/ImageClassifier.mlmodel" "$repo/Fixtures/Samples/ball-1.png" --top 1 | grep -q '^  [0-9.]*  [a-z]'; }
finds_face() { run "$1" detect --faces "$repo/Fixtures/Faces/astronaut.jpg" | grep -q ': 1 face'; }
version_is() { [ "$(run "$1" --version)" = "modelc $2" ]; }

# ldd_clean ROOT: every library of every ELF file under ROOT resolves, inside ROOT or to a system
# directory, never to the toolchain or this repository.
ldd_clean() {
    local root=$1 problems=""
    while read -r file; do
        local out; out=$(run ldd "$file" 2>&1)
        while read -r line; do
            case $line in
                *"not found"*) problems+="$file: $line"$'\n' ;;
                *"=> /"*)
                    local path; path=$(awk '{print $3}' <<<"$line")
                    case $path in
                        "$root"/*|/lib/*|/lib64/*|/usr/lib/*|/usr/lib64/*) ;;
                        *) problems+="$file: $line"$'\n' ;;
                    esac
                    case $path in "$repo"/*|"$toolchain_lib"/*|/opt/*) problems+="$file: $line"$'\n' ;; esac ;;
            esac
        done <<<"$out"
    done < <(find "$root" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec sh -c 'head -c 4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
    [ -z "$problems" ] || { printf '%s' "$problems"; return 1; }
}

# runs_from ROOT LABEL: the installed modelc at ROOT/usr/bin works on its own.
runs_from() {
    local root=$1 label=$2 modelc=$1/usr/bin/modelc
    check "$label: modelc --version prints modelc $version" version_is "$modelc" "$version"
    check "$label: no library from the toolchain or the build tree (ldd)" ldd_clean "$root"
    check "$label: modelc predict (ML program) matches the reference" predict_matches "$modelc"
    check "$label: modelc classify (libvips)" classifies "$modelc"
    check "$label: modelc detect --faces (lib/modelc/libModelcFaces.so)" finds_face "$modelc"
}

version=""

# 1. make install
echo "== make install DESTDIR=$scratch/install PREFIX=/usr ($(( $(date +%s) - started )) s)"
root=$scratch/install
if ! $make --no-print-directory install DESTDIR="$root" PREFIX=/usr > "$scratch/install.log" 2>&1; then
    failure "make install" "$(tail -20 "$scratch/install.log")"
else
    pass "make install"
    tail -1 "$scratch/install.log"
    version=$("$root/usr/bin/modelc" --version 2>/dev/null | awk '{print $2}')
    abi=$(sed -n 's/^#define MODELC_ABI_VERSION \([0-9]*\)$/\1/p' include/modelc.h)
    expected_files="usr/bin/modelc
usr/include/modelc.h
usr/lib/libmodelc.so
usr/lib/libmodelc.so.$abi
usr/lib/modelc/libModelcFaces.so
usr/lib/modelc/libModelcGRPC.so
usr/lib/modelc/libswiftCore.so
usr/lib/pkgconfig/modelc.pc
usr/share/bash-completion/completions/modelc
usr/share/doc/modelc/LICENSE.swift-runtime.txt
usr/share/fish/vendor_completions.d/modelc.fish
usr/share/man/man1/modelc.1
usr/share/zsh/vendor-completions/_modelc"
    listed=$(cd "$root" && find . \( -type f -o -type l \) | sed 's|^\./||' | sort)
    check "install: the file list" diff <(echo "$expected_files") \
        <( (grep -vE '^usr/lib/modelc/' <<<"$listed"; grep -E '^usr/lib/modelc/(libModelcFaces|libModelcGRPC|libswiftCore)\.so$' <<<"$listed") | sort)
    check "install: libmodelc.so -> libmodelc.so.$abi, SONAME libmodelc.so.$abi" sh -c \
        "[ \"\$(readlink '$root/usr/lib/libmodelc.so')\" = libmodelc.so.$abi ] && readelf -d '$root/usr/lib/libmodelc.so.$abi' | grep -q 'SONAME.*\[libmodelc.so.$abi\]'"
    check "install: modelc.pc names PREFIX and -lmodelc" grep -qx 'prefix=/usr' "$root/usr/lib/pkgconfig/modelc.pc"
    man_page_complete() { # a section per command, their options in it (roff's \- for each hyphen)
        local page=$root/usr/share/man/man1/modelc.1 command
        for command in $(run "$root/usr/bin/modelc" --help | sed -n '/^COMMANDS:/,/^$/p' | awk 'NR > 1 && NF {print $1}'); do
            grep -qF ".SS \"modelc $command\"" "$page" || { echo "no section for $command"; return 1; }
        done
        grep -qF '\-\-output\-dir DIR' "$page" || { echo "predict's --output-dir is missing"; return 1; }
    }
    check "install: the man page has every command's help" man_page_complete
    check "install: bash completion completes commands" bash -c \
        "source '$root/usr/share/bash-completion/completions/modelc'; COMP_WORDS=(modelc pre); COMP_CWORD=1; _modelc; [ \"\${COMPREPLY[*]}\" = predict ]"
    if command -v zsh >/dev/null; then check "install: zsh completion parses" zsh -n "$root/usr/share/zsh/vendor-completions/_modelc"; fi
    if command -v fish >/dev/null; then check "install: fish completion parses" fish -n "$root/usr/share/fish/vendor_completions.d/modelc.fish"; fi
    runs_from "$root" install
    if [ ${#hide[@]} -gt 0 ]; then
        check "install: the build tree's modelc fails with the toolchain hidden (the hiding works)" \
            sh -c "! \"\$@\" >/dev/null 2>&1" _ "${hide[@]}" "${clean[@]}" \
            "${DIST_BIN:-.build/release}/modelc" --version
    fi
    # A C program of the interface's users: pkg-config's flags, the header, libmodelc.so.ABI.
    if command -v pkg-config >/dev/null && command -v cc >/dev/null; then
        cflags=$(PKG_CONFIG_PATH="$root/usr/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$root" pkg-config --cflags --libs modelc)
        if cc -o "$scratch/predict" Tests/Install/predict.c $cflags 2> "$scratch/cc.log"; then
            pass "install: a C program builds with pkg-config --cflags --libs modelc ($cflags)"
            check "install: the C program predicts through libmodelc.so.$abi" sh -c \
                "[ \"\$(\"\$@\")\" = 'probs $expected' ]" _ "${hide[@]}" "${clean[@]}" LD_LIBRARY_PATH="$root/usr/lib" \
                "$scratch/predict" "$repo/$program"
            check "install: the C program needs libmodelc.so.$abi" sh -c "readelf -d '$scratch/predict' | grep -q 'NEEDED.*\[libmodelc.so.$abi\]'"
        else
            failure "install: a C program builds with pkg-config" "$(cat "$scratch/cc.log")"
        fi
    fi
    check "make uninstall removes it all" sh -c \
        "$make -s --no-print-directory uninstall DESTDIR='$root' PREFIX=/usr >/dev/null && [ -z \"\$(find '$root' -type f -o -type l)\" ]"
fi

# 2. make deb
echo "== make deb ($(( $(date +%s) - started )) s)"
if ! $make --no-print-directory deb DEB_DIR="$scratch/deb" DEB_COMPRESSION=-Zgzip > "$scratch/deb.log" 2>&1; then
    failure "make deb" "$(tail -20 "$scratch/deb.log")"
else
    pass "make deb"
    tail -3 "$scratch/deb.log"
    deb=$(ls "$scratch"/deb/modelc_*.deb)
    version=${version:-$(dpkg-deb --field "$deb" Version)}
    check "deb: named modelc_${version}_$(dpkg --print-architecture).deb" \
        test "$(basename "$deb")" = "modelc_${version}_$(dpkg --print-architecture).deb"
    depends=$(dpkg-deb --field "$deb" Depends)
    check "deb: Depends has the linked and the dlopen'ed libraries" sh -c "for package in libc6 libdnnl2 libprotobuf-c1 \
        libssl3 liblbfgs0 libdlib19.1 libvips42 libcurl4 libarchive13 libmicrohttpd12 libjpeg62-turbo libopenblas0; do \
        echo '$depends' | grep -q \"\$package\" || { echo \"missing \$package in: $depends\"; exit 1; }; done"
    check "deb: Depends names no Swift package" sh -c "! echo '$depends' | grep -qi swift"
    check "deb: every file under /usr" sh -c "! dpkg-deb --contents '$deb' | awk '{print \$6}' | grep -vE '^\./(usr(/.*)?)?\$'"
    check "deb: man page gzipped, md5sums, ldconfig trigger" sh -c "dpkg-deb --contents '$deb' | grep -q 'usr/share/man/man1/modelc.1.gz' \
        && dpkg-deb --ctrl-tarfile '$deb' | tar -t | grep -q md5sums && dpkg-deb --ctrl-tarfile '$deb' | tar -xO ./triggers | grep -q ldconfig"
    debroot=$scratch/deb-root
    dpkg -x "$deb" "$debroot"
    runs_from "$debroot" deb
    # Each alternative of each Depends is a package apt knows (a candidate in the archive, or installed).
    known() {
        local missing=""
        for package in $(echo "$depends" | tr ',|' '\n\n' | sed 's/(.*)//; s/:any//' | tr -d ' ' | sort -u); do
            # (grep reads it all: with pipefail, grep -q's early exit would fail apt-cache on SIGPIPE)
            apt-cache policy "$package" 2>/dev/null | grep -E 'Candidate: [^(]' >/dev/null || missing+=" $package"
        done
        [ -z "$missing" ] || { echo "unknown to apt:$missing"; return 1; }
    }
    check "deb: every Depends is a package apt knows" known
    if apt-get install --simulate "$deb" > "$scratch/simulate.log" 2>&1; then
        pass "deb: apt-get install --simulate $(basename "$deb") resolves"
    elif grep -q 'are you root\|Permission denied\|lock' "$scratch/simulate.log"; then
        echo "note: apt-get install --simulate needs more rights here; the Depends were checked with apt-cache policy"
    else
        failure "deb: apt-get install --simulate" "$(tail -10 "$scratch/simulate.log")"
    fi
fi

# 3. make wheel
echo "== make wheel ($(( $(date +%s) - started )) s)"
if ! $make --no-print-directory wheel WHEEL_DIR="$scratch/wheel" > "$scratch/wheel.log" 2>&1; then
    failure "make wheel" "$(tail -20 "$scratch/wheel.log")"
else
    pass "make wheel"
    wheel=$(ls "$scratch"/wheel/modelc-*.whl)
    echo "$(basename "$wheel"): $(du -h "$wheel" | cut -f1)"
    check "wheel: carries libmodelc.so and the Swift runtime" python3 -c "
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
for wanted in ('modelc/libmodelc.so', 'modelc/_runtime/libswiftCore.so', 'modelc/_runtime/lib_FoundationICU.so'):
    assert any(name.endswith(wanted) for name in names), wanted + ' is not in the wheel'
" "$wheel"
    site=$scratch/site
    if "$python" -m pip install --quiet --no-index --no-deps --target "$site" "$wheel" > "$scratch/pip.log" 2>&1; then
        pass "wheel: pip install --no-index"
        check "wheel: no library from the toolchain or the build tree (ldd)" ldd_clean "$site/modelc"
        pythonpath="$site:$("$python" -c 'import numpy, os; print(os.path.dirname(os.path.dirname(numpy.__file__)))')"
        check "wheel: import modelc, predict, from the wheel's own library" sh -c "cd '$scratch' && \"\$@\"" _ \
            "${hide[@]}" "${clean[@]}" PYTHONPATH="$pythonpath" "$(readlink -f "$python")" -c "
import modelc, modelc._native as native, numpy
lib = native.library()
assert lib._name.startswith('$site/modelc/'), lib._name
model = modelc.Model('$repo/$program')
probs = model.predict({'x': numpy.arange(1, 17, dtype=numpy.float32).reshape(1, 16)})['probs'].ravel()
expected = [float(value) for value in '$expected'.split()]
assert numpy.allclose(probs, expected, atol=1e-4), probs
"
    else
        failure "wheel: pip install --no-index" "$(cat "$scratch/pip.log")"
    fi
fi

# 4. deploy/Dockerfile
echo "== deploy/Dockerfile ($(( $(date +%s) - started )) s)"
if command -v docker >/dev/null && timeout 20 docker info >/dev/null 2>&1; then
    tag=modelc-install-test:$$
    if docker build -q -f deploy/Dockerfile -t "$tag" . > "$scratch/docker.log" 2>&1; then
        pass "docker build -f deploy/Dockerfile"
        check "docker run IMAGE --version" sh -c "docker run --rm '$tag' --version | grep -qx 'modelc $version'"
        docker rmi -f "$tag" >/dev/null 2>&1
    else
        failure "docker build -f deploy/Dockerfile" "$(tail -20 "$scratch/docker.log")"
    fi
else
    echo "skipped: docker not available (no Docker engine answers docker info)"
fi

echo "install tests took $(( $(date +%s) - started )) s"
echo "install: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
