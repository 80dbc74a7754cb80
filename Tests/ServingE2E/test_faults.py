"""Faults a server meets: clients that vanish or lie, huge and malformed bodies, models that go away, SIGTERM under load."""
import http.client
import json
import os
import re
import shutil
import socket
import threading
import time

import pytest

from conftest import Server

IRIS = {"inputs": [{"name": "features", "datatype": "FP64", "shape": [4], "data": [5.1, 3.5, 1.4, 0.2]}]}


def infer_ok(server, model="TreeEnsembleClassifier"):
    status, body = server.request("POST", f"/v2/models/{model}/infer", IRIS)
    assert status == 200, body
    return json.loads(body)


def raw_exchange(server, data, read=True, shutdown_write=False, timeout=10):
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as connection:
        connection.sendall(data)
        if shutdown_write:
            connection.shutdown(socket.SHUT_WR)
        if not read:
            return b""
        chunks = []
        try:
            while True:
                chunk = connection.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except (ConnectionResetError, socket.timeout):
            pass
        return b"".join(chunks)


def test_client_disconnecting_mid_body_and_mid_request(server):
    head = b"POST /v2/models/TreeEnsembleClassifier/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
    for _ in range(20):
        raw_exchange(server, head + b'{"inputs": [', read=False)
    # Gone after sending the whole request, before the answer.
    body = json.dumps(IRIS).encode()
    for _ in range(20):
        raw_exchange(server, b"POST /v2/models/TreeEnsembleClassifier/infer HTTP/1.1\r\nHost: x\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body, read=False)
    infer_ok(server)


def test_bodies_lying_about_their_length(server):
    body = json.dumps(IRIS).encode()
    # Shorter than announced, then the client stops sending: no answer is made up, the server goes on.
    answer = raw_exchange(server, b"POST /v2/models/TreeEnsembleClassifier/infer HTTP/1.1\r\nHost: x\r\nContent-Length: "
                          + str(len(body) + 50).encode() + b"\r\n\r\n" + body, shutdown_write=True)
    assert not answer.startswith(b"HTTP/1.1 200")
    # Longer than announced: the body is cut at Content-Length (invalid JSON, 400) and the rest is not a request.
    answer = raw_exchange(server, b"POST /v2/models/TreeEnsembleClassifier/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n"
                          + body, shutdown_write=True)
    assert answer.startswith(b"HTTP/1.1 400") and b"not valid JSON" in answer
    answer = raw_exchange(server, b"POST /v2/repository/index HTTP/1.1\r\nHost: x\r\nContent-Length: banana\r\n\r\n{}",
                          shutdown_write=True)
    assert answer.startswith(b"HTTP/1.1 400")
    infer_ok(server)


def test_a_2_gb_body_is_refused_without_being_read(server):
    rss_before = server.rss_bytes()
    started = time.time()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as connection:
        connection.sendall(b"POST /v2/models/TreeEnsembleClassifier/infer HTTP/1.1\r\nHost: x\r\nContent-Length: "
                           + str(2 << 30).encode() + b"\r\n\r\n")
        sent = 0
        chunk = b"0" * (1 << 20)
        try:
            while sent < (64 << 20):  # at most 64 MiB of the 2 GiB are offered
                connection.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = b""
        try:
            answer = connection.recv(4096)
        except ConnectionResetError:
            pass
    assert time.time() - started < 10
    assert answer == b"" or answer.startswith(b"HTTP/1.1 413"), answer
    assert server.rss_bytes() - rss_before < (32 << 20), "the body was not buffered"
    infer_ok(server)


@pytest.mark.parametrize("body,status,fault", [
    (b'{"inputs": [', 400, "not valid JSON"),
    (b'{"inputs": [{"name": "features", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]}]}', 400, "the model takes FP64"),
    (b'{"inputs": [{"name": "features", "datatype": "FP64", "shape": [2, 2], "data": [1, 2, 3, 4]}]}', 400, "shape"),
    (b'{"inputs": [{"name": "features", "datatype": "FP64", "shape": [4], "data": [1, 2, 3]}]}', 400, "3 values"),
    (b'{"inputs": [{"name": "features", "datatype": "FP64", "shape": [4], "data": ["a", 2, 3, 4]}]}', 400, "not a FP64 value"),
])
def test_malformed_requests_get_400_naming_the_fault(server, body, status, fault):
    got, answer = server.request("POST", "/v2/models/TreeEnsembleClassifier/infer", body)
    assert got == status and fault in json.loads(answer)["error"]
    infer_ok(server)


def test_unknown_model_and_endpoint(server):
    status, answer = server.request("POST", "/v2/models/Missing/infer", IRIS)
    assert status == 404 and json.loads(answer) == {"error": "unknown model 'Missing'"}
    status, answer = server.request("GET", "/v2/nothing/here")
    assert status == 404 and "error" in json.loads(answer)
    status, _ = server.request("DELETE", "/v2/models/TreeEnsembleClassifier")
    assert status == 405


def test_model_deleted_from_disk_while_loaded(server, model_dir):
    infer_ok(server, "GLMClassifier")
    os.remove(model_dir / "GLMClassifier.mlmodel")
    status, answer = server.request("POST", "/v2/models/GLMClassifier/infer", IRIS)
    assert status == 404 and "GLMClassifier" in json.loads(answer)["error"]
    infer_ok(server)
    _, metrics = server.request("GET", "/metrics")
    assert re.search(rb"^modelc_model_evictions_total 1$", metrics, re.M)


def test_exit_codes_for_what_the_server_cannot_use(model_dir, tmp_path):
    import subprocess
    from conftest import MODELC, free_port
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    env = dict(os.environ, MODELC_CACHE=str(tmp_path / "cache"))
    cases = [
        (["--port", str(busy.getsockname()[1])], 101),
        (["--host", "not-an-address", "--port", "0"], 101),
        (["--port", "0", "--tls-cert", str(tmp_path / "none.pem"), "--tls-key", str(tmp_path / "none.pem")], 102),
        (["--port", "0", "--api-key-file", str(tmp_path / "no-key")], 103),
    ]
    for arguments, code in cases:
        result = subprocess.run([MODELC, "serve", str(model_dir), *arguments], capture_output=True, text=True, env=env, timeout=30)
        assert result.returncode == code, (arguments, result.stderr)
        assert result.stderr.startswith("modelc: error: ") and result.stderr.count("\n") == 1
    result = subprocess.run([MODELC, "serve", str(tmp_path / "no-such-dir"), "--port", "0"], capture_output=True, text=True, env=env)
    assert result.returncode == 104 and "no such directory" in result.stderr
    busy.close()


def test_sigterm_under_load_loses_no_accepted_request(model_dir, tmp_path):
    server = Server(model_dir, tmp_path, "--threads", "2")
    statuses, errors = [], []
    lock = threading.Lock()
    stop = threading.Event()

    def client():
        connection = None
        while not stop.is_set():
            try:
                if connection is None:
                    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
                connection.request("POST", "/v2/models/TreeEnsembleClassifier/infer", json.dumps(IRIS))
                response = connection.getresponse()
                response.read()
                with lock:
                    statuses.append(response.status)
                if response.getheader("Connection", "").lower() == "close":
                    connection.close()
                    connection = None
            except ConnectionRefusedError:
                return  # the server no longer accepts connections: nothing was accepted
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as error:
                with lock:
                    errors.append(repr(error))
                connection = None
        if connection is not None:
            connection.close()

    threads = [threading.Thread(target=client) for _ in range(16)]
    for thread in threads:
        thread.start()
    time.sleep(1.5)
    code = server.stop()
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    log = server.log_text()
    assert code == 0, log
    answered = int(re.search(r"stopped answered=(\d+)", log).group(1))
    assert statuses and set(statuses) == {200}
    # Every request the server took in was answered to its client: the server's count includes the readiness
    # probes made before the load.
    assert answered - len(statuses) <= 20 and answered >= len(statuses), (answered, len(statuses), errors)
    # A request sent on an open connection while the server stopped may be cut before the server took it in;
    # none may be cut after (then the counts above would differ).
    assert len(errors) <= len(threads), errors


def test_sigterm_right_after_loads_keeps_their_log_lines(model_dir, tmp_path):
    """The cache's load and eviction lines are written when they happen, not by a task that may not
    run before the process exits: a server stopped right after them has them all in its log."""
    for round in range(3):
        server = Server(model_dir, tmp_path)
        for path in ["/v2/repository/models/GLMClassifier/load", "/v2/repository/models/GLMClassifier/unload",
                     "/v2/repository/models/TreeEnsembleClassifier/load"]:
            status, body = server.request("POST", path)
            assert status == 200, body
        code = server.stop()
        log = server.log_text()
        assert code == 0, log
        lines = log.splitlines()
        stopped = next(index for index, line in enumerate(lines) if " info stopped answered=" in line)
        for pattern in [r" info model loaded model=GLMClassifier bytes=\d+$",
                        r" info model evicted model=GLMClassifier bytes=\d+ reason=requested$",
                        r" info model loaded model=TreeEnsembleClassifier bytes=\d+$"]:
            found = [index for index, line in enumerate(lines) if re.search(pattern, line)]
            assert found and found[0] < stopped, (round, pattern, log)


def test_sigterm_as_soon_as_the_server_answers_drains(model_dir, tmp_path):
    """SIGTERM is caught before the server listens: one sent the moment it answers is not lost (the
    server then ran forever) and does not kill it undrained."""
    for _ in range(5):
        server = Server(model_dir, tmp_path)
        code = server.stop(timeout=30)
        log = server.log_text()
        assert code == 0 and " info stopped answered=" in log, log


def test_manifest_json_logs_and_compressed_bodies(tmp_path):
    import shutil
    import subprocess
    from conftest import FIXTURES, MODELC
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(FIXTURES / "Models" / "GLMClassifier.mlmodel", project / "glm.mlmodel")
    (project / "models.json").write_text(json.dumps({"models": [{"name": "iris", "source": "glm.mlmodel"}]}))
    server = Server(None, tmp_path, "--manifest", str(project / "models.json"), "--log-format", "json")
    try:
        infer_ok(server, "iris")
        status, answer = server.request("POST", "/v2/models/iris/infer", json.dumps(IRIS).encode(),
                                        headers={"Content-Encoding": "gzip"})
        assert status == 415 and "Content-Encoding" in json.loads(answer)["error"]
    finally:
        assert server.stop() == 0, server.log_text()
    lines = [json.loads(line) for line in server.log_text().splitlines() if line.strip()]
    assert {"listening", "model loaded", "draining", "stopped"} <= {line["message"] for line in lines}
    assert all({"time", "level", "message"} <= set(line) for line in lines)
    (project / "models.json").write_text('{"models": [{"name": "x"}]}')
    result = subprocess.run([MODELC, "serve", "--manifest", str(project / "models.json"), "--port", "0"],
                            capture_output=True, text=True, env=dict(os.environ, MODELC_CACHE=str(tmp_path / "cache")))
    assert result.returncode == 104 and "source" in result.stderr


def test_only_serve_loads_libmicrohttpd(server):
    import subprocess
    from conftest import FIXTURES, MODELC
    maps = open(f"/proc/{server.process.pid}/maps").read()
    assert "libmicrohttpd" in maps
    result = subprocess.run([MODELC, "inspect", str(FIXTURES / "Models" / "GLMClassifier.mlmodel")], capture_output=True,
                            text=True, env=dict(os.environ, LD_DEBUG="files"))
    assert result.returncode == 0
    assert "libmicrohttpd" not in result.stderr and "libgnutls" not in result.stderr
