"""`modelc serve`'s gRPC port through Triton's own gRPC client (tritonclient[grpc] from PyPI), and
through the protocol's messages sent as they are (typed contents, raw contents, wrong ones)."""
import json
import re
import socket
import subprocess
import threading
import time
import urllib.request

import grpc
import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from conftest import FIXTURES, MODELC, Server, free_port, modelc_predict

X = (np.arange(16, dtype=np.float32).reshape(1, 16) - 7.5) / 4


def stub(server):
    return service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_url))


def status_of(call):
    """The gRPC status code and message a call fails with."""
    with pytest.raises(grpc.RpcError) as failure:
        call()
    return failure.value.code(), failure.value.details()


def metrics(server):
    with urllib.request.urlopen(f"http://{server.url}/metrics", timeout=10) as response:
        return response.read().decode()


def wait_queued(server, count=1, seconds=20):
    """Returns once `count` requests wait in the server's queue."""
    deadline = time.monotonic() + seconds
    while sample(metrics(server), "modelc_inference_queue_depth") < count:
        assert time.monotonic() < deadline, "the request never reached the queue"
        time.sleep(0.02)


def sample(text, name, **labels):
    """The value of the first Prometheus sample of `name` with these labels, 0 when absent."""
    for line in text.splitlines():
        if (line.startswith(name + "{") or line.startswith(name + " ")) and \
                all(f'{key}="{value}"' in line for key, value in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.fixture
def grpc_models(model_dir):
    """The usual models, plus an INT32/FP16 decoder and a string-input encoder."""
    import shutil
    shutil.copytree(FIXTURES / "Models" / "LlamaDecoderInt8.mlpackage", model_dir / "LlamaDecoderInt8.mlpackage")
    shutil.copy(FIXTURES / "Models" / "OneHotEncoder.mlmodel", model_dir / "OneHotEncoder.mlmodel")
    return model_dir


def test_health_and_metadata(server):
    client = triton.InferenceServerClient(server.grpc_url)
    assert client.is_server_live() and client.is_server_ready()
    metadata = client.get_server_metadata()
    assert metadata.name == "modelc" and "classification" in metadata.extensions
    model = client.get_model_metadata("MLProgram", as_json=True)
    assert model["versions"] == ["1"] and model["platform"] == "coreml"
    assert model["inputs"] == [{"name": "x", "datatype": "FP32", "shape": ["1", "16"]}]
    assert model["outputs"] == [{"name": "probs", "datatype": "FP32", "shape": ["1", "4"]}]
    assert client.is_model_ready("MLProgram") and client.is_model_ready("MLProgram", "1")
    assert not client.is_model_ready("MLProgram", "2") and not client.is_model_ready("NoSuchModel")


def test_fp32_raw_contents_match_modelc_predict_and_rest(server):
    client = triton.InferenceServerClient(server.grpc_url)
    tensor = triton.InferInput("x", [1, 16], "FP32")
    tensor.set_data_from_numpy(X)
    result = client.infer("MLProgram", [tensor], request_id="grpc-1")
    probs = result.as_numpy("probs")
    assert result.get_response().id == "grpc-1" and probs.dtype == np.float32 and probs.shape == (1, 4)
    expected = modelc_predict(FIXTURES / "Models" / "MLProgram.mlpackage", json.dumps({"x": X.tolist()}))
    np.testing.assert_allclose(probs, np.array(expected["outputs"]["probs"], dtype=np.float32), rtol=0, atol=1e-6)


def test_typed_contents_fp32_fp64_and_bytes(server, grpc_models):
    service = stub(server)
    request = service_pb2.ModelInferRequest(model_name="MLProgram")
    tensor = request.inputs.add(name="x", datatype="FP32", shape=[1, 16])
    tensor.contents.fp32_contents.extend(X.ravel().tolist())
    response = service.ModelInfer(request)
    assert [output.name for output in response.outputs] == ["probs"] and list(response.outputs[0].shape) == [1, 4]
    typed = np.frombuffer(response.raw_output_contents[0], dtype="<f4").reshape(1, 4)
    client = triton.InferenceServerClient(server.grpc_url)
    raw = triton.InferInput("x", [1, 16], "FP32")
    raw.set_data_from_numpy(X)
    np.testing.assert_array_equal(typed, client.infer("MLProgram", [raw]).as_numpy("probs"))

    request = service_pb2.ModelInferRequest(model_name="GLMClassifier")
    request.inputs.add(name="features", datatype="FP64", shape=[4]).contents.fp64_contents.extend([5.1, 3.5, 1.4, 0.2])
    request.outputs.add(name="classProbability").parameters["classification"].int64_param = 2
    response = service.ModelInfer(request)
    assert response.outputs[0].datatype == "BYTES" and list(response.outputs[0].shape) == [2]
    raw = response.raw_output_contents[0]
    first = raw[4:4 + int.from_bytes(raw[:4], "little")].decode()
    assert re.fullmatch(r"0\.9\d+:0:0", first), first

    request = service_pb2.ModelInferRequest(model_name="OneHotEncoder")
    request.inputs.add(name="color", datatype="BYTES", shape=[1]).contents.bytes_contents.append(b"green")
    encoded = np.frombuffer(service.ModelInfer(request).raw_output_contents[0], dtype="<f8")
    assert encoded.tolist() == [0.0, 1.0, 0.0]


def test_int32_fp16_and_bytes_raw_contents(server, grpc_models):
    client = triton.InferenceServerClient(server.grpc_url)
    ids = triton.InferInput("inputIds", [1, 1], "INT32")
    ids.set_data_from_numpy(np.array([[5]], dtype=np.int32))
    mask = triton.InferInput("causalMask", [1, 1, 1, 1], "FP16")
    mask.set_data_from_numpy(np.zeros((1, 1, 1, 1), dtype=np.float16))
    logits = client.infer("LlamaDecoderInt8", [ids, mask]).as_numpy("logits")
    rest = json.loads(urllib.request.urlopen(urllib.request.Request(
        f"http://{server.url}/v2/models/LlamaDecoderInt8/infer", method="POST", data=json.dumps({"inputs": [
            {"name": "inputIds", "datatype": "INT32", "shape": [1, 1], "data": [5]},
            {"name": "causalMask", "datatype": "FP16", "shape": [1, 1, 1, 1], "data": [0]}]}).encode()), timeout=30).read())
    assert logits.dtype == np.float16 and list(logits.shape) == rest["outputs"][0]["shape"]
    np.testing.assert_allclose(logits.ravel().astype(np.float64), np.array(rest["outputs"][0]["data"], dtype=np.float64),
                               rtol=0, atol=1e-6)
    # INT32 as typed contents too.
    request = service_pb2.ModelInferRequest(model_name="LlamaDecoderInt8")
    request.inputs.add(name="inputIds", datatype="INT32", shape=[1, 1]).contents.int_contents.append(5)
    request.inputs.add(name="causalMask", datatype="FP16", shape=[1, 1, 1, 1])
    request.raw_input_contents.extend([np.array([5], dtype="<i4").tobytes(), np.zeros(1, dtype="<f2").tobytes()])
    code, message = status_of(lambda: stub(server).ModelInfer(request))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and message == "input 'inputIds' has both contents and raw_input_contents"
    color = triton.InferInput("color", [1], "BYTES")
    color.set_data_from_numpy(np.array([b"red"], dtype=np.object_))
    assert client.infer("OneHotEncoder", [color]).as_numpy("encoded").tolist() == [1.0, 0.0, 0.0]


def test_errors_map_to_grpc_status_codes(server):
    service = stub(server)

    def infer(model="MLProgram", version="", datatype="FP32", shape=(1, 16), raw=None, name="x"):
        request = service_pb2.ModelInferRequest(model_name=model, model_version=version)
        request.inputs.add(name=name, datatype=datatype, shape=list(shape))
        request.raw_input_contents.append(X.tobytes() if raw is None else raw)
        return lambda: service.ModelInfer(request)

    cases = [
        (infer(datatype="FP64", raw=X.astype(np.float64).tobytes()), grpc.StatusCode.INVALID_ARGUMENT,
         "input 'x': datatype FP64, the model takes FP32"),
        (infer(raw=X.tobytes()[:60]), grpc.StatusCode.INVALID_ARGUMENT,
         "input 'x': 60 bytes of raw contents, shape [1, 16] of FP32 needs 64"),
        (infer(datatype="FP33"), grpc.StatusCode.INVALID_ARGUMENT, None),
        (infer(name="y"), grpc.StatusCode.INVALID_ARGUMENT, "model 'MLProgram' has no input 'y' (its inputs: x)"),
        (infer(model="NoSuchModel"), grpc.StatusCode.NOT_FOUND, "unknown model 'NoSuchModel'"),
        (infer(version="2"), grpc.StatusCode.NOT_FOUND, "model 'MLProgram' has no version '2' (it has version '1')"),
        (lambda: service.ModelMetadata(service_pb2.ModelMetadataRequest(name="NoSuchModel")), grpc.StatusCode.NOT_FOUND,
         "unknown model 'NoSuchModel'"),
        (lambda: service.RepositoryIndex(service_pb2.RepositoryIndexRequest()), grpc.StatusCode.UNIMPLEMENTED, None),
        (lambda: service.ModelStatistics(service_pb2.ModelStatisticsRequest()), grpc.StatusCode.UNIMPLEMENTED, None),
    ]
    for call, code, message in cases:
        got_code, got_message = status_of(call)
        assert got_code == code, (got_code, got_message)
        assert message is None or got_message == message
        assert "\n" not in got_message
    # An unloaded model is not available until it is loaded again.
    urllib.request.urlopen(urllib.request.Request(f"http://{server.url}/v2/repository/models/MLProgram/unload", method="POST"),
                           timeout=30)
    assert status_of(infer())[0] == grpc.StatusCode.UNAVAILABLE
    urllib.request.urlopen(urllib.request.Request(f"http://{server.url}/v2/repository/models/MLProgram/load", method="POST"),
                           timeout=30)
    service.ModelInfer(service_pb2.ModelInferRequest(
        model_name="MLProgram", inputs=[dict(name="x", datatype="FP32", shape=[1, 16])], raw_input_contents=[X.tobytes()]))
    text = metrics(server)
    assert sample(text, "modelc_inference_requests_total", model="MLProgram", protocol="grpc") == 6
    assert sample(text, "nv_inference_request_failure", model="MLProgram", reason="REJECTED") == 5


def test_limits_give_resource_exhausted(model_dir, tmp_path):
    server = Server(model_dir, tmp_path, "--max-tensor", "32", "--queue", "1", "--threads", "1", "--max-batch", "2",
                    "--batch-delay", "3000")
    try:
        client = triton.InferenceServerClient(server.grpc_url)
        tensor = triton.InferInput("x", [1, 16], "FP32")
        tensor.set_data_from_numpy(X)
        with pytest.raises(InferenceServerException) as failure:
            client.infer("MLProgram", [tensor])
        assert failure.value.status() == "StatusCode.RESOURCE_EXHAUSTED"
        assert failure.value.message() == "input 'x': 16 FP32 elements are over the tensor limit of 32 bytes"
        # One request waits for its batch to fill; the queue (of one) is full for the next.
        iris = triton.InferInput("features", [4], "FP64")
        iris.set_data_from_numpy(np.array([5.1, 3.5, 1.4, 0.2]))
        client.is_model_ready("GLMClassifier")
        waiting = threading.Thread(target=lambda: triton.InferenceServerClient(server.grpc_url).infer("GLMClassifier", [iris]))
        waiting.start()
        wait_queued(server)
        with pytest.raises(InferenceServerException) as failure:
            client.infer("GLMClassifier", [iris])
        assert failure.value.status() == "StatusCode.RESOURCE_EXHAUSTED"
        assert failure.value.message() == "server busy: 1 requests queued; retry later"
        waiting.join(timeout=30)
    finally:
        assert server.stop() == 0, server.log_text()


def test_a_deadline_is_honoured_and_nothing_is_computed_for_it(model_dir, tmp_path):
    """The request waits for a batch to fill (5 s); its client's deadline (300 ms) ends it: the
    server answers DEADLINE_EXCEEDED then, counts a TIMEOUT, and never computes it."""
    server = Server(model_dir, tmp_path, "--max-batch", "2", "--batch-delay", "5000", "--threads", "1")
    try:
        client = triton.InferenceServerClient(server.grpc_url)
        assert client.is_model_ready("GLMClassifier")
        iris = triton.InferInput("features", [4], "FP64")
        iris.set_data_from_numpy(np.array([5.1, 3.5, 1.4, 0.2]))
        started = time.monotonic()
        with pytest.raises(InferenceServerException) as failure:
            client.infer("GLMClassifier", [iris], client_timeout=0.3)
        assert failure.value.status() == "StatusCode.DEADLINE_EXCEEDED"
        # The server's side: the failure is counted soon after the deadline, well before the 5 s batch delay.
        while sample(metrics(server), "nv_inference_request_failure", model="GLMClassifier", reason="TIMEOUT") < 1:
            assert time.monotonic() - started < 3, metrics(server)
            time.sleep(0.02)
        text = metrics(server)
        assert sample(text, "nv_inference_exec_count", model="GLMClassifier") == 0
        assert sample(text, "modelc_inference_queue_depth") == 0
        # A deadline that has already passed when the request arrives is refused at once.
        service = stub(server)
        request = service_pb2.ModelInferRequest(model_name="GLMClassifier")
        request.inputs.add(name="features", datatype="FP64", shape=[4]).contents.fp64_contents.extend([5.1, 3.5, 1.4, 0.2])
        code, _ = status_of(lambda: service.ModelInfer(request, timeout=0.000001))
        assert code == grpc.StatusCode.DEADLINE_EXCEEDED
    finally:
        assert server.stop() == 0, server.log_text()


def test_api_key_and_tls(model_dir, tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text("k3y-for-tests\n")
    certificate, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(certificate)], check=True, capture_output=True)
    server = Server(model_dir, tmp_path, "--api-key-file", str(key_file), "--tls-cert", str(certificate),
                    "--tls-key", str(key), ready=False)
    try:
        client = triton.InferenceServerClient(server.grpc_url, ssl=True, root_certificates=str(certificate))
        deadline = time.time() + 30
        while True:
            try:
                if client.is_server_live():
                    break
            except InferenceServerException:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        assert client.is_server_ready()
        with pytest.raises(InferenceServerException) as failure:
            client.get_server_metadata()
        assert failure.value.status() == "StatusCode.UNAUTHENTICATED"
        with pytest.raises(InferenceServerException) as failure:
            client.get_server_metadata(headers={"authorization": "Bearer wrong"})
        assert failure.value.status() == "StatusCode.UNAUTHENTICATED"
        headers = {"authorization": "Bearer k3y-for-tests"}
        assert client.get_server_metadata(headers=headers).name == "modelc"
        tensor = triton.InferInput("x", [1, 16], "FP32")
        tensor.set_data_from_numpy(X)
        assert client.infer("MLProgram", [tensor], headers=headers).as_numpy("probs").shape == (1, 4)
        # Plaintext is refused on the TLS port.
        plain = triton.InferenceServerClient(server.grpc_url)
        with pytest.raises(InferenceServerException) as failure:
            plain.is_server_live(client_timeout=5)
        assert failure.value.status() == "StatusCode.UNAVAILABLE"
    finally:
        assert server.stop() == 0, server.log_text()


def test_grpc_port_in_use_or_off(model_dir, tmp_path):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    env = {"MODELC_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([MODELC, "serve", str(model_dir), "--port", "0", "--grpc-port", str(port)], capture_output=True,
                            text=True, env=env, timeout=30)
    busy.close()
    assert result.returncode == 112, result.stderr
    assert result.stderr == (f"modelc: error: cannot serve gRPC on 127.0.0.1:{port}: Address already in use "
                             "(--grpc-port 0 turns gRPC off)\n")
    result = subprocess.run([MODELC, "serve", str(model_dir), "--port", "0", "--grpc-port", "1"], capture_output=True,
                            text=True, env=dict(env, MODELC_GRPC_LIBRARY="/nonexistent/libModelcGRPC.so"), timeout=30)
    assert result.returncode == 112 and result.stderr.count("\n") == 1 and "libModelcGRPC.so" in result.stderr
    server = Server(model_dir, tmp_path, "--grpc-port", "0", env={"MODELC_GRPC_LIBRARY": "/nonexistent/libModelcGRPC.so"})
    try:
        assert "grpc=" not in server.log_text()
        assert "libgrpc" not in open(f"/proc/{server.process.pid}/maps").read()
    finally:
        assert server.stop() == 0, server.log_text()


def test_sigterm_refuses_new_calls_and_answers_those_under_way(model_dir, tmp_path):
    server = Server(model_dir, tmp_path, "--max-batch", "2", "--batch-delay", "1500", "--threads", "1", "--timeout", "10000")
    try:
        client = triton.InferenceServerClient(server.grpc_url)
        assert client.is_model_ready("GLMClassifier")
        iris = triton.InferInput("features", [4], "FP64")
        iris.set_data_from_numpy(np.array([5.1, 3.5, 1.4, 0.2]))
        answers = []
        waiting = threading.Thread(target=lambda: answers.append(
            triton.InferenceServerClient(server.grpc_url).infer("GLMClassifier", [iris]).as_numpy("species")))
        waiting.start()
        wait_queued(server)
        server.process.send_signal(15)
        time.sleep(0.3)
        code, _ = status_of(lambda: stub(server).ServerReady(service_pb2.ServerReadyRequest(), timeout=5))
        assert code == grpc.StatusCode.UNAVAILABLE
        waiting.join(timeout=30)
        assert len(answers) == 1 and answers[0].tolist() == [0]
    finally:
        assert server.stop() == 0, server.log_text()


def test_a_deadline_or_a_cancel_mid_computation_frees_the_worker(model_dir, tmp_path):
    """With each computation taking 20 s (MODELC_SERVE_COMPUTE_DELAY_MS), a call whose deadline passes
    while it computes, and one its client cancels, each stop at the next operation boundary: the
    worker is free again within a second or two, counted TIMEOUT and CANCELED."""
    server = Server(model_dir, tmp_path, "--threads", "1", env={"MODELC_SERVE_COMPUTE_DELAY_MS": "20000"})
    try:
        service = stub(server)
        assert service.ModelReady(service_pb2.ModelReadyRequest(name="GLMClassifier")).ready
        request = service_pb2.ModelInferRequest(model_name="GLMClassifier")
        request.inputs.add(name="features", datatype="FP64", shape=[4]).contents.fp64_contents.extend([5.1, 3.5, 1.4, 0.2])

        def in_flight():
            return sample(metrics(server), "modelc_inference_in_flight")

        started = time.monotonic()
        code, message = status_of(lambda: service.ModelInfer(request, timeout=1.0))
        assert code == grpc.StatusCode.DEADLINE_EXCEEDED
        while in_flight() != 0:
            assert time.monotonic() - started < 3, "the worker stayed busy after the deadline (the computation takes 20 s)"
            time.sleep(0.02)
        freed_after_deadline = time.monotonic() - started
        call = service.ModelInfer.future(request)
        while in_flight() != 1:
            assert time.monotonic() - started < 10
            time.sleep(0.02)
        cancelled = time.monotonic()
        call.cancel()
        while in_flight() != 0:
            assert time.monotonic() - cancelled < 2, "the worker stayed busy after the client cancelled"
            time.sleep(0.02)
        freed_after_cancel = time.monotonic() - cancelled
        # Each is counted once its handler has answered, which may be just after its worker is free.
        for reason in ("TIMEOUT", "CANCELED"):
            while sample(metrics(server), "nv_inference_request_failure", model="GLMClassifier", reason=reason) < 1:
                assert time.monotonic() - cancelled < 5, [l for l in metrics(server).splitlines() if "failure{" in l or "requests_total{" in l]
                time.sleep(0.02)
        assert sample(metrics(server), "modelc_inference_computations_canceled_total") == 2
    finally:
        assert server.stop() == 0, server.log_text()
    print(f"worker free {freed_after_deadline * 1000:.0f} ms after a 1 s deadline, {freed_after_cancel * 1000:.0f} ms after a cancel")
