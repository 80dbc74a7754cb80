"""`modelc serve` through KServe's own clients: kserve.InferenceRESTClient (protocol v2) and kserve.InferenceGRPCClient."""
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


def test_grpc_client_health_typed_and_raw_contents_and_errors(server):
    """kserve.InferenceGRPCClient on the gRPC port: lists go as typed contents, numpy arrays set as
    binary as raw contents; a fault comes back as its gRPC status."""
    import grpc
    x = (np.arange(16, dtype=np.float32).reshape(1, 16) - 7.5) / 4
    expected = np.array(modelc_predict(FIXTURES / "Models" / "MLProgram.mlpackage", json.dumps({"x": x.tolist()}))["outputs"]["probs"],
                        dtype=np.float32)

    async def check():
        client = kserve.InferenceGRPCClient(server.grpc_url, timeout=30, retries=2)
        try:
            assert await client.is_server_live() is True
            assert await client.is_server_ready() is True
            assert await client.is_model_ready("MLProgram") is True
            for binary in (False, True):
                if binary:
                    tensor = kserve.InferInput("x", [1, 16], "FP32")
                    tensor.set_data_from_numpy(x, binary_data=True)
                else:
                    tensor = kserve.InferInput("x", [1, 16], "FP32", data=x.ravel().tolist())
                request = kserve.InferRequest(model_name="MLProgram", infer_inputs=[tensor], request_id=f"kserve-grpc-{binary}")
                response = await client.infer(request)
                assert response.id == f"kserve-grpc-{binary}" and response.model_name == "MLProgram"
                np.testing.assert_allclose(response.outputs[0].as_numpy().reshape(1, 4), expected, rtol=0, atol=1e-6)
            unknown = kserve.InferRequest(model_name="NoSuchModel", infer_inputs=[tensor])
            with pytest.raises(grpc.RpcError) as failure:
                await client.infer(unknown)
            assert failure.value.code() == grpc.StatusCode.NOT_FOUND and failure.value.details() == "unknown model 'NoSuchModel'"
            wrong = kserve.InferInput("x", [1, 16], "FP64", data=[0.0] * 16)
            with pytest.raises(grpc.RpcError) as failure:
                await client.infer(kserve.InferRequest(model_name="MLProgram", infer_inputs=[wrong]))
            assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert failure.value.details() == "input 'x': datatype FP64, the model takes FP32"
        finally:
            await client.close()
    run(check())
