#!/usr/bin/env bash
# make load: `modelc serve` under load, long runs (make test runs a short version).
#  1. wrk (Debian), 64 connections for 30 s over 3 fixture models: requests/s, non-2xx and socket errors;
#     then the same with the Python client of the tests, for p50 and p99.
#  2. A memory budget holding one MobileNetV2-shaped network (Scripts/bench_network.py, ~14 MB of weights)
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
MODELC_CACHE=$work/cache "$modelc" serve "$work/three" --port "$port" >"$work/three.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
until curl -sf "http://127.0.0.1:$port/v2/health/ready" >/dev/null; do sleep 0.1; done
cat >"$work/rotate.lua" <<'LUA'
local iris = '{"inputs":[{"name":"features","datatype":"FP64","shape":[4],"data":[5.1,3.5,1.4,0.2]}]}'
local program = '{"inputs":[{"name":"x","datatype":"FP32","shape":[1,16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}]}'
local requests = {
  {"/v2/models/TreeEnsembleClassifier/infer", iris},
  {"/v2/models/GLMClassifier/infer", iris},
  {"/v2/models/MLProgram/infer", program},
}
local counter = 0
request = function()
  counter = counter + 1
  local r = requests[counter % 3 + 1]
  return wrk.format("POST", r[1], {["Content-Type"] = "application/json"}, r[2])
end
LUA
for path in TreeEnsembleClassifier GLMClassifier MLProgram; do curl -sf -o /dev/null -d @/dev/null "http://127.0.0.1:$port/v2/models/$path/ready" || true; done
echo "== wrk: $clients connections, ${seconds}s, 3 models"
wrk -t2 -c"$clients" -d"${seconds}s" --latency -s "$work/rotate.lua" "http://127.0.0.1:$port" | tee "$work/wrk.txt"
kill -TERM $server; wait $server || { echo "modelc serve did not exit 0" >&2; exit 1; }
trap - EXIT
if grep -q "Non-2xx\|Socket errors" "$work/wrk.txt"; then echo "FAILED: some requests failed" >&2; exit 1; fi
# wrk's latency percentiles under a Lua request() disagree with its own throughput (Little's law gives a
# mean of connections / throughput); the same run with our Python client gives latencies that add up.
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

echo "== budget of one model, $clients clients rotating over five MobileNetV2-shaped networks, ${seconds}s"
"$bench_python" Scripts/bench_network.py generate "$work/net" >/dev/null
for index in 1 2 3 4 5; do cp -f "$work/net/mobilenetv2.mlmodel" "$work/five/mobilenet$index.mlmodel"; done
"$client_python" Tests/ServingE2E/budget_load.py "$modelc" "$work/five" "$work/net/image.rgb" "$clients" "$seconds"
