#!/usr/bin/env bash
# make load: `modelc serve` under load, long runs (make test runs a short version).
#  1. wrk (Debian), 64 connections for 30 s over 3 fixture models: requests/s, non-2xx and socket errors;
#     then the same with the Python client of the tests, for p50 and p99.
#  2. REST against gRPC (Tests/ServingE2E/protocol_load.py), one small inference back to back: with
#     tritonclient's http and grpc clients in client processes, then with h2load (nghttp2-client, C) from
#     CLIENTS connections and with 64 requests at once (gRPC's 16 on each of 4 connections): requests/s and ratios.
#  3. CLIENTS concurrent sequences on Fixtures' LlamaDecoderInt4 (Tests/ServingE2E/sequence_soak.py): greedy
#     generations as sequences, each equal to a single client's, none failed, the server's RSS flat.
#  4. CLIENTS concurrent /generate_stream clients on the same decoder (Tests/ServingE2E/stream_faults.py), each
#     token 20 ms as a real decoder's: some killed mid-stream (reset, closed, SIGKILLed), some reading slowly:
#     the slow ones get every event, the killed ones are CANCELED and free their workers, RSS flat.
#  5. A memory budget holding one MobileNetV2-shaped network (Scripts/bench_network.py, ~14 MB of weights)
#     while 64 clients rotate over five copies of it for 30 s: every request answered, loads and
#     evictions counted, peak RSS against the warm process + budget + one model.
# Usage: Scripts/serve-load.sh MODELC PYTHON_WITH_COREMLTOOLS SERVE_VENV_PYTHON
set -euo pipefail
modelc=$(realpath "$1"); bench_python=$2; client_python=$3
seconds=${LOAD_SECONDS:-30}; clients=${LOAD_CLIENTS:-64}
work=.build/serve-load
mkdir -p "$work/three" "$work/five" "$work/cache"
for model in TreeEnsembleClassifier.mlmodel GLMClassifier.mlmodel; do cp -f "Fixtures/Models/$model" "$work/three/"; done
rm -rf "$work/three/MLProgram.mlpackage" && cp -r Fixtures/Models/MLProgram.mlpackage "$work/three/"
port=$("$client_python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
MODELC_CACHE=$work/cache "$modelc" serve "$work/three" --port "$port" --grpc-port 0 >"$work/three.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
until curl -sf "http://127.0.0.1:$port/v2/health/ready" >/dev/null; do sleep 0.1; done
# One wrk per model, run at once, the connections shared between them; each sends a fixed request
# (wrk's latency figures are wrong when a Lua request() function makes the requests).
iris='{"inputs":[{"name":"features","datatype":"FP64","shape":[4],"data":[5.1,3.5,1.4,0.2]}]}'
program='{"inputs":[{"name":"x","datatype":"FP32","shape":[1,16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}]}'
models=(TreeEnsembleClassifier GLMClassifier MLProgram)
bodies=("$iris" "$iris" "$program")
echo "== wrk: $clients connections in all, ${seconds}s, 3 models at once"
pids=()
for index in 0 1 2; do
    model=${models[$index]}
    connections=$(( clients / 3 + (index < clients % 3 ? 1 : 0) ))
    printf 'wrk.method = "POST"\nwrk.body = [[%s]]\nwrk.headers["Content-Type"] = "application/json"\n' "${bodies[$index]}" >"$work/$model.lua"
    curl -sf -o /dev/null -X POST -d "${bodies[$index]}" "http://127.0.0.1:$port/v2/models/$model/infer"
    wrk -t1 -c"$connections" -d"${seconds}s" --latency -s "$work/$model.lua" "http://127.0.0.1:$port/v2/models/$model/infer" >"$work/wrk-$model.txt" &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
total=0
for model in "${models[@]}"; do
    rate=$(awk '/Requests\/sec/ {print $2}' "$work/wrk-$model.txt")
    total=$(awk -v a="$total" -v b="$rate" 'BEGIN {print a + b}')
    echo "$model: $rate requests/s, p50 $(awk '$1 == "50%" {print $2}' "$work/wrk-$model.txt"), p99 $(awk '$1 == "99%" {print $2}' "$work/wrk-$model.txt")"
done
echo "all three: $total requests/s"
kill -TERM $server; wait $server || { echo "modelc serve did not exit 0" >&2; exit 1; }
trap - EXIT
if grep -q "Non-2xx\|Socket errors" "$work"/wrk-*.txt; then grep "Non-2xx\|Socket errors" "$work"/wrk-*.txt >&2; echo "FAILED: some requests failed" >&2; exit 1; fi
# The same with the Python client of the tests, clients rotating over the three models.
echo "== Python client: $clients clients, ${seconds}s, 3 models"
"$client_python" - "$modelc" "$work/three" "$clients" "$seconds" <<'PY'
import sys, tempfile
from pathlib import Path
sys.path.insert(0, "Tests/ServingE2E")
import conftest, loadgen
conftest.MODELC = sys.argv[1]
with tempfile.TemporaryDirectory() as tmp:
    server = conftest.Server(Path(sys.argv[2]), tmp)
    r = loadgen.run(server.port, loadgen.fixture_requests(["TreeEnsembleClassifier", "GLMClassifier", "MLProgram"]),
                    int(sys.argv[3]), float(sys.argv[4]))
    code = server.stop()
print(f"{r['count']} requests, {r['failures']} failed, p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, "
      f"{r['throughput']:.0f} requests/s (the client, Python threads, is the limit)")
sys.exit(0 if r["failures"] == 0 and code == 0 else 1)
PY

echo "== REST against gRPC: tritonclient http then grpc (${PROTOCOL_CLIENTS:-8} client processes), then h2load, ${seconds}s each, GLMClassifier"
"$client_python" Tests/ServingE2E/protocol_load.py "$modelc" "$work/three" "${PROTOCOL_CLIENTS:-8}" "$seconds"

echo "== $clients concurrent sequences on a stateful decoder (LlamaDecoderInt4), ${seconds}s: tokens as a single client's, RSS flat"
"$client_python" Tests/ServingE2E/sequence_soak.py "$modelc" "$clients" "$seconds"

echo "== $clients concurrent token streams (LlamaDecoderInt4, 20 ms a token), ${seconds}s: clients killed mid-stream, slow readers"
"$client_python" Tests/ServingE2E/stream_faults.py "$modelc" "$clients" "$seconds"

echo "== budget of one model, $clients clients rotating over five MobileNetV2-shaped networks, ${seconds}s"
"$bench_python" Scripts/bench_network.py generate "$work/net" >/dev/null
for index in 1 2 3 4 5; do cp -f "$work/net/mobilenetv2.mlmodel" "$work/five/mobilenet$index.mlmodel"; done
"$client_python" Tests/ServingE2E/budget_load.py "$modelc" "$work/five" "$work/net/image.rgb" "$clients" "$seconds"
