"""Token streams under faults (issue 39 item 6): CLIENTS threads open /generate_stream streams on
Fixtures' LlamaDecoderInt4 back to back for SECONDS, each stream in turn one of three kinds:

- killed: reads 0 to 3 events, then goes: its socket reset (SO_LINGER 0), closed plainly, or its
  process (a child of this one) killed with SIGKILL;
- slow: a 2 KiB receive buffer, 16 bytes read at a time with 5 to 15 ms between reads, so that the
  server is far ahead of it: every event must arrive, each its own event with one token, in order,
  the tokens equal to the same prompt's stream read by a single client before the load;
- normal: read as fast as it comes, checked the same way.

The server runs with MODELC_SERVE_TOKEN_DELAY_MS (DELAY, 20 ms: a real decoder's pace; the fixture
alone decodes a token in a fraction of a millisecond, so no client could leave mid-stream) and
CLIENTS / 2 workers, so that streams also wait in the queue (a client killed there too). A probe
(GLMClassifier /infer, which needs a worker too) is sent every 0.25 s throughout.

Checks (exit 1 otherwise): no slow or normal stream failed or differed; the server's metrics
account for every stream (success + CANCELED = streams sent, every slow and normal stream a
success, at least 90 % of the killed ones CANCELED: a kill that reaches a stream after its last
token leaves it a success); every probe answered, the slowest within 2 s; once the clients stop,
nothing left queued or computing within 2 s (the killed streams' workers free); the server still
up, its RSS flat (the last third's peak within 10 % of the first third's).

Usage: stream_faults.py MODELC CLIENTS SECONDS [DELAY]"""
import json
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

MODEL = "LlamaDecoderInt4"
PROMPTS = [[(seed * 7 + i * 13) % 90 + 1 for i in range(3 + seed % 4)] for seed in range(8)]
MAX_TOKENS = 24
KILLS = ("reset", "close", "sigkill")


def request_bytes(prompt):
    body = json.dumps({"input_ids": prompt, "max_tokens": MAX_TOKENS}).encode()
    return (f"POST /v2/models/{MODEL}/generate_stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


class EventReader:
    """An HTTP/1.1 answer of chunked server-sent events read off a socket, `chunk` bytes a recv,
    `pause()` between recvs: the status, then one event's data at a time."""

    def __init__(self, connection, chunk=65536, pause=None):
        self.connection, self.chunk, self.pause = connection, chunk, pause
        self.raw = b""
        self.body = b""
        self.ended = False
        self.status = None

    def _fill(self):
        if self.pause:
            self.pause()
        data = self.connection.recv(self.chunk)
        if not data:
            raise ConnectionError("the server closed the connection mid-answer")
        self.raw += data

    def _line(self):
        while b"\r\n" not in self.raw:
            self._fill()
        line, self.raw = self.raw.split(b"\r\n", 1)
        return line

    def _exact(self, count):
        while len(self.raw) < count:
            self._fill()
        data, self.raw = self.raw[:count], self.raw[count:]
        return data

    def start(self):
        self.status = int(self._line().split()[1])
        headers = {}
        while line := self._line():
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding") != "chunked":
            length = int(headers.get("content-length", "0"))
            self.body = self._exact(length)
            self.ended = True
        return self.status

    def event(self):
        """The next event's data (its data lines joined), or None at the body's end."""
        while b"\n\n" not in self.body:
            if self.ended:
                if self.body.strip():
                    raise ValueError(f"the body ends inside an event: {self.body!r}")
                return None
            size = int(self._line().split(b";")[0], 16)
            if size == 0:
                self._line()
                self.ended = True
                continue
            self.body += self._exact(size)
            if self._exact(2) != b"\r\n":
                raise ValueError("a chunk does not end with CRLF")
        event, self.body = self.body.split(b"\n\n", 1)
        data = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
        return b"\n".join(data).decode()


def read_stream(port, prompt, slow=False):
    """The tokens of one stream, checking that each event is one token at the next index."""
    with socket.socket() as connection:
        pause = None
        if slow:
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
            generator = random.Random(port + len(prompt))
            pause = lambda: time.sleep(generator.uniform(0.005, 0.015))  # noqa: E731
        connection.settimeout(60)
        connection.connect(("127.0.0.1", port))
        connection.sendall(request_bytes(prompt))
        reader = EventReader(connection, chunk=16 if slow else 65536, pause=pause)
        if reader.start() != 200:
            raise RuntimeError(f"status {reader.status}: {reader.body[:200]!r}")
        tokens = []
        while (data := reader.event()) is not None:
            event = json.loads(data)
            if event.get("index") != len(tokens) or len(event.get("output_ids", [])) != 1:
                raise ValueError(f"event {len(tokens)} is {data}")
            tokens.append(event["output_ids"][0])
        return tokens


def leave_after(port, prompt, events, how):
    """Opens a stream, reads `events` events, then leaves as `how` says."""
    if how == "sigkill":
        child = subprocess.Popen([sys.executable, __file__, "--child", str(port), json.dumps(prompt), str(events)],
                                 stdout=subprocess.PIPE)
        child.stdout.readline()  # the child has read its events (or it died: then the line is empty)
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        return
    connection = open_stream(port, prompt, events)
    if how == "reset":
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    connection.close()


def open_stream(port, prompt, events):
    """A connection that asked for a stream of `prompt` and read its first `events` events."""
    connection = socket.create_connection(("127.0.0.1", port), timeout=60)
    connection.sendall(request_bytes(prompt))
    if events:
        reader = EventReader(connection)
        reader.start()
        for _ in range(events):
            reader.event()
    return connection


def child(port, prompt, events):
    """A client process that reads `events` events, says so on stdout and waits to be killed."""
    connection = open_stream(port, prompt, events)  # noqa: F841 (kept open until the process is killed)
    sys.stdout.write("read\n")
    sys.stdout.flush()
    time.sleep(60)


def metrics(url):
    return urllib.request.urlopen(f"http://{url}/metrics", timeout=10).read().decode()


def value(text, name, labels=None):
    pattern = rf"^{re.escape(name)}{'' if labels is None else re.escape('{' + labels + '}')} (\S+)$"
    found = re.search(pattern, text, re.MULTILINE)
    return int(float(found.group(1))) if found else 0


def failures(text, labels):
    """The failures counted for a model, by reason."""
    pattern = rf'^nv_inference_request_failure\{{{re.escape(labels)},reason="(\w+)"\}} (\S+)$'
    return {reason: int(float(count)) for reason, count in re.findall(pattern, text, re.MULTILINE)}


def resident_kb(pid):
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


IRIS = json.dumps({"inputs": [{"name": "features", "datatype": "FP64", "shape": [4], "data": [5.1, 3.5, 1.4, 0.2]}]}).encode()


def run(server, clients, seconds):
    """Runs the load on a started server; returns the counts and measurements `problems` checks."""
    reference = [read_stream(server.port, prompt) for prompt in PROMPTS]
    lock = threading.Lock()
    counts = {"normal": 0, "slow": 0, "killed": 0, "killed before an event": 0, "differed": 0, "failed": 0}
    kills = {how: 0 for how in KILLS}
    errors = []
    probes = []
    samples = []
    stop = time.monotonic() + seconds

    def client(index):
        run = 0
        while time.monotonic() < stop:
            which = (index + run) % len(PROMPTS)
            kind = ("normal", "killed", "slow", "killed")[(index + run) % 4]
            how = KILLS[(index + run // 4) % len(KILLS)]
            run += 1
            try:
                if kind == "killed":
                    events = run % 4
                    leave_after(server.port, PROMPTS[which], events, how)
                    with lock:
                        counts["killed"] += 1
                        counts["killed before an event"] += events == 0
                        kills[how] += 1
                    continue
                tokens = read_stream(server.port, PROMPTS[which], slow=kind == "slow")
                with lock:
                    counts[kind] += 1
                    if tokens != reference[which]:
                        counts["differed"] += 1
                        errors.append(f"{kind} stream of prompt {which}: {tokens} instead of {reference[which]}")
            except Exception as error:  # noqa: BLE001 - every failure is counted and shown
                with lock:
                    counts["failed"] += 1
                    errors.append(f"{kind} stream of prompt {which}: {error!r}")

    def probe():
        while time.monotonic() < stop:
            began = time.monotonic()
            try:
                answer = urllib.request.urlopen(urllib.request.Request(
                    f"http://{server.url}/v2/models/GLMClassifier/infer", data=IRIS,
                    headers={"Content-Type": "application/json"}), timeout=30)
                answer.read()
                probes.append(time.monotonic() - began)
            except Exception as error:  # noqa: BLE001
                with lock:
                    errors.append(f"probe: {error!r}")
                probes.append(float("inf"))
            time.sleep(0.25)

    before = metrics(server.url)
    threads = [threading.Thread(target=client, args=(index,)) for index in range(clients)] + [threading.Thread(target=probe)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        samples.append((time.monotonic() - started, resident_kb(server.process.pid)))
        time.sleep(0.25)
    ended = time.monotonic()
    # Every stream answered or given up: nothing queued or computing within 2 s of the last client leaving.
    idle_after = None
    while time.monotonic() - ended < 10:
        text = metrics(server.url)
        if value(text, "modelc_inference_queue_depth") == 0 and value(text, "modelc_inference_in_flight") == 0:
            idle_after = time.monotonic() - ended
            break
        time.sleep(0.02)
    after = metrics(server.url)
    labels = f'model="{MODEL}",version="1"'
    success = value(after, "nv_inference_request_success", labels) - value(before, "nv_inference_request_success", labels)
    failed = {reason: count - failures(before, labels).get(reason, 0) for reason, count in failures(after, labels).items()}
    served = {"success": success, "canceled": failed.pop("CANCELED", 0), "other failures": sum(failed.values())}
    third = seconds / 3
    return {"counts": counts, "kills": kills, "errors": errors, "served": served, "idle_after": idle_after,
            "probes": sorted(probes), "seconds": seconds, "alive": server.process.poll() is None,
            "rss_early_kb": max((kb for at, kb in samples if at <= third), default=0),
            "rss_late_kb": max((kb for at, kb in samples if at >= 2 * third), default=0),
            "rss_marks_kb": [max((kb for at, kb in samples if mark - 5 < at <= mark), default=0)
                             for mark in range(5, int(seconds) + 1, 5)]}


def problems(result):
    """What went wrong, one line each (empty: the run passed)."""
    counts, served = result["counts"], result["served"]
    found = [f"{counts['failed']} streams failed, {counts['differed']} differed from a single client's"] \
        if counts["failed"] or counts["differed"] else []
    found += result["errors"][:5]
    sent = counts["normal"] + counts["slow"] + counts["killed"]
    # A client reset before the server read its request was never a request (the reset drops it unread).
    counted = served["success"] + served["canceled"]
    if not sent - counts["killed before an event"] <= counted <= sent or served["other failures"]:
        found.append(f"{sent} streams sent ({counts['killed before an event']} left before their first event), the server "
                     f"counts {served['success']} successes, {served['canceled']} canceled and {served['other failures']} other failures")
    if served["success"] < counts["normal"] + counts["slow"]:
        found.append(f"{served['success']} successes for {counts['normal'] + counts['slow']} streams read to their end")
    mid_stream = counts["killed"] - counts["killed before an event"]
    if served["canceled"] < 0.9 * mid_stream:
        found.append(f"{served['canceled']} streams canceled of {mid_stream} clients killed mid-stream")
    if result["idle_after"] is None or result["idle_after"] > 2:
        found.append(f"requests still queued or computing {result['idle_after'] or 'over 10'} s after the clients stopped")
    if not result["probes"] or result["probes"][-1] > 2:
        found.append(f"the slowest probe took {result['probes'][-1] if result['probes'] else 'none'} s")
    if not result["alive"]:
        found.append("the server exited")
    early, late = result["rss_early_kb"], result["rss_late_kb"]
    if not (early > 0 and late <= early * 1.10):
        found.append(f"the server's RSS grew: {early / 1024:.0f} MB in the first third, {late / 1024:.0f} MB in the last")
    return found


def report(result, clients):
    counts, kills, served, probes = result["counts"], result["kills"], result["served"], result["probes"]
    sent = counts["normal"] + counts["slow"] + counts["killed"]
    p99 = probes[min(len(probes) - 1, int(0.99 * len(probes)))] if probes else float("nan")
    return (f"{clients} clients for {result['seconds']:.0f} s: {sent} streams ({sent / result['seconds']:.1f}/s): "
            f"{counts['normal']} normal, {counts['slow']} slow, {counts['killed']} killed ({kills['reset']} reset, "
            f"{kills['close']} closed, {kills['sigkill']} SIGKILLed; {counts['killed before an event']} before their first event); "
            f"{counts['differed']} differed, {counts['failed']} failed; "
            f"server: {served['success']} succeeded, {served['canceled']} CANCELED, {served['other failures']} other; "
            f"idle {1000 * (result['idle_after'] or float('nan')):.0f} ms after the clients stopped; "
            f"probe p99 {1000 * p99:.0f} ms, slowest {1000 * (probes[-1] if probes else float('nan')):.0f} ms; "
            f"RSS {result['rss_early_kb'] / 1024:.0f} MB in the first third, {result['rss_late_kb'] / 1024:.0f} MB in the last "
            f"(every 5 s: {' '.join(f'{kb / 1024:.0f}' for kb in result['rss_marks_kb'])})")


def start_server(conftest, directory, clients, delay):
    models = Path(directory) / "models"
    models.mkdir()
    shutil.copytree(conftest.FIXTURES / "Models" / f"{MODEL}.mlpackage", models / f"{MODEL}.mlpackage")
    shutil.copy(conftest.FIXTURES / "Models" / "GLMClassifier.mlmodel", models / "GLMClassifier.mlmodel")
    return conftest.Server(models, directory, "--threads", str(max(1, clients // 2)),
                           env={"MODELC_SERVE_TOKEN_DELAY_MS": str(delay)})


def main():
    if sys.argv[1] == "--child":
        child(int(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4]))
        return 0
    sys.path.insert(0, str(Path(__file__).parent))
    import conftest  # noqa: E402 - the server's starter, with its MODELC from the command line
    conftest.MODELC = sys.argv[1]
    clients, seconds = int(sys.argv[2]), float(sys.argv[3])
    delay = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(conftest, tmp, clients, delay)
        try:
            result = run(server, clients, seconds)
        finally:
            code = server.stop()
    print(report(result, clients))
    found = problems(result) + ([] if code == 0 else [f"modelc serve exited {code}"])
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
