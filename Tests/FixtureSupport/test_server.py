#!/usr/bin/env python3
"""HTTP server for ModelFetchTests, standard library only.

Usage: test_server.py DIRECTORY
Listens on 127.0.0.1 on a free port, prints the port as its first stdout line,
and serves the files in DIRECTORY with Range, If-Range, ETag and Last-Modified
until its stdin closes.
Faults are chosen per request with ?fault=A,B,... :
  404               answer 404
  503-once, 429-once  first request of the path+query: 503/429 with Retry-After: 1
  close-after:N     first request: send N body bytes, then close the connection
  stall-after:N     first request: send N body bytes, then send nothing more
  ignore-range      answer 200 with the whole file to Range requests
  etag-changes      a different ETag on every request
  redirect:N        N 302 hops (redirect:N-1, ...) before the file
  redirect-host:H   one 302 to the same path on host H (same port), without this fault
  redirect-file     one 302 to file:///etc/passwd (which a client must refuse)
  short-body        every request: send at most 10000 body bytes, then close
  throttle:N        send the body at about N bytes per second
Conditional requests (If-None-Match, If-Modified-Since) get 304 when the file
is unchanged. GET /__log answers a JSON list of the requests so far (path,
Host, Range, conditional and credential headers, status, body bytes sent).
"""
import json
import email.utils
import os
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

ROOT = sys.argv[1]
REQUESTS = {}
REQUESTS_LOCK = threading.Lock()
LOG = []


class Server(socketserver.ThreadingMixIn, HTTPServer):
    daemon_threads = True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        pass

    def do_GET(self):
        if self.path == "/__log":
            with REQUESTS_LOCK:
                body = json.dumps(LOG).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.entry = {"path": self.path}
        for name in ("Host", "Range", "If-Range", "If-None-Match", "If-Modified-Since", "Authorization", "X-Token"):
            if self.headers.get(name) is not None:
                self.entry[name] = self.headers.get(name)
        with REQUESTS_LOCK:
            LOG.append(self.entry)
        parts = urlsplit(self.path)
        faults = [f for f in parse_qs(parts.query).get("fault", [""])[0].split(",") if f]
        with REQUESTS_LOCK:
            seen = REQUESTS.get(self.path, 0)
            REQUESTS[self.path] = seen + 1
        first = seen == 0

        for fault in faults:
            if fault == "404":
                return self.empty(404)
            if fault in ("503-once", "429-once") and first:
                return self.empty(int(fault[:3]), {"Retry-After": "1"})
            if fault == "redirect-file":
                return self.empty(302, {"Location": "file:///etc/passwd"})
            if fault.startswith("redirect-host:"):
                host = fault.split(":", 1)[1]
                rest = [f for f in faults if f != fault]
                query = ("?" + urlencode({"fault": ",".join(rest)})) if rest else ""
                location = "http://%s:%d%s%s" % (host, self.server.server_address[1], parts.path, query)
                return self.empty(302, {"Location": location})
            if fault.startswith("redirect:"):
                hops = int(fault.split(":", 1)[1])
                if hops > 0:
                    rest = [f for f in faults if not f.startswith("redirect:")] + ["redirect:%d" % (hops - 1)]
                    return self.empty(302, {"Location": parts.path + "?" + urlencode({"fault": ",".join(rest)})})

        path = os.path.join(ROOT, os.path.basename(parts.path))
        if not os.path.isfile(path):
            return self.empty(404)
        with open(path, "rb") as file:
            data = file.read()
        stat = os.stat(path)
        etag = '"%x-%x"' % (len(data), stat.st_mtime_ns)
        if "etag-changes" in faults:
            etag = '"changed-%d"' % seen
        last_modified = email.utils.formatdate(stat.st_mtime, usegmt=True)

        if_none_match = self.headers.get("If-None-Match")
        if_modified_since = self.headers.get("If-Modified-Since")
        unchanged = False
        if if_none_match is not None:
            unchanged = if_none_match.strip() in ("*", etag)
        elif if_modified_since is not None:
            since = email.utils.parsedate_to_datetime(if_modified_since).timestamp()
            unchanged = int(stat.st_mtime) <= since
        if unchanged:
            return self.empty(304, {"ETag": etag, "Last-Modified": last_modified}, length=False)

        start = 0
        status = 200
        range_header = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        if range_header and "ignore-range" not in faults and (if_range is None or if_range in (etag, last_modified)):
            spec = range_header.strip()
            if spec.startswith("bytes=") and spec[6:].endswith("-") and spec[6:-1].isdigit():
                start = int(spec[6:-1])
                if start >= len(data):
                    return self.empty(416, {"Content-Range": "bytes */%d" % len(data)})
                status = 206

        body = data[start:]
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", last_modified)
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        self.end_headers()
        self.entry["status"] = status

        if "short-body" in faults:
            self.send_body(body[:10000])
            self.close_connection = True
            return
        for fault in faults:
            if fault.startswith("throttle:"):
                rate = int(fault.split(":", 1)[1])
                for offset in range(0, len(body), 4096):
                    self.send_body(body[offset:offset + 4096])
                    time.sleep(4096 / rate)
                return
        for fault in faults:
            if first and (fault.startswith("close-after:") or fault.startswith("stall-after:")):
                count = int(fault.split(":", 1)[1])
                self.send_body(body[:count])
                if fault.startswith("stall-after:"):
                    while True:
                        time.sleep(60)
                self.close_connection = True
                return
        self.send_body(body)

    def send_body(self, data):
        self.wfile.write(data)
        self.wfile.flush()
        with REQUESTS_LOCK:
            self.entry["sent"] = self.entry.get("sent", 0) + len(data)

    def empty(self, status, headers=None, length=True):
        with REQUESTS_LOCK:
            self.entry["status"] = status
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if length:
            self.send_header("Content-Length", "0")
        self.end_headers()


def exit_when_stdin_closes():
    sys.stdin.buffer.read()
    os._exit(0)


def main():
    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
