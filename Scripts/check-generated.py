#!/usr/bin/env python3
"""Checks that generated directories hold exactly what their generator wrote.

Usage: check-generated.py DIR...  (default Sources/CoreMLSchema)

Each DIR's GENERATED.json records the SHA-256 of every generated file (and, for
code generated from a file of the repository, that file's): a hand edit, a
missing file, a stray file or a source edited without regenerating fails the
check. Needs only the standard library, so `make test` runs it everywhere.
`make spec-check` goes further and regenerates the schema from coremltools to
compare.
"""
import hashlib
import json
import pathlib
import sys


def check(root):
    """Problems of one generated directory, and a line saying what matched."""
    record = json.loads((root / "GENERATED.json").read_text())
    expected = record["files"]
    present = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != "GENERATED.json"}
    problems = [f"{root / name}: not made by the generator" for name in sorted(present - expected.keys())]
    for name, digest in sorted(expected.items()):
        path = root / name
        if not path.exists():
            problems.append(f"{path}: missing")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            problems.append(f"{path}: differs from what the generator wrote (edited by hand?)")
    if "source" in record:
        source = pathlib.Path(record["source"])
        if hashlib.sha256(source.read_bytes()).hexdigest() != record["sourceSHA256"]:
            problems.append(f"{source}: changed since {root} was generated from it")
    made_from = f"coremltools {record['coremltools']}" if "coremltools" in record else record.get("source", "")
    return problems, f"{len(expected)} generated files of {root} match GENERATED.json ({made_from}, {record['protoc-c']})"


roots = [pathlib.Path(argument) for argument in sys.argv[1:]] or [pathlib.Path("Sources/CoreMLSchema")]
problems, summaries = [], []
for root in roots:
    found, summary = check(root)
    problems += found
    summaries.append(summary)
for problem in problems:
    print(f"check-generated: {problem}", file=sys.stderr)
if problems:
    print("check-generated: run `make spec` (Core ML schema) or `make grpc-messages` (gRPC messages) to regenerate",
          file=sys.stderr)
    sys.exit(1)
for summary in summaries:
    print(f"check-generated: {summary}")
