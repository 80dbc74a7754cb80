"""Triton's sequence extension on a stateful model, through tritonclient[http] (which sends
sequence_id, sequence_start and sequence_end as request parameters) and raw HTTP for the faults.

StatefulProgram (Fixtures/generate.py) is a decaying accumulator: total = state x decay + x in
float16, state <- total, y = total / 2. The reference is the same recurrence in NumPy with the
model's own decay (read from its weight file), and, exactly, the same inputs run as one sequence
by a single client."""
import json
import re
import struct
import threading
import time

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conftest import FIXTURES, Server

STATEFUL = "StatefulProgram"
STATELESS = "MLProgram"


@pytest.fixture
def sequence_dir(tmp_path):
    import shutil
    directory = tmp_path / "models"
    directory.mkdir()
    for name in (STATEFUL + ".mlpackage", STATELESS + ".mlpackage"):
        shutil.copytree(FIXTURES / "Models" / name, directory / name)
    return directory


def decay():
    """The model's 16 float16 decays: the first blob of its weight file (metadata at byte 64)."""
    blob = (FIXTURES / "Models" / (STATEFUL + ".mlpackage") / "Data" / "com.apple.CoreML" / "weights" / "weight.bin").read_bytes()
    sentinel, _, size, offset = struct.unpack_from("<IIQQ", blob, 64)
    assert sentinel == 0xDEADBEEF and size == 32
    return np.frombuffer(blob[offset:offset + size], dtype=np.float16).reshape(1, 16)


def reference(xs):
    """y after each x, the recurrence in float16 as the program states it."""
    state = np.zeros((1, 16), np.float16)
    ys = []
    for x in xs:
        state = (state * decay()).astype(np.float16) + x.astype(np.float16)
        ys.append((state * np.float16(0.5)).astype(np.float32))
    return ys


def inputs(rng, count):
    return [rng.uniform(-1, 1, (1, 16)).astype(np.float32) for _ in range(count)]


def infer(client, x, **sequence):
    tensor = httpclient.InferInput("x", [1, 16], "FP32")
    tensor.set_data_from_numpy(x)
    return client.infer(STATEFUL, [tensor], **sequence).as_numpy("y")


def run_sequence(client, sequence_id, xs, end=True):
    return [infer(client, x, sequence_id=sequence_id, sequence_start=index == 0, sequence_end=end and index == len(xs) - 1)
            for index, x in enumerate(xs)]


def in_threads(target, arguments):
    """Calls target(argument) for each argument at once, a thread each; returns when all have."""
    threads = [threading.Thread(target=target, args=(argument,)) for argument in arguments]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)


def post(server, model, parameters, x=None):
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16],
                        "data": (np.ones((1, 16), np.float32) if x is None else x).ravel().tolist()}]}
    if parameters is not None:
        body["parameters"] = parameters
    status, answer = server.request("POST", f"/v2/models/{model}/infer", body)
    return status, json.loads(answer)


def metric(server, pattern):
    _, body = server.request("GET", "/metrics")
    found = re.search(pattern, body.decode(), re.M)
    return int(found.group(1)) if found else None


def labels(name, extra=""):
    return name + r'\{model="' + STATEFUL + r'",version="1"' + extra + r"\} (\d+)$"


def test_a_sequence_accumulates_as_the_model_does_and_ends(sequence_dir, tmp_path):
    server = Server(sequence_dir, tmp_path)
    try:
        client = httpclient.InferenceServerClient(server.url)
        assert "sequence" in client.get_server_metadata()["extensions"]
        xs = inputs(np.random.default_rng(1), 8)
        got = run_sequence(client, 42, xs)
        for step, (y, expected) in enumerate(zip(got, reference(xs))):
            np.testing.assert_allclose(y, expected, rtol=0, atol=2e-3, err_msg=f"step {step}")
        # The same inputs as another sequence (a string id) give the same answers, exactly.
        again = run_sequence(client, "session-42", xs)
        for y, other in zip(got, again):
            np.testing.assert_array_equal(y, other)
        # Ended: the id is no longer live.
        with pytest.raises(InferenceServerException) as refused:
            infer(client, xs[0], sequence_id=42)
        assert refused.value.status() == "400"
        assert "sequence 42 of model 'StatefulProgram' is not live: it ended (sequence_end)" in refused.value.message()
        assert metric(server, labels("modelc_sequences_started_total")) == 2
        assert metric(server, labels("modelc_sequences_ended_total", ',reason="sequence_end"')) == 2
        assert metric(server, labels("modelc_sequences_live")) == 0
        assert metric(server, labels("modelc_sequence_state_bytes")) == 0
    finally:
        assert server.stop() == 0, server.log_text()


def test_without_a_sequence_id_each_request_starts_from_a_fresh_state(sequence_dir, tmp_path):
    server = Server(sequence_dir, tmp_path)
    try:
        client = httpclient.InferenceServerClient(server.url)
        ones = np.ones((1, 16), np.float32)
        for _ in range(3):
            np.testing.assert_array_equal(infer(client, ones), np.full((1, 16), 0.5, np.float32))
        assert metric(server, labels("modelc_sequences_live")) is None
    finally:
        assert server.stop() == 0, server.log_text()


def test_interleaved_sequences_never_mix(sequence_dir, tmp_path):
    server = Server(sequence_dir, tmp_path, "--threads", "2")
    try:
        rng = np.random.default_rng(2)
        ids = [11, 12, "s-13", 2**53 - 1]
        streams = {sequence_id: inputs(rng, 6) for sequence_id in ids}
        single = httpclient.InferenceServerClient(server.url)
        alone = {sequence_id: run_sequence(single, f"alone-{sequence_id}", xs) for sequence_id, xs in streams.items()}
        # Round-robin from one client, then all at once from a thread each.
        client = httpclient.InferenceServerClient(server.url)
        got = {sequence_id: [] for sequence_id in ids}
        for step in range(6):
            for sequence_id in ids:
                got[sequence_id].append(infer(client, streams[sequence_id][step], sequence_id=sequence_id,
                                              sequence_start=step == 0, sequence_end=step == 5))
        concurrent = {}

        def one(sequence_id):
            concurrent[sequence_id] = run_sequence(httpclient.InferenceServerClient(server.url), sequence_id, streams[sequence_id])
        in_threads(one, ids)
        for sequence_id in ids:
            for step in range(6):
                np.testing.assert_array_equal(got[sequence_id][step], alone[sequence_id][step], err_msg=f"{sequence_id} step {step}")
                np.testing.assert_array_equal(concurrent[sequence_id][step], alone[sequence_id][step], err_msg=f"{sequence_id} step {step}")
        assert metric(server, labels("modelc_sequences_live")) == 0
    finally:
        assert server.stop() == 0, server.log_text()


def test_concurrent_requests_of_one_sequence_take_turns(sequence_dir, tmp_path):
    server = Server(sequence_dir, tmp_path, "--threads", "2")
    try:
        client = httpclient.InferenceServerClient(server.url)
        ones = np.ones((1, 16), np.float32)
        infer(client, ones, sequence_id=5, sequence_start=True)
        answers = []

        in_threads(lambda _: answers.append(infer(httpclient.InferenceServerClient(server.url), ones, sequence_id=5)), range(8))
        expected = run_sequence(client, "alone", [ones] * 9)[1:]
        # Each request saw the one before it: together they are steps 2 to 9 of the sequence, in some order.
        assert sorted(float(y[0, 0]) for y in answers) == sorted(float(y[0, 0]) for y in expected)
    finally:
        assert server.stop() == 0, server.log_text()


def test_an_idle_sequence_is_evicted_and_then_named(sequence_dir, tmp_path):
    server = Server(sequence_dir, tmp_path, "--sequence-idle-timeout", "0.5")
    try:
        client = httpclient.InferenceServerClient(server.url)
        ones = np.ones((1, 16), np.float32)
        infer(client, ones, sequence_id=9, sequence_start=True)
        infer(client, ones, sequence_id=10, sequence_start=True)
        infer(client, ones, sequence_id=9)
        assert metric(server, labels("modelc_sequences_live")) == 2
        deadline = time.monotonic() + 10
        while metric(server, labels("modelc_sequences_live")) != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert metric(server, labels("modelc_sequences_live")) == 0
        assert metric(server, labels("modelc_sequences_evicted_total")) == 2
        with pytest.raises(InferenceServerException) as refused:
            infer(client, ones, sequence_id=9)
        assert refused.value.status() == "400"
        assert refused.value.message() == ("sequence 9 of model 'StatefulProgram' is not live: it was evicted after 0.5 s idle "
                                           "(--sequence-idle-timeout); start it with sequence_start")
        # Started again, from a fresh state.
        np.testing.assert_array_equal(infer(client, ones, sequence_id=9, sequence_start=True), np.full((1, 16), 0.5, np.float32))
        assert "sequence evicted" in server.log_text()
    finally:
        assert server.stop() == 0, server.log_text()


def test_start_on_a_live_id_restarts_it(sequence_dir, tmp_path):
    server = Server(sequence_dir, tmp_path)
    try:
        client = httpclient.InferenceServerClient(server.url)
        ones = np.ones((1, 16), np.float32)
        infer(client, ones, sequence_id=3, sequence_start=True)
        infer(client, ones, sequence_id=3)
        np.testing.assert_array_equal(infer(client, ones, sequence_id=3, sequence_start=True), np.full((1, 16), 0.5, np.float32))
        assert metric(server, labels("modelc_sequences_ended_total", ',reason="restarted"')) == 1
        assert metric(server, labels("modelc_sequences_live")) == 1
    finally:
        assert server.stop() == 0, server.log_text()


@pytest.mark.parametrize("parameters, status, message", [
    ({"sequence_id": -1}, 400, "'parameters.sequence_id' must be a whole number from 0 or a string, not -1"),
    ({"sequence_id": 1.5}, 400, "'parameters.sequence_id' must be a whole number from 0 or a string, not 1.5"),
    ({"sequence_id": True}, 400, "'parameters.sequence_id' must be a whole number from 0 or a string, not true"),
    ({"sequence_id": 2**60}, 400, "'parameters.sequence_id' 1152921504606846976 is not below 2^53, where JSON numbers stop holding every whole number: send it as a string"),
    ({"sequence_id": 1, "sequence_start": "yes"}, 400, "'parameters.sequence_start' must be true or false, not \"yes\""),
    ({"sequence_id": 1, "sequence_end": 1}, 400, "'parameters.sequence_end' must be true or false, not 1"),
    ({"sequence_start": True}, 400, "'parameters.sequence_start' is true but the request has no 'sequence_id' (or 0 or \"\", which are no sequence)"),
    ({"sequence_id": 77}, 400, "sequence 77 of model 'StatefulProgram' is not live: it was never started (the first request of a sequence sets sequence_start); start it with sequence_start"),
    ({"sequence_id": "x" * 257}, 400, "'parameters.sequence_id' is 257 bytes long; at most 256"),
])
def test_faulty_sequence_parameters_are_refused(sequence_dir, tmp_path, parameters, status, message):
    server = Server(sequence_dir, tmp_path)
    try:
        got, answer = post(server, STATEFUL, parameters)
        assert (got, answer) == (status, {"error": message})
        assert metric(server, labels("nv_inference_request_failure", ',reason="REJECTED"')) == 1
    finally:
        assert server.stop() == 0, server.log_text()


def test_sequence_parameters_on_a_stateless_model_are_refused_but_neutral_ones_pass(sequence_dir, tmp_path):
    server = Server(sequence_dir, tmp_path)
    try:
        for parameters, name in [({"sequence_id": 4}, "sequence_id"), ({"sequence_id": "a", "sequence_start": True}, "sequence_id")]:
            status, answer = post(server, STATELESS, parameters)
            assert status == 400
            assert answer["error"] == (f"model 'MLProgram' has no state: 'parameters.{name}' is only for stateful models "
                                       "(ML programs that declare states)")
        # Triton's "no sequence": id 0 or "", flags false.
        for parameters in [{"sequence_id": 0, "sequence_start": False, "sequence_end": False}, {"sequence_id": ""}]:
            assert post(server, STATELESS, parameters)[0] == 200
        # A bad type is refused whatever the model.
        assert post(server, STATELESS, {"sequence_end": "no"})[0] == 400
    finally:
        assert server.stop() == 0, server.log_text()


def test_the_sequence_limit_answers_429(sequence_dir, tmp_path):
    server = Server(sequence_dir, tmp_path, "--max-sequences", "2")
    try:
        assert post(server, STATEFUL, {"sequence_id": 1, "sequence_start": True})[0] == 200
        assert post(server, STATEFUL, {"sequence_id": 2, "sequence_start": True})[0] == 200
        status, answer = post(server, STATEFUL, {"sequence_id": 3, "sequence_start": True})
        assert (status, answer) == (429, {"error": "too many live sequences (--max-sequences 2): end one with sequence_end, "
                                                   "or retry once idle ones are evicted"})
        assert post(server, STATEFUL, {"sequence_id": 1, "sequence_end": True})[0] == 200
        assert post(server, STATEFUL, {"sequence_id": 3, "sequence_start": True})[0] == 200
        assert metric(server, labels("nv_inference_request_failure", ',reason="CANCELED"')) == 1
    finally:
        assert server.stop() == 0, server.log_text()


def test_a_state_over_the_memory_budget_answers_503(sequence_dir, tmp_path):
    # The model alone is over a 1 KiB budget: it is kept while in use, but no state fits beside it.
    server = Server(sequence_dir, tmp_path, "--memory-budget", "1K")
    try:
        status, answer = post(server, STATEFUL, {"sequence_id": 1, "sequence_start": True})
        assert status == 503
        assert answer["error"] == ("a new sequence's state (32 bytes) does not fit the memory budget beside the models in use "
                                   "and the live sequences; retry later")
        assert post(server, STATEFUL, None)[0] == 200, "a request without a sequence still runs"
    finally:
        assert server.stop() == 0, server.log_text()


def test_unloading_the_model_ends_its_sequences(sequence_dir, tmp_path):
    server = Server(sequence_dir, tmp_path)
    try:
        assert post(server, STATEFUL, {"sequence_id": 8, "sequence_start": True})[0] == 200
        assert server.request("POST", f"/v2/repository/models/{STATEFUL}/unload")[0] == 200
        assert server.request("POST", f"/v2/repository/models/{STATEFUL}/load")[0] == 200
        status, answer = post(server, STATEFUL, {"sequence_id": 8})
        assert status == 400 and "its model was unloaded" in answer["error"]
        assert metric(server, labels("modelc_sequences_ended_total", ',reason="unloaded"')) == 1
    finally:
        assert server.stop() == 0, server.log_text()


def test_the_drain_frees_every_state(sequence_dir, tmp_path):
    server = Server(sequence_dir, tmp_path)
    for sequence_id in range(1, 4):
        assert post(server, STATEFUL, {"sequence_id": sequence_id, "sequence_start": True})[0] == 200
    assert server.stop() == 0, server.log_text()
    assert re.search(r"sequences ended.*live=3|sequences ended.*\"live\":\"3\"", server.log_text()), server.log_text()


def grpc_infer(client, x, **sequence):
    import tritonclient.grpc as triton
    tensor = triton.InferInput("x", [1, 16], "FP32")
    tensor.set_data_from_numpy(x)
    return client.infer(STATEFUL, [tensor], **sequence).as_numpy("y")


def test_sequences_over_grpc_share_the_states_with_rest(sequence_dir, tmp_path):
    import grpc
    import tritonclient.grpc as triton
    from tritonclient.grpc import service_pb2, service_pb2_grpc
    server = Server(sequence_dir, tmp_path, "--max-sequences", "2")
    try:
        rest = httpclient.InferenceServerClient(server.url)
        client = triton.InferenceServerClient(server.grpc_url)
        xs = inputs(np.random.default_rng(3), 6)
        alone = run_sequence(rest, "alone", xs, end=False)
        # One sequence, its requests alternating between the two protocols (a uint64 id over gRPC, a string one).
        for sequence_id in (21, "grpc-21"):
            for step, x in enumerate(xs):
                send = grpc_infer if step % 2 == 0 else infer
                y = send(client if step % 2 == 0 else rest, x, sequence_id=sequence_id, sequence_start=step == 0,
                         sequence_end=step == len(xs) - 1)
                np.testing.assert_array_equal(y, alone[step], err_msg=f"{sequence_id} step {step}")
        with pytest.raises(InferenceServerException) as refused:
            grpc_infer(client, xs[0], sequence_id=21)
        assert refused.value.status() == "StatusCode.INVALID_ARGUMENT"
        assert "sequence 21 of model 'StatefulProgram' is not live: it ended (sequence_end)" in refused.value.message()
        grpc_infer(client, xs[0], sequence_id=22, sequence_start=True)
        with pytest.raises(InferenceServerException) as full:
            grpc_infer(client, xs[0], sequence_id=23, sequence_start=True)
        assert full.value.status() == "StatusCode.RESOURCE_EXHAUSTED" and "--max-sequences 2" in full.value.message()
        # A double is no id; the protocol's own message, sent as it is.
        request = service_pb2.ModelInferRequest(model_name=STATEFUL)
        request.parameters["sequence_id"].double_param = 4.0
        tensor = request.inputs.add(name="x", datatype="FP32", shape=[1, 16])
        tensor.contents.fp32_contents.extend([1.0] * 16)
        with pytest.raises(grpc.RpcError) as wrong:
            service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_url)).ModelInfer(request)
        assert wrong.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert wrong.value.details() == "'parameters.sequence_id' must be a whole number from 0 or a string, not 4.0"
    finally:
        assert server.stop() == 0, server.log_text()
