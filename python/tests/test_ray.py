"""modelc.ray on a real local Ray cluster (make ray-test): a head and a worker
node started with `ray start` on 127.0.0.1, one CPU each, two actors
classifying a directory of images; the results equal one process's."""

import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")

import modelc
import modelc.ray
from conftest import FIXTURES, REPO

MODEL = FIXTURES / "Models" / "ImageClassifier.mlmodel"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_images(directory, count=24):
    from PIL import Image
    rng = np.random.default_rng(21)
    for index in range(count):
        pixels = rng.integers(0, 256, size=(20 + index % 7, 24 + index % 5, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(directory / ("image-%02d.png" % index))


@pytest.fixture
def cluster(tmp_path):
    """A head and one worker node, each a `ray start --block` process group of ours, stopped by its id."""
    port = free_port()
    ray_bin = pathlib.Path(sys.executable).parent / "ray"
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "python"), str(REPO / "python" / "tests"), env.get("PYTHONPATH", "")])
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env["OMP_NUM_THREADS"] = "1"
    common = ["--num-cpus=1", "--block", "--disable-usage-stats"]
    processes = [subprocess.Popen([str(ray_bin), "start", "--head", "--node-ip-address=127.0.0.1", "--port=%d" % port,
                                   "--include-dashboard=false", "--temp-dir=%s" % temp] + common,
                                  env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.time() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError("the Ray head did not start")
                time.sleep(0.5)
        processes.append(subprocess.Popen([str(ray_bin), "start", "--address=127.0.0.1:%d" % port,
                                           "--node-ip-address=127.0.0.1"] + common,
                                          env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        ray.init(address="127.0.0.1:%d" % port, log_to_driver=False)
        deadline = time.time() + 60
        while len([n for n in ray.nodes() if n["Alive"]]) < 2:
            if time.time() > deadline:
                raise RuntimeError("the Ray worker node did not join")
            time.sleep(0.5)
        yield
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for process in reversed(processes):
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for process in reversed(processes):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def test_two_actors_classify_a_directory_like_one_process(tmp_path, cluster):
    images = tmp_path / "images"
    images.mkdir()
    write_images(images)
    files = sorted(images.iterdir())

    with modelc.Model(MODEL) as model:
        single = model.predict([{"image": path.read_bytes()} for path in files])
        labels = model.class_labels

    dataset = ray.data.read_binary_files(str(images), include_paths=True)
    predicted = dataset.map_batches(modelc.ray.Predictor, fn_constructor_kwargs={"path": str(MODEL), "tag_process": True},
                                    concurrency=2, batch_size=4, num_cpus=1, batch_format="numpy")
    rows = sorted(predicted.take_all(), key=lambda row: row["path"])

    assert [pathlib.Path(row["path"]).name for row in rows] == [path.name for path in files]
    for row, want in zip(rows, single):
        assert row["classLabel"] == want["classLabel"]
        np.testing.assert_array_equal(row["classLabelProbs"], [want["classLabelProbs"][label] for label in labels])
    assert len({int(row["process"]) for row in rows}) == 2


def test_numeric_batches_go_through_predict_batch():
    predictor = modelc.ray.Predictor(str(FIXTURES / "Models" / "GLMClassifier.mlmodel"))
    batch = {"features": np.random.default_rng(1).normal(size=(10, 4)), "id": np.arange(10)}
    out = predictor(batch)
    assert list(out["id"]) == list(range(10))
    with modelc.Model(FIXTURES / "Models" / "GLMClassifier.mlmodel") as model:
        assert [int(v) for v in out["species"]] == [model.predict({"features": row})["species"] for row in batch["features"]]
