#!/usr/bin/env python3
"""Checks that Sources/CoreMLSchema is exactly what Scripts/generate_schema.py wrote.

GENERATED.json records the SHA-256 of every generated file; a hand edit, a
missing file or a stray file fails the check. Needs only the standard library,
so `make test` runs it everywhere. `make spec-check` goes further and
regenerates the files from coremltools to compare.
"""
import hashlib
import json
import pathlib
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "Sources/CoreMLSchema")
record = json.loads((root / "GENERATED.json").read_text())
expected = record["files"]
present = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != "GENERATED.json"}
problems = []
for name in sorted(present - expected.keys()):
    problems.append(f"{root / name}: not made by the generator")
for name, digest in sorted(expected.items()):
    path = root / name
    if not path.exists():
        problems.append(f"{path}: missing")
    elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
        problems.append(f"{path}: differs from what the generator wrote (edited by hand?)")
for problem in problems:
    print(f"check-generated: {problem}", file=sys.stderr)
if problems:
    print("check-generated: run `make spec` to regenerate", file=sys.stderr)
    sys.exit(1)
print(f"check-generated: {len(expected)} generated files match GENERATED.json "
      f"(coremltools {record['coremltools']}, {record['protoc-c']})")
