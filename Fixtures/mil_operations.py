#!/usr/bin/env python3
"""Write the list of MIL operations coremltools registers for the ML-program opsets
(Fixtures/mil_operations.json), which OperationCoverageTests checks the tensor engine against.

Usage:
    mil_operations.py [--out FILE]   (default: mil_operations.json beside this script)

The list is read from coremltools' own operation registry
(coremltools.converters.mil.mil.ops.registry.SSAOpRegistry.core_ops), filled when
coremltools imports its operation definitions (coremltools/converters/mil/mil/ops/defs/).
It holds every core operation registered for at least one of iOS15, iOS16, iOS17, iOS18,
with the opsets it is registered for, the opsets where its definition was (re)defined
(an operation first defined for iOS13 and changed for iOS17 has versions iOS13 and iOS17),
and the parameters its definitions for those opsets take (their input_spec; names starting with
_, such as cond's _true_fn, are the builder's Python functions, written to a file as blocks).
Dialect operations (`complex_*` of the PyTorch frontend, lowered before a program is
written; `coreml_update_state`, written as `write_state` + `read_state`) and custom
operations are not core operations and are not listed. Deterministic: sorted, no dates.
"""

import argparse
import json
import os

os.environ.setdefault("TQDM_DISABLE", "1")

import coremltools as ct
from coremltools.converters.mil.mil.ops.registry import SSAOpRegistry

HERE = os.path.dirname(os.path.abspath(__file__))
OPSETS = [ct.target.iOS15, ct.target.iOS16, ct.target.iOS17, ct.target.iOS18]


def operations():
    listed = []
    for name in sorted(SSAOpRegistry.core_ops):
        variants = SSAOpRegistry.core_ops[name]
        opsets = [target.name for target in OPSETS if target in variants]
        if not opsets:
            continue
        versions, previous = [], None
        for target in sorted(variants):
            if variants[target] is not previous:
                versions.append(target.name)
                previous = variants[target]
        module = variants[max(variants)].__module__
        parameters = set()
        for target in OPSETS:
            if target in variants:
                parameters.update(k for k in variants[target].input_spec.input_types if not k.startswith("_"))
        listed.append({"name": name, "opsets": opsets, "versions": versions, "parameters": sorted(parameters),
                       "definition": module.replace("coremltools.converters.mil.mil.ops.defs.", "")})
    return listed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(HERE, "mil_operations.json"))
    args = parser.parse_args()
    listed = operations()
    document = {"source": "coremltools %s SSAOpRegistry.core_ops, opsets iOS15-iOS18" % ct.__version__,
                "count": len(listed), "operations": listed}
    # One operation a line, so that a change of coremltools reads as a short diff.
    lines = [json.dumps(op, sort_keys=True) for op in listed]
    with open(args.out, "w") as f:
        f.write('{"count": %d,\n "source": %s,\n "operations": [\n  ' % (document["count"], json.dumps(document["source"])))
        f.write(",\n  ".join(lines))
        f.write("\n ]}\n")
    print("wrote", len(listed), "operations to", args.out)


if __name__ == "__main__":
    main()
