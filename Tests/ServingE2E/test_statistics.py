"""Triton's statistics extension on the real server, read with tritonclient's get_inference_statistics."""
import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from conftest import Server

IRIS = np.array([6.7, 3.0, 5.2, 2.3])


def features(values, binary=True):
    tensor = triton.InferInput("features", [len(values)], "FP64")
    tensor.set_data_from_numpy(np.asarray(values, dtype=np.float64), binary_data=binary)
    return tensor


def durations(stat):
    return {name: (value["count"], value["ns"]) for name, value in stat["inference_stats"].items()}


def test_counts_and_durations_match_the_requests_sent(server):
    client = triton.InferenceServerClient(server.url)
    for index in range(6):
        client.infer("GLMClassifier", [features(IRIS, binary=index % 2 == 0)])
    for _ in range(2):
        with pytest.raises(InferenceServerException):
            client.infer("GLMClassifier", [features([1.0, 2.0, 3.0])])
    for version in ("", "1"):
        answer = client.get_inference_statistics("GLMClassifier", version)
        assert len(answer["model_stats"]) == 1
        stat = answer["model_stats"][0]
        assert stat["name"] == "GLMClassifier" and stat["version"] == "1"
        assert stat["inference_count"] == 6
        # The two wrong shapes are refused by the model, so they were computed too.
        assert stat["execution_count"] == 8
        assert stat["last_inference"] > 1.6e12  # milliseconds since 1970
        stats = durations(stat)
        assert set(stats) == {"success", "fail", "queue", "compute_input", "compute_infer", "compute_output", "cache_hit", "cache_miss"}
        assert stats["success"][0] == 6 and stats["fail"][0] == 2
        for stage in ("queue", "compute_input", "compute_infer", "compute_output"):
            assert stats[stage][0] == 6 and stats[stage][1] > 0, stage
        assert stats["success"][1] >= sum(stats[stage][1] for stage in ("queue", "compute_input", "compute_infer", "compute_output"))
        assert stats["fail"][1] > 0
        assert stats["cache_hit"] == (0, 0) and stats["cache_miss"] == (0, 0)
        assert [batch["batch_size"] for batch in stat["batch_stats"]] == [1]
        batch = stat["batch_stats"][0]
        assert batch["compute_infer"]["count"] == 8 and batch["compute_infer"]["ns"] > 0
    everything = client.get_inference_statistics()
    names = [entry["name"] for entry in everything["model_stats"]]
    assert names == sorted(names) and "GLMClassifier" in names and "MLProgram" in names
    untouched = next(entry for entry in everything["model_stats"] if entry["name"] == "MLProgram")
    assert untouched["inference_count"] == 0 and untouched["batch_stats"] == []
    assert "statistics" in client.get_server_metadata()["extensions"]


def test_unknown_models_and_versions_are_refused(server):
    client = triton.InferenceServerClient(server.url)
    with pytest.raises(InferenceServerException, match="unknown model 'NoSuchModel'"):
        client.get_inference_statistics("NoSuchModel")
    with pytest.raises(InferenceServerException, match="has no version '2'"):
        client.get_inference_statistics("GLMClassifier", "2")
    status, _ = server.request("GET", "/v2/models/NoSuchModel/stats")
    assert status == 404


def test_batches_are_counted_by_size(model_dir, tmp_path):
    server = Server(model_dir, tmp_path, "--threads", "1", "--max-batch", "4", "--batch-delay", "300")
    try:
        client = triton.InferenceServerClient(server.url, concurrency=8)
        client.infer("GLMClassifier", [features(IRIS)])
        pending = [client.async_infer("GLMClassifier", [features(IRIS)]) for _ in range(8)]
        for request in pending:
            request.get_result()
        stat = client.get_inference_statistics("GLMClassifier")["model_stats"][0]
        assert stat["inference_count"] == 9
        sizes = {batch["batch_size"]: batch["compute_infer"]["count"] for batch in stat["batch_stats"]}
        assert sum(size * count for size, count in sizes.items()) == 9
        assert sum(sizes.values()) == stat["execution_count"] < 9
        assert max(sizes) > 1
    finally:
        assert server.stop() == 0, server.log_text()
