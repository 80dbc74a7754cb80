#!/usr/bin/env bash
# What grpc++ itself can answer on this machine, against `modelc serve`'s REST and gRPC (docs/serving.md,
# "Not reached: gRPC ≥ 1.5 × REST"): a gRPC server that does nothing (bare.cc: grpc++'s asynchronous generic
# API, the transport `modelc serve` uses, every call answered with 40 fixed bytes) and modelc serving
# GLMClassifier, under h2load with the bytes tritonclient sends (Tests/ServingE2E/protocol_load.py), alternated.
# Usage: Scripts/grpc-ceiling/run.sh MODELC SERVE_VENV_PYTHON   (needs g++, libgrpc++-dev, h2load)
set -euo pipefail
modelc=$(realpath "$1"); python=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'kill $server $bare 2>/dev/null || true; rm -rf "$work"' EXIT
g++ -O2 "$here/bare.cc" -o "$work/bare" $(pkg-config --cflags --libs grpc++)
mkdir -p "$work/models" && cp Fixtures/Models/GLMClassifier.mlmodel "$work/models/"
length=$("$python" -c "import sys; sys.path.insert(0, 'Tests/ServingE2E'); import protocol_load; print(protocol_load.request_bodies('$work')[1])")
ports=($("$python" -c 'import socket
for _ in range(3):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'))
MODELC_CACHE=$work/cache "$modelc" serve "$work/models" --port "${ports[0]}" --grpc-port "${ports[1]}" >"$work/serve.log" 2>&1 &
server=$!
"$work/bare" "${ports[2]}" 2 2>/dev/null &
bare=$!
until curl -sf "http://127.0.0.1:${ports[0]}/v2/health/ready" >/dev/null; do sleep 0.1; done
seconds=${SECONDS_EACH:-8}
rate() { h2load --warm-up-time=1 -D "$seconds" "$@" | sed -n 's/.*finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p'; }
rest() { rate --h1 -c "$1" -d "$work/rest.bin" -H "Content-Type: application/octet-stream" -H "Inference-Header-Content-Length: $length" \
    "http://127.0.0.1:${ports[0]}/v2/models/GLMClassifier/infer"; }
grpc() { rate -c "$2" -m "$3" -d "$work/grpc.bin" -H "content-type: application/grpc" -H "te: trailers" \
    "http://127.0.0.1:$1/inference.GRPCInferenceService/ModelInfer"; }
for round in 1 2; do
    echo "round $round (requests/s)"
    echo "  modelc REST, 8 connections:          $(rest 8)"
    echo "  bare grpc++, 8 connections x 1:      $(grpc "${ports[2]}" 8 1)"
    echo "  modelc gRPC, 8 connections x 1:      $(grpc "${ports[1]}" 8 1)"
    echo "  modelc REST, 64 connections:         $(rest 64)"
    echo "  bare grpc++, 4 connections x 16:     $(grpc "${ports[2]}" 4 16)"
    echo "  modelc gRPC, 4 connections x 16:     $(grpc "${ports[1]}" 4 16)"
done
