#!/usr/bin/env bash
# make run: the whole path modelc is for, offline, on this machine.
#   1. serve a base network from a throwaway HTTP server on loopback
#   2. modelc fetch URL --sha256 … --compile …  (download, pin, compile)
#   3. modelc train on generated pictures of coloured balls, with --report
#   4. modelc classify the sample photos in Fixtures/Samples (--top, --label)
#   5. modelc inspect --graph of the trained model
# Everything goes to .build/run/ (or $RUN_DIR; its own fetch cache too); the
# server is stopped on exit, however the script ends. $MODELC names the
# modelc to run (default: the debug build).
set -euo pipefail
cd "$(dirname "$0")/.."

modelc=${MODELC:-$(swift build --show-bin-path)/modelc}
run=${RUN_DIR:-.build/run}
case "$run" in /*) where="$run" ;; *) where="$PWD/$run" ;; esac
base=Fixtures/Models/ImageFeatureBase.mlmodel
mkdir -p "$run"
rm -rf "$run/served" "$run/port" "$run/cache" "$run/pictures" "$run/Base.mlmodelc" "$run/Balls.mlmodel" \
    "$run/report.html" "$run/graph.html"
mkdir -p "$run/served"
cp "$base" "$run/served/"
export MODELC_CACHE="$where/cache"
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }

# A loopback HTTP server on a free port (the kernel picks it), stopped on exit.
python3 - "$run/served" "$run/port" <<'PY' >/dev/null 2>&1 &
import functools, http.server, signal, sys
# A parent may have blocked SIGTERM (a test runner does); the trap below needs it.
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=sys.argv[1]))
with open(sys.argv[2] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os; os.rename(sys.argv[2] + ".tmp", sys.argv[2])
server.serve_forever()
PY
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -f "$run/port" ] && break; sleep 0.05; done
[ -f "$run/port" ] || { echo "run: the HTTP server did not start" >&2; exit 1; }
url="http://127.0.0.1:$(cat "$run/port")/$(basename "$base")"
sha=$(sha256sum "$base" | cut -d' ' -f1)

step "serving $(basename "$base") (a small image network) at $url"
step "fetch it, pinned to its SHA-256, and compile it into a bundle"
show "$modelc" fetch "$url" --sha256 "$sha" --compile "$run/Base.mlmodelc"

step "train a classifier of ball colours on its features (64 generated pictures)"
python3 Scripts/demo_images.py train "$run/pictures" --count 16
show "$modelc" train image-classifier "$run/pictures" --base "$run/Base.mlmodelc" -o "$run/Balls.mlmodel" \
    --validation-split 0.25 --seed 1 --report "$run/report.html" 2>&1 | grep -Ev '^(  |images per label|features: [0-9]+ vectors \(|iteration )'

step "classify the sample photos"
show "$modelc" classify "$run/Balls.mlmodel" Fixtures/Samples --top 2
show "$modelc" classify "$run/Balls.mlmodel" Fixtures/Samples --label red

step "draw the trained model"
printf '$ %s\n' "$modelc inspect $run/Balls.mlmodel --graph $run/graph.html"
"$modelc" inspect "$run/Balls.mlmodel" --graph "$run/graph.html" >/dev/null

echo
echo "graph picture: $where/graph.html   training report: $where/report.html"
