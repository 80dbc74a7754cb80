"""Token streams under faults, in short (make load runs stream_faults.py long): clients killed
mid-stream (reset, closed, SIGKILLed) and slow readers among normal ones on the real `modelc serve`;
and a client leaving while its stream still waits in the queue is never computed."""
import json
import re
import shutil
import socket
import time

import conftest
import stream_faults
from conftest import FIXTURES, Server


def test_killed_and_slow_stream_clients(tmp_path):
    server = stream_faults.start_server(conftest, tmp_path, 6, 30)
    try:
        result = stream_faults.run(server, 6, 4)
    finally:
        code = server.stop()
    print(stream_faults.report(result, 6))
    assert stream_faults.problems(result) == [] and code == 0, (stream_faults.problems(result), server.log_text())
    counts = result["counts"]
    assert counts["slow"] >= 3 and counts["normal"] >= 3 and counts["killed"] >= 6, counts
    assert all(result["kills"][how] >= 1 for how in stream_faults.KILLS), result["kills"]


def test_a_stream_left_in_the_queue_is_never_computed(tmp_path):
    directory = tmp_path / "models"
    directory.mkdir()
    shutil.copytree(FIXTURES / "Models" / f"{stream_faults.MODEL}.mlpackage", directory / f"{stream_faults.MODEL}.mlpackage")
    # One worker; each token 100 ms: the first stream holds it for 2.4 s.
    server = Server(directory, tmp_path, "--threads", "1", env={"MODELC_SERVE_TOKEN_DELAY_MS": "100"})
    labels = f'model="{stream_faults.MODEL}",version="1"'
    try:
        prompt = stream_faults.PROMPTS[0]
        holder = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        holder.sendall(stream_faults.request_bytes(prompt))
        reader = stream_faults.EventReader(holder)
        assert reader.start() == 200
        first = reader.event()
        queued = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        queued.sendall(stream_faults.request_bytes(prompt))
        deadline = time.monotonic() + 10
        while stream_faults.value(stream_faults.metrics(server.url), "modelc_inference_queue_depth") != 1:
            assert time.monotonic() < deadline, "the second stream was never queued"
            time.sleep(0.01)
        queued.close()
        left = time.monotonic()
        while True:
            text = stream_faults.metrics(server.url)
            if stream_faults.value(text, "nv_inference_request_failure", labels + ',reason="CANCELED"') == 1:
                break
            assert time.monotonic() - left < 2, "the stream that left the queue was not given up"
            time.sleep(0.01)
        assert stream_faults.value(text, "modelc_inference_queue_depth") == 0
        print(f"given up {1000 * (time.monotonic() - left):.0f} ms after its client left, the first stream still under way")
        tokens = [json.loads(first)["output_ids"][0]]
        while (data := reader.event()) is not None:
            tokens.append(json.loads(data)["output_ids"][0])
        holder.close()
        assert len(tokens) == stream_faults.MAX_TOKENS
        text = stream_faults.metrics(server.url)
        # Only the first stream's tokens were computed.
        assert stream_faults.value(text, "modelc_generate_tokens_total", labels) == stream_faults.MAX_TOKENS
        assert re.search(rf'^nv_inference_request_success\{{{re.escape(labels)}\}} 1$', text, re.MULTILINE)
    finally:
        assert server.stop() == 0, server.log_text()
