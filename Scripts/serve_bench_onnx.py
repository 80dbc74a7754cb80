#!/usr/bin/env python3
"""The onnxruntime side of make bench's serving comparison: a minimal FastAPI/uvicorn server of the
Open Inference Protocol's infer endpoint over the same MobileNetV2-shaped network (ONNX), taking the
same request modelc serve takes: UINT8 pixels [224, 224, 3], row by row, in JSON.

Usage: serve_bench_onnx.py MODEL.onnx PORT
"""
import sys

import numpy as np
import onnxruntime
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

model_path, port = sys.argv[1], int(sys.argv[2])
session = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
input_name = session.get_inputs()[0].name
app = FastAPI()


@app.get("/v2/health/ready")
def ready():
    return {"ready": True}


@app.post("/v2/models/{name}/infer")
async def infer(name: str, request: Request):
    body = await request.json()
    tensor = body["inputs"][0]
    pixels = np.asarray(tensor["data"], dtype=np.uint8).reshape(tensor["shape"])
    # What the Core ML model's image preprocessing does: scale 1/127.5, bias -1, NCHW.
    image = (pixels.astype(np.float32) * np.float32(1 / 127.5) - 1).transpose(2, 0, 1)[None]
    probabilities = session.run(None, {input_name: image})[0].reshape(-1)
    return JSONResponse({"model_name": name, "outputs": [
        {"name": "probabilities", "datatype": "FP32", "shape": [int(probabilities.size)], "data": probabilities.tolist()}]})


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
