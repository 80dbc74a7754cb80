"""Triton's generate extension on the real `modelc serve`: /generate gives the tokens `modelc generate`
gives (the fixture's reference greedy tokens), /generate_stream the same tokens as server-sent events
read with aiohttp (tritonclient's asynchronous HTTP client) and a reader following the SSE rules, the
same seed the same sampled tokens, a client leaving mid-stream frees its worker, /metrics counts it."""
import asyncio
import json
import re
import shutil
import socket
import subprocess
import time

import aiohttp
import pytest

from conftest import FIXTURES, MODELC, Server

MODEL = "LlamaDecoderInt8"
PROMPT = [50, 87, 60, 17, 33]
REFERENCE = json.loads((FIXTURES / "Models" / f"{MODEL}.json").read_text())


@pytest.fixture
def decoder_dir(tmp_path):
    directory = tmp_path / "models"
    directory.mkdir()
    shutil.copytree(FIXTURES / "Models" / f"{MODEL}.mlpackage", directory / f"{MODEL}.mlpackage")
    shutil.copy(FIXTURES / "Models" / "GLMClassifier.mlmodel", directory / "GLMClassifier.mlmodel")
    return directory


@pytest.fixture
def decoder_server(decoder_dir, tmp_path):
    started = Server(decoder_dir, tmp_path)
    yield started
    assert started.stop() == 0, started.log_text()


async def read_events(response):
    """Server-sent events as the WHATWG rules read them: `field: value` lines, an event dispatched
    at a blank line, its data lines joined with newlines; comments and other fields ignored."""
    data = []
    async for raw in response.content:
        line = raw.decode().rstrip("\r\n")
        if line == "":
            if data:
                yield "\n".join(data)
            data = []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


def stream(server, body, headers=None):
    """Status, content type, each event's data (as sent) and its arrival time after the request was sent."""
    async def run():
        async with aiohttp.ClientSession() as session:
            sent = time.perf_counter()
            async with session.post(f"http://{server.url}/v2/models/{MODEL}/generate_stream", json=body,
                                    headers=headers or {}) as response:
                events = [(data, time.perf_counter() - sent) async for data in read_events(response)]
                return response.status, response.headers.get("Content-Type"), events
    return asyncio.run(run())


def generate(server, body, model=MODEL):
    status, payload = server.request("POST", f"/v2/models/{model}/generate", body)
    return status, json.loads(payload)


def modelc_generate(*arguments):
    result = subprocess.run([MODELC, "generate", str(FIXTURES / "Models" / f"{MODEL}.mlpackage"),
                             "--input-ids", ",".join(map(str, PROMPT)), *arguments],
                            capture_output=True, text=True, check=True)
    return result.stdout


def metric(text, name, labels):
    match = re.search(rf"^{re.escape(name)}{{{re.escape(labels)}}} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else None


def test_generate_gives_the_tokens_of_modelc_generate(decoder_server):
    cli = [int(line) for line in modelc_generate("--max-new-tokens", "6").split()]
    assert cli == REFERENCE["greedy"]
    status, answer = generate(decoder_server, {"input_ids": PROMPT, "max_tokens": 6, "id": "q1"})
    assert status == 200, answer
    assert answer == {"model_name": MODEL, "model_version": "1", "id": "q1", "output_ids": cli}


def test_generate_stream_sends_one_event_per_token(decoder_server):
    status, content_type, events = stream(decoder_server, {"input_ids": PROMPT, "parameters": {"max_tokens": 6}})
    assert status == 200 and content_type == "text/event-stream; charset=utf-8"
    assert "[DONE]" not in [data for data, _ in events]
    objects = [json.loads(data) for data, _ in events]
    assert [o["output_ids"] for o in objects] == [[token] for token in REFERENCE["greedy"]]
    assert [o["index"] for o in objects] == list(range(6))
    assert all(o["model_name"] == MODEL and o["model_version"] == "1" for o in objects)


def test_the_same_seed_gives_the_same_sampled_tokens(decoder_server):
    body = {"input_ids": PROMPT, "max_tokens": 10, "temperature": 1.5, "top_k": 20, "seed": 11}
    first = generate(decoder_server, body)[1]["output_ids"]
    second = generate(decoder_server, body)[1]["output_ids"]
    streamed = [json.loads(data)["output_ids"][0] for data, _ in stream(decoder_server, body)[2]]
    cli = [int(line) for line in modelc_generate("--max-new-tokens", "10", "--temperature", "1.5", "--top-k", "20",
                                                 "--seed", "11").split()]
    assert len(first) == 10 and first == second == streamed == cli
    other = generate(decoder_server, dict(body, seed=12))[1]["output_ids"]
    assert other != first


def test_errors_before_the_first_token_have_their_status(decoder_server):
    for path in ("generate", "generate_stream"):
        for body, status, text in [
            ({"max_tokens": 2}, 400, "no 'input_ids'"),
            ({"input_ids": [50, "x"], "max_tokens": 2}, 400, "'input_ids'[1]"),
            ({"input_ids": PROMPT, "max_tokens": 0}, 400, "'max_tokens' is 0"),
            ({"input_ids": PROMPT, "max_tokens": 29}, 400, "context of 32"),
        ]:
            code, payload = decoder_server.request("POST", f"/v2/models/{MODEL}/{path}", body)
            assert code == status and text in json.loads(payload)["error"], (path, body, payload)
        code, payload = decoder_server.request("POST", f"/v2/models/Nope/{path}", {"input_ids": [1], "max_tokens": 1})
        assert code == 404, payload
        code, payload = decoder_server.request("POST", f"/v2/models/GLMClassifier/{path}", {"input_ids": [1], "max_tokens": 1})
        assert code == 400 and "not a decoder" in json.loads(payload)["error"], payload


def test_a_client_leaving_mid_stream_frees_its_worker(decoder_dir, tmp_path):
    # One worker; each token 100 ms: the 27 tokens asked for would hold it 2.7 s.
    server = Server(decoder_dir, tmp_path, "--threads", "1", env={"MODELC_SERVE_TOKEN_DELAY_MS": "100"})
    try:
        body = json.dumps({"input_ids": PROMPT, "max_tokens": 27}).encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as connection:
            connection.sendall(f"POST /v2/models/{MODEL}/generate_stream HTTP/1.1\r\nHost: x\r\n"
                               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            received = b""
            while b"data: " not in received:
                received += connection.recv(4096)
            assert received.startswith(b"HTTP/1.1 200"), received
        left = time.perf_counter()
        status, answer = generate(server, {"input_ids": PROMPT, "max_tokens": 2})
        waited = time.perf_counter() - left
        assert status == 200 and answer["output_ids"] == REFERENCE["greedy"][:2], answer
        print(f"the next request answered {waited * 1000:.0f} ms after the client left")
        assert waited < 1.2, waited  # the stream's next token (0.1 s), then two tokens (0.2 s); not 2.5 s more
        _, metrics = server.request("GET", "/metrics")
        labels = f'model="{MODEL}",version="1",reason="CANCELED"'
        assert metric(metrics.decode(), "nv_inference_request_failure", labels) == 1
    finally:
        assert server.stop() == 0, server.log_text()


def test_a_stream_past_its_timeout_ends_with_an_error_event(decoder_dir, tmp_path):
    server = Server(decoder_dir, tmp_path, "--timeout", "500", env={"MODELC_SERVE_TOKEN_DELAY_MS": "100"})
    try:
        status, _, events = stream(server, {"input_ids": PROMPT, "max_tokens": 27})
        objects = [json.loads(data) for data, _ in events]
        assert status == 200 and 1 <= len(objects) - 1 < 27, objects
        assert objects[-1] == {"error": "request timed out after 500 ms"}
        assert [o["output_ids"][0] for o in objects[:-1]][:6] == REFERENCE["greedy"][:len(objects) - 1]
    finally:
        assert server.stop() == 0, server.log_text()


def test_a_stream_under_way_at_sigterm_ends_within_the_timeout(decoder_dir, tmp_path):
    server = Server(decoder_dir, tmp_path, "--timeout", "600", env={"MODELC_SERVE_TOKEN_DELAY_MS": "100"})
    try:
        async def run():
            async with aiohttp.ClientSession() as session:
                async with session.post(f"http://{server.url}/v2/models/{MODEL}/generate_stream",
                                        json={"input_ids": PROMPT, "max_tokens": 27}) as response:
                    events = read_events(response)
                    first = await events.__anext__()
                    server.process.send_signal(15)
                    signalled = time.perf_counter()
                    rest = [data async for data in events]
                    return [first] + rest, time.perf_counter() - signalled
        events, seconds = asyncio.run(run())
        # One --timeout bounds both: the request's own deadline (from its arrival) comes first here.
        assert json.loads(events[-1])["error"] in ("server is shutting down", "request timed out after 600 ms"), events
        assert 2 <= len(events) < 28 and seconds < 1.5, (len(events), seconds)
        assert server.process.wait(timeout=10) == 0
    finally:
        server.stop()


def test_metrics_count_tokens_and_latencies(decoder_server):
    stream(decoder_server, {"input_ids": PROMPT, "max_tokens": 6})
    generate(decoder_server, {"input_ids": PROMPT, "max_tokens": 4})
    _, payload = decoder_server.request("GET", "/metrics")
    text = payload.decode()
    labels = f'model="{MODEL}",version="1"'
    assert "# TYPE modelc_generate_first_token_seconds histogram" in text
    assert "# TYPE modelc_generate_token_seconds histogram" in text
    assert metric(text, "modelc_generate_first_token_seconds_count", labels) == 2
    assert metric(text, "modelc_generate_first_token_seconds_bucket", labels + ',le="+Inf"') == 2
    assert metric(text, "modelc_generate_token_seconds_count", labels) == 8
    assert metric(text, "modelc_generate_tokens_total", labels) == 10
    assert metric(text, "nv_inference_request_success", labels) == 2
    assert metric(text, "nv_inference_exec_count", labels) == 10
