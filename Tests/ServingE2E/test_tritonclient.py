"""`modelc serve` through Triton's own HTTP client (tritonclient[http] from PyPI)."""
import json
import subprocess

import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from conftest import FIXTURES, Server, modelc_predict

IRIS = np.array([6.7, 3.0, 5.2, 2.3])


def test_health_and_metadata(server):
    client = triton.InferenceServerClient(server.url)
    assert client.is_server_live() and client.is_server_ready()
    metadata = client.get_server_metadata()
    assert metadata["name"] == "modelc"
    assert {"binary_tensor_data", "classification", "model_repository"} <= set(metadata["extensions"])
    model = client.get_model_metadata("MLProgram")
    assert model["versions"] == ["1"] and model["platform"] == "coreml"
    assert model["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [1, 16]}]
    assert model["outputs"] == [{"name": "probs", "datatype": "FP32", "shape": [1, 4]}]
    assert client.is_model_ready("MLProgram") and client.is_model_ready("MLProgram", "1")
    assert not client.is_model_ready("MLProgram", "2")
    assert not client.is_model_ready("NoSuchModel")


@pytest.mark.parametrize("binary", [False, True])
def test_infer_json_and_binary_tensors_match_modelc_predict(server, binary):
    client = triton.InferenceServerClient(server.url)
    x = (np.arange(16, dtype=np.float32).reshape(1, 16) - 7.5) / 4
    tensor = triton.InferInput("x", [1, 16], "FP32")
    tensor.set_data_from_numpy(x, binary_data=binary)
    result = client.infer("MLProgram", [tensor], outputs=[triton.InferRequestedOutput("probs", binary_data=binary)])
    probs = result.as_numpy("probs")
    assert probs.dtype == np.float32 and probs.shape == (1, 4)
    expected = modelc_predict(FIXTURES / "Models" / "MLProgram.mlpackage", json.dumps({"x": x.tolist()}))
    np.testing.assert_allclose(probs, np.array(expected["outputs"]["probs"], dtype=np.float32), rtol=0, atol=1e-6)
    assert abs(float(probs.sum()) - 1) < 1e-5


def test_classification_gives_top_k_score_index_label(server):
    client = triton.InferenceServerClient(server.url)
    features = triton.InferInput("features", [4], "FP64")
    features.set_data_from_numpy(IRIS, binary_data=True)
    classified = client.infer("GLMClassifier", [features], outputs=[
        triton.InferRequestedOutput("classProbability", binary_data=False, class_count=3)])
    top = [entry.split(":") for entry in classified.get_response()["outputs"][0]["data"]]
    result = client.infer("GLMClassifier", [features], outputs=[
        triton.InferRequestedOutput("classProbability", binary_data=True), triton.InferRequestedOutput("species", binary_data=True)])
    scores = result.as_numpy("classProbability")
    assert len(top) == 3 and scores.dtype == np.float64 and scores.shape == (3,)
    # Highest first; each score is the probability at its index; the label of the first is the model's answer.
    ranked = sorted(range(3), key=lambda index: -scores[index])
    assert [int(index) for _, index, _ in top] == ranked
    for score, index, _ in top:
        assert abs(float(score) - scores[int(index)]) < 1e-6
    assert int(top[0][2]) == int(result.as_numpy("species")[0])
    expected = modelc_predict(FIXTURES / "Models" / "GLMClassifier.mlmodel", json.dumps({"features": IRIS.tolist()}))
    assert int(result.as_numpy("species")[0]) == expected["outputs"]["species"]


def test_encoded_image_as_bytes_to_an_image_input(server):
    client = triton.InferenceServerClient(server.url)
    png = (FIXTURES / "Images" / "top-red-bottom-blue.png").read_bytes()
    image = triton.InferInput("image", [1], "BYTES")
    image.set_data_from_numpy(np.array([png], dtype=np.object_), binary_data=True)
    result = client.infer("ImageClassifier", [image], outputs=[
        triton.InferRequestedOutput("classLabelProbs", binary_data=True, class_count=2),
        triton.InferRequestedOutput("classLabel", binary_data=True)])
    top = [entry.decode().split(":") for entry in result.as_numpy("classLabelProbs")]
    assert len(top) == 2 and float(top[0][0]) >= float(top[1][0])
    assert top[0][2] == result.as_numpy("classLabel")[0].decode()
    cli = subprocess.run([str(server.process.args[0]), "classify", str(FIXTURES / "Models" / "ImageClassifier.mlmodel"),
                          str(FIXTURES / "Images" / "top-red-bottom-blue.png"), "--json"], capture_output=True, text=True)
    assert top[0][2] in cli.stdout


def test_repository_extension(server):
    client = triton.InferenceServerClient(server.url)
    names = {entry["name"] for entry in client.get_model_repository_index()}
    assert {"MLProgram", "GLMClassifier", "TreeEnsembleClassifier", "ImageClassifier"} <= names
    client.load_model("KNNClassifier")
    assert client.is_model_ready("KNNClassifier")
    ready = {entry["name"]: entry["state"] for entry in client.get_model_repository_index() if entry["state"] == "READY"}
    assert ready.get("KNNClassifier") == "READY"
    client.unload_model("KNNClassifier")
    assert not client.is_model_ready("KNNClassifier")
    with pytest.raises(InferenceServerException) as failure:
        client.load_model("NoSuchModel")
    assert "unknown model" in str(failure.value)


def test_errors_reach_the_client_as_messages(server):
    client = triton.InferenceServerClient(server.url)
    wrong = triton.InferInput("x", [1, 16], "FP64")
    wrong.set_data_from_numpy(np.zeros((1, 16)), binary_data=True)
    with pytest.raises(InferenceServerException) as failure:
        client.infer("MLProgram", [wrong])
    assert failure.value.status() == "400" and "datatype FP64, the model takes FP32" in failure.value.message()
    with pytest.raises(InferenceServerException) as failure:
        client.infer("NoSuchModel", [wrong])
    assert failure.value.status() == "404"


def test_api_key_and_tls(model_dir, tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text("k3y-for-tests\n")
    certificate, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-keyout", str(key), "-out", str(certificate)], check=True, capture_output=True)
    server = Server(model_dir, tmp_path, "--api-key-file", str(key_file), "--tls-cert", str(certificate),
                    "--tls-key", str(key), ready=False)
    try:
        import ssl
        import time
        deadline = time.time() + 30
        client = triton.InferenceServerClient(server.url, ssl=True, insecure=True,
                                              ssl_context_factory=lambda: ssl._create_unverified_context())
        while True:
            try:
                if client.is_server_live():
                    break
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        with pytest.raises(InferenceServerException) as failure:
            client.get_server_metadata()
        assert failure.value.status() == "401"
        headers = {"Authorization": "Bearer k3y-for-tests"}
        assert client.get_server_metadata(headers=headers)["name"] == "modelc"
        features = triton.InferInput("features", [4], "FP64")
        features.set_data_from_numpy(IRIS, binary_data=True)
        result = client.infer("TreeEnsembleClassifier", [features], headers=headers)
        assert result.as_numpy("color")[0] in (b"red", b"green", b"blue")
    finally:
        assert server.stop() == 0, server.log_text()
