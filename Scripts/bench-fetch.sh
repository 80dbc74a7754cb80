#!/usr/bin/env bash
# make bench, downloads: `modelc fetch` against curl from nginx on loopback,
# printed as ratios against baselines measured in the same run. Not a test:
# nothing here passes or fails. Called at the end of Scripts/bench.sh.
#   BENCH_FETCH_MB  size of the served file (default 1024)
#   BENCH_RUNS      runs of each contender; the fastest counts (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."

work=.build/bench
runs=${BENCH_RUNS:-3}
megabytes=${BENCH_FETCH_MB:-1024}
nginx=/usr/sbin/nginx
if [ ! -x "$nginx" ]; then
    echo "bench-fetch: $nginx is missing: run \`make deps\` (or apt-get install nginx)" >&2
    exit 1
fi

mkdir -p "$work/www"
served="$work/www/fetch-$megabytes.bin"
if [ ! -f "$served" ]; then
    echo "writing $megabytes MB of random bytes to $served (once)…" >&2
    head -c "$((megabytes * 1048576))" /dev/urandom > "$served.tmp"
    mv "$served.tmp" "$served"
fi
if [ ! -f "$served.sha256" ] || [ "$served.sha256" -ot "$served" ]; then
    sha256sum "$served" | cut -d ' ' -f 1 > "$served.sha256"
fi
bytes=$(stat -c %s "$served")
scratch=$(mktemp -d "$PWD/$work/fetch-scratch.XXXXXX")
prefix="$scratch/nginx"
nginx_pid=""
port=""

# Debian's nginx in the foreground on a free loopback port, serving $work/www;
# everything it writes stays under $prefix. Sets nginx_pid and port.
start_nginx() {
    local attempt
    for attempt in 1 2 3; do
        port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        rm -rf "$prefix" && mkdir -p "$prefix/temp"
        cat > "$prefix/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid "$prefix/nginx.pid";
error_log "$prefix/error.log" warn;
events { worker_connections 64; }
http {
    access_log off;
    default_type application/octet-stream;
    sendfile on;
    client_body_temp_path "$prefix/temp/body";
    proxy_temp_path "$prefix/temp/proxy";
    fastcgi_temp_path "$prefix/temp/fastcgi";
    uwsgi_temp_path "$prefix/temp/uwsgi";
    scgi_temp_path "$prefix/temp/scgi";
    server {
        listen 127.0.0.1:$port;
        root "$PWD/$work/www";
    }
}
EOF
        "$nginx" -p "$prefix/" -c "$prefix/nginx.conf" -e "$prefix/error.log" </dev/null >/dev/null 2>&1 &
        nginx_pid=$!
        local tries
        for tries in $(seq 1000); do   # 10 s
            kill -0 "$nginx_pid" 2>/dev/null || break
            # The pid file appears once nginx has bound its port.
            if [ "$(cat "$prefix/nginx.pid" 2>/dev/null)" = "$nginx_pid" ] \
                && curl -s -o /dev/null "http://127.0.0.1:$port/"; then
                return 0
            fi
            sleep 0.01
        done
        stop_nginx
        # nginx gives up binding after 2.5 s: someone took the port; try another.
        grep -q "Address already in use" "$prefix/error.log" 2>/dev/null || break
    done
    echo "bench-fetch: nginx did not start:" >&2
    tail -n 3 "$prefix/error.log" >&2 || true
    return 1
}

# SIGTERM, then SIGKILL after 5 s.
stop_nginx() {
    [ -n "$nginx_pid" ] || return 0
    kill -TERM "$nginx_pid" 2>/dev/null || true
    local tries
    for tries in $(seq 500); do
        kill -0 "$nginx_pid" 2>/dev/null || break
        sleep 0.01
    done
    kill -KILL "$nginx_pid" 2>/dev/null || true
    wait "$nginx_pid" 2>/dev/null || true
    nginx_pid=""
}

trap 'stop_nginx; rm -rf "$scratch"' EXIT
start_nginx
url="http://127.0.0.1:$port/$(basename "$served")"

bin=$(swift build -c release --show-bin-path)
modelc=$bin/modelc
has_fetch=false
if [ -x "$modelc" ] && "$modelc" help fetch >/dev/null 2>&1; then
    has_fetch=true
fi

download="$scratch/download.bin"
# `sync FILE` is fsync(2) on FILE (coreutils), without a Python start in the timing.
curl_plain() { curl -sS -o "$download" "$url"; }
curl_fsync() { curl -sS -o "$download" "$url" && sync "$download"; }
# A fresh, empty cache each run: the file is downloaded, not found.
modelc_fetch() { MODELC_CACHE="$scratch/cache" "$modelc" fetch "$url" --quiet; }
clean() { rm -rf "$download" "$scratch/cache"; }

# fastest NAME COMMAND...: runs COMMAND once (stdout to $scratch/stdout) and
# keeps the smaller of its time and $NAME, in seconds, in NAME.
fastest() {
    local name=$1 start end
    shift
    clean
    start=$(date +%s.%N)
    "$@" > "$scratch/stdout"
    end=$(date +%s.%N)
    printf -v "$name" '%s' "$(python3 -c "b = '${!name}'; t = $end - $start; print(t if not b else min(float(b), t))")"
}
# peak NAME PROGRAM ARGUMENTS...: the peak resident memory of PROGRAM (not a
# shell function), in bytes, in NAME.
peak() {
    local name=$1
    shift
    clean
    /usr/bin/time -f %M -o "$scratch/peak" "$@" > "$scratch/stdout"
    printf -v "$name" '%s' "$(( $(tail -n 1 "$scratch/peak") * 1024 ))"
}
ratio() { python3 -c "print(f'{$1/$2:.2f}')"; }
mb() { python3 -c "print(f'{$1/1048576:.1f} MB')"; }
rate() { python3 -c "print(f'{$bytes/$1/1048576:.0f} MB/s')"; }

cat "$served" > /dev/null   # in the page cache for every contender
# The contenders take turns within each run, so drifts in the machine's speed
# fall on all of them alike.
curl_time="" curl_fsync_time="" modelc_time=""
for _ in $(seq "$runs"); do
    fastest curl_time curl_plain
    fastest curl_fsync_time curl_fsync
    if $has_fetch; then fastest modelc_time modelc_fetch; fi
done
peak curl_peak curl -sS -o "$download" "$url"

echo
echo "fetch: $(mb "$bytes") over http from nginx on 127.0.0.1, fastest of $runs runs"
printf '  %-28s %8.3f s   %s\n' "curl" "$curl_time" "$(rate "$curl_time")" "curl + fsync" "$curl_fsync_time" "$(rate "$curl_fsync_time")"
if $has_fetch; then
    peak modelc_peak env MODELC_CACHE="$scratch/cache" "$modelc" fetch "$url" --quiet
    printed=$(cut -d ' ' -f 1 "$scratch/stdout")
    printf '  %-28s %8.3f s   %s\n' "modelc fetch" "$modelc_time" "$(rate "$modelc_time")"
    echo "  modelc / curl throughput     $(ratio "$curl_time" "$modelc_time")×   (target ≥ 0.95×)"
    echo "  modelc / (curl + fsync)      $(ratio "$curl_fsync_time" "$modelc_time")×"
    echo "  peak memory                  $(mb "$modelc_peak")   (target ≤ 32 MB; curl $(mb "$curl_peak"))"
    if [ "$printed" != "$(cat "$served.sha256")" ]; then
        echo "  (modelc fetch printed SHA-256 $printed; the file's is $(cat "$served.sha256"))"
    fi
else
    echo "  modelc fetch                 not in this build ('$modelc help fetch' failed)"
    echo "  curl peak memory             $(mb "$curl_peak")"
fi
clean
