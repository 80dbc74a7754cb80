#!/usr/bin/env bash
# Runs `swift ARGS…` (or $SWIFT_COMMAND) with a TMPDIR of its own that is removed when it ends.
#
# Every call of the toolchain leaves TemporaryDirectory.XXXXXX directories (holding only a
# zero-byte .keep-directory) in
# TMPDIR (measured with Swift 6.3: `swift --version` 1, `swift build --show-bin-path` 3,
# `swift package describe` 5): SwiftPM and the swift driver make them and never
# remove them (swiftlang/swift-driver issues 1613 and 2049). A run of `make test`
# calls swift several times and each helper session many more, so /tmp filled with
# thousands. The Makefile calls swift through this script; whatever `swift test`
# runs gets the same TMPDIR, so the tests' own scratch files go too.
set -u
parent=${TMPDIR:-/tmp}
own=$(mktemp -d "$parent/modelc-swift.XXXXXX") || exit 1
trap 'rm -rf "$own"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
TMPDIR=$own "${SWIFT_COMMAND:-swift}" "$@"
