"""`modelc serve` through KServe's own REST client (kserve.InferenceRESTClient, protocol v2)."""
import asyncio
import json

import numpy as np
import pytest

kserve = pytest.importorskip("kserve", reason="kserve is installed in .venv-kserve (make test-kserve)")

from conftest import FIXTURES, modelc_predict  # noqa: E402


def run(coroutine):
    return asyncio.run(coroutine)


def test_health_and_readiness(server):
    async def check():
        async with kserve.InferenceRESTClient(kserve.RESTConfig(protocol="v2", timeout=30)) as client:
            base = f"http://{server.url}"
            assert await client.is_server_live(base) is True
            assert await client.is_server_ready(base) is True
            assert await client.is_model_ready(base, "MLProgram") is True
            assert await client.is_model_ready(base, "NoSuchModel") is False
    run(check())


@pytest.mark.parametrize("binary", [False, True])
def test_infer_json_and_binary(server, binary):
    x = (np.arange(16, dtype=np.float32).reshape(1, 16) - 7.5) / 4

    async def infer():
        async with kserve.InferenceRESTClient(kserve.RESTConfig(protocol="v2", timeout=30)) as client:
            tensor = kserve.InferInput("x", [1, 16], "FP32")
            tensor.set_data_from_numpy(x, binary_data=binary)
            request = kserve.InferRequest(model_name="MLProgram", infer_inputs=[tensor], request_id="kserve-1")
            return await client.infer(f"http://{server.url}", request, model_name="MLProgram")

    response = run(infer())
    assert response.id == "kserve-1" and response.model_name == "MLProgram"
    probs = response.outputs[0].as_numpy()
    expected = modelc_predict(FIXTURES / "Models" / "MLProgram.mlpackage", json.dumps({"x": x.tolist()}))
    np.testing.assert_allclose(probs, np.array(expected["outputs"]["probs"], dtype=np.float32), rtol=0, atol=1e-6)


def test_errors_carry_the_status_and_message(server):
    async def infer():
        async with kserve.InferenceRESTClient(kserve.RESTConfig(protocol="v2", timeout=30)) as client:
            tensor = kserve.InferInput("x", [1, 16], "FP64")
            tensor.set_data_from_numpy(np.zeros((1, 16)), binary_data=False)
            request = kserve.InferRequest(model_name="MLProgram", infer_inputs=[tensor])
            return await client.infer(f"http://{server.url}", request, model_name="MLProgram")

    with pytest.raises(Exception) as failure:
        run(infer())
    assert "400" in str(failure.value) and "the model takes FP32" in str(failure.value)
