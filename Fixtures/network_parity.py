#!/usr/bin/env python3
"""Generate the parity fixtures for modelc's runtime of Core ML neural networks and ML programs.

Usage:
    network_parity.py [--out DIR]   write DIR/Parity/Networks/ (default DIR: the folder of this script)

For every case set NAME this writes Parity/Networks/NAME.mlmodel (or NAME.mlpackage for an
ML program) and Parity/Networks/NAME.json: the model, and inputs with the outputs that an
independent engine gives for them: onnxruntime running an ONNX graph rebuilt from the same
weights, a NumPy float64 forward pass written here from the layer definitions in
NeuralNetwork.proto / the MIL op documentation, or scikit-learn for a GLM stage. The runtime
must reproduce every output within the file's tolerance: |got - want| <= tolerance * max(1, |want|).

Weights always come from the saved specification (or weight.bin), decoded by this script:
float16 bytes, linear / look-up-table quantized bits (Core ML neural networks pack the
bits of each value most significant bit first), and MIL blob storage v2 (sub-byte values
packed from the least significant bit). The expected outputs never come from evaluating a
Core ML model (coremltools cannot predict on Linux) and never from coremltools' own
dequantizer.

Everything is deterministic: fixed seeds, deterministic protobuf serialization, no dates,
stable package identifiers. Running the script twice gives byte-identical files.
"""

import argparse
import contextlib
import io
import json
import os
import shutil
import struct
import sys
import uuid
import warnings

os.environ.setdefault("TQDM_DISABLE", "1")

import numpy as np

import coremltools as ct
from coremltools.converters.mil import Builder as mb
from coremltools.models import datatypes
from coremltools.models.neural_network import NeuralNetworkBuilder, quantization_utils
from coremltools.models.pipeline import PipelineClassifier
from coremltools.proto import FeatureTypes_pb2, MIL_pb2, Model_pb2

import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

import sklearn
from sklearn.linear_model import LogisticRegression

HERE = os.path.dirname(os.path.abspath(__file__))
SUBDIR = os.path.join("Parity", "Networks")
ORT = "onnxruntime %s on an ONNX graph rebuilt from the same weights" % onnxruntime.__version__
NUMPY = "NumPy %s float64 forward pass" % np.__version__
VOLATILE_METADATA_KEYS = ("com.github.apple.coremltools.conversion_date",
                          "com.github.apple.coremltools.source",
                          "com.github.apple.coremltools.source_dialect")
MAX_CASES = 8
MAX_JSON_BYTES = 100 * 1024
MAX_MODEL_BYTES = 300 * 1024
MAX_TOTAL_BYTES = 4 * 1024 * 1024
MANIFEST_NAMESPACE = uuid.UUID("6d6f6465-6c63-4669-7874-757265730001")
README_HEADING = "## Networks"


# ---------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------

def write_bytes(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o644)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def serialize(spec):
    for key in VOLATILE_METADATA_KEYS:
        if key in spec.description.metadata.userDefined:
            del spec.description.metadata.userDefined[key]
    return spec.SerializeToString(deterministic=True)


def load_spec(path):
    spec = Model_pb2.Model()
    spec.ParseFromString(read_bytes(path))
    return spec


def copy_spec(spec):
    out = Model_pb2.Model()
    out.CopyFrom(spec)
    return out


def set_metadata(spec, short):
    md = spec.description.metadata
    md.shortDescription = short
    md.author = "modelc fixtures"
    md.license = "MIT"
    md.versionString = "1.0"


def enc(v, inputs=False):
    """Encode one value in the parity JSON format. Inputs are float32 values, written as
    the shortest decimal that reads back as the same float32; outputs are written with 9
    significant digits (far below every tolerance), which keeps the files small."""
    if isinstance(v, (str, np.str_)):
        return str(v)
    if isinstance(v, (bool, np.bool_)):
        raise TypeError("booleans are not a Core ML feature type")
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        v = float(v)
        assert np.isfinite(v), v
        if inputs:
            assert float(np.float32(v)) == v, v
            return float(str(np.float32(v)))
        return float("%.9g" % v)
    if isinstance(v, np.ndarray):
        if v.dtype.kind in "iu":
            return v.tolist()
        return [enc(x, inputs) for x in v.tolist()] if v.ndim else enc(v.item(), inputs)
    if isinstance(v, (list, tuple)):
        return [enc(x, inputs) for x in v]
    if isinstance(v, dict):
        return {str(k): enc(x, inputs) for k, x in v.items()}
    raise TypeError(type(v))


class Writer:
    """Writes case files and remembers them for README.md."""

    def __init__(self, out_dir):
        self.dir = os.path.join(out_dir, SUBDIR)
        self.entries = []

    def _doc(self, name, model_file, kind, reference, cases, tolerance, note, inputs, outputs):
        assert 1 <= len(cases) <= MAX_CASES, (name, len(cases))
        for case in cases:
            assert set(case["inputs"]) == inputs, (name, set(case["inputs"]) ^ inputs)
            assert set(case["outputs"]) <= outputs, (name, set(case["outputs"]) - outputs)
        doc = {"model": model_file, "kind": kind, "reference": reference, "tolerance": tolerance,
               "note": note,
               "cases": [{"inputs": enc(c["inputs"], inputs=True), "outputs": enc(c["outputs"])}
                         for c in cases]}
        text = (json.dumps(doc, sort_keys=True, indent=1, allow_nan=False) + "\n").encode()
        assert len(text) <= MAX_JSON_BYTES, (name, len(text))
        write_bytes(os.path.join(self.dir, name + ".json"), text)

    def write(self, name, spec, reference, cases, checks, note, tolerance=1e-4):
        kind = spec.WhichOneof("Type")
        set_metadata(spec, "Parity fixture %s: %s" % (name, checks))
        model_bytes = serialize(spec)
        assert len(model_bytes) <= MAX_MODEL_BYTES, (name, len(model_bytes))
        self._doc(name, name + ".mlmodel", kind, reference, cases, tolerance, note,
                  {f.name for f in spec.description.input},
                  {f.name for f in spec.description.output})
        write_bytes(os.path.join(self.dir, name + ".mlmodel"), model_bytes)
        self.entries.append((name, kind, reference, len(cases), checks))

    def write_package(self, name, model, reference, cases, checks, note, tolerance=1e-4):
        path = os.path.join(self.dir, name + ".mlpackage")
        model.short_description = "Parity fixture %s: %s" % (name, checks)
        model.author = "modelc fixtures"
        model.license = "MIT"
        model.version = "1.0"
        save_ml_package(model, path)
        size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)
        assert size <= MAX_MODEL_BYTES, (name, size)
        spec = load_spec(package_root_model_path(path))
        self._doc(name, name + ".mlpackage", spec.WhichOneof("Type"), reference, cases,
                  tolerance, note, {f.name for f in spec.description.input},
                  {f.name for f in spec.description.output})
        self.entries.append((name, spec.WhichOneof("Type"), reference, len(cases), checks))
        return path


def stabilize_manifest(path, namespace):
    """Rewrite the package's Manifest.json so that the same model gives the same bytes:
    identifiers derived from `namespace` and each item's path, and no item for an empty
    folder (git does not keep one, so a fresh clone would list a missing item, which
    coremltools' ModelPackage refuses to open). generate.py calls it too."""
    manifest_path = os.path.join(path, "Manifest.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    package = os.path.basename(path)
    for item_id, item in list(manifest["itemInfoEntries"].items()):
        item_path = os.path.join(path, "Data", item["path"])
        if os.path.isdir(item_path) and not any(files for _, _, files in os.walk(item_path)):
            shutil.rmtree(item_path)
        if not os.path.exists(item_path) and item_id != manifest["rootModelIdentifier"]:
            del manifest["itemInfoEntries"][item_id]
    renamed = {old: str(uuid.uuid5(namespace, package + "/" + item["path"])).upper()
               for old, item in manifest["itemInfoEntries"].items()}
    manifest["itemInfoEntries"] = {renamed[k]: v for k, v in manifest["itemInfoEntries"].items()}
    manifest["rootModelIdentifier"] = renamed[manifest["rootModelIdentifier"]]
    write_bytes(manifest_path, (json.dumps(manifest, indent=4, sort_keys=True) + "\n").encode())


def save_ml_package(model, path):
    """Save with coremltools, then make the package deterministic (as generate.py does)."""
    if os.path.exists(path):
        shutil.rmtree(path)
    with contextlib.redirect_stdout(io.StringIO()):
        model.save(path)
    stabilize_manifest(path, MANIFEST_NAMESPACE)
    model_path = package_root_model_path(path)
    write_bytes(model_path, serialize(load_spec(model_path)))
    for root, _, files in os.walk(path):
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)


def package_root_model_path(path):
    with open(os.path.join(path, "Manifest.json")) as f:
        manifest = json.load(f)
    item = manifest["itemInfoEntries"][manifest["rootModelIdentifier"]]
    return os.path.join(path, "Data", item["path"])


# ---------------------------------------------------------------------------
# Weights of a neural network, decoded from the specification
# ---------------------------------------------------------------------------

def unpack_msb_first(raw, nbits, count):
    """Core ML neural-network quantized weights: each value's bits, most significant bit
    first, written into a bit stream that fills each byte from its most significant bit."""
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8))  # MSB first per byte
    assert len(bits) >= count * nbits, (len(bits), count, nbits)
    bits = bits[:count * nbits].reshape(count, nbits).astype(np.int64)
    return bits @ (1 << np.arange(nbits - 1, -1, -1))


def nn_weights(wp, shape):
    """The float64 values of a WeightParams message, shaped, decoded independently."""
    count = int(np.prod(shape))
    if len(wp.floatValue):
        values = np.array(wp.floatValue, dtype=np.float32)
    elif len(wp.float16Value):
        values = np.frombuffer(wp.float16Value, dtype="<f2").astype(np.float32)
    elif len(wp.rawValue):
        q = wp.quantization
        codes = unpack_msb_first(wp.rawValue, q.numberOfBits, count)
        kind = q.WhichOneof("QuantizationType")
        if kind == "lookupTableQuantization":
            lut = np.array(q.lookupTableQuantization.floatValue, dtype=np.float32)
            assert len(lut) == 1 << q.numberOfBits
            values = lut[codes]
        else:
            assert kind == "linearQuantization", kind
            scale = np.array(q.linearQuantization.scale, dtype=np.float64)
            bias = np.array(q.linearQuantization.bias, dtype=np.float64)
            rows = codes.reshape(shape[0], -1).astype(np.float64)
            # One scale/bias, or one per output channel (the first axis).
            scale = scale.reshape(-1, 1) if len(scale) > 1 else scale
            bias = bias.reshape(-1, 1) if len(bias) > 1 else (bias if len(bias) else 0.0)
            values = (rows * scale + bias).astype(np.float32)
    else:
        values = np.zeros(0, dtype=np.float32)
    assert values.size == count, (values.size, shape)
    return values.reshape(shape).astype(np.float64)


def weight_form(spec):
    forms = set()
    for layer in nn_layers(spec):
        params = getattr(layer, layer.WhichOneof("layer"))
        for field, value in params.ListFields():
            if field.message_type is not None and field.message_type.name == "WeightParams":
                if len(value.floatValue):
                    forms.add("float32")
                elif len(value.float16Value):
                    forms.add("float16")
                elif len(value.rawValue):
                    q = value.quantization
                    forms.add("%d-bit %s" % (q.numberOfBits, q.WhichOneof("QuantizationType")))
    return sorted(forms)


def nn_of(spec):
    return getattr(spec, spec.WhichOneof("Type"))


def nn_layers(spec):
    return list(nn_of(spec).layers)


# ---------------------------------------------------------------------------
# Images
# ---------------------------------------------------------------------------

def random_image(rng, width, height):
    return rng.integers(0, 256, (height, width, 3), dtype=np.uint8)


def image_value(pixels):
    height, width = pixels.shape[:2]
    fmt = {1: "gray", 3: "rgb", 4: "rgba"}[pixels.shape[2]]
    return {"width": int(width), "height": int(height), "pixelFormat": fmt,
            "pixels": [int(b) for b in pixels.reshape(-1)]}


def preprocess(spec, name, pixels):
    """The float [C, H, W] tensor a network sees for an RGB(A) or gray image input."""
    feature = [f for f in spec.description.input if f.name == name][0]
    space = FeatureTypes_pb2.ImageFeatureType.ColorSpace.Name(feature.type.imageType.colorSpace)
    x = pixels.astype(np.float64).transpose(2, 0, 1)  # [C, H, W], RGB(A) order
    if space == "RGB":
        x = x[:3]
    elif space == "BGR":
        x = x[[2, 1, 0]]
    else:
        assert space == "GRAYSCALE" and x.shape[0] == 1
    for pre in nn_of(spec).preprocessing:
        if pre.featureName != name:
            continue
        if pre.WhichOneof("preprocessor") == "scaler":
            s = pre.scaler
            scale = np.float32(s.channelScale) if s.channelScale != 0 else 1.0
            bias = {"RGB": [s.redBias, s.greenBias, s.blueBias],
                    "BGR": [s.blueBias, s.greenBias, s.redBias],
                    "GRAYSCALE": [s.grayBias]}[space]
            x = x * float(scale) + np.array(bias, dtype=np.float32).astype(np.float64)[:, None, None]
        else:
            mean = np.array(pre.meanImage.meanImage, dtype=np.float32).reshape(x.shape)
            x = x - mean
    return x


# ---------------------------------------------------------------------------
# onnxruntime: an ONNX graph rebuilt from a neural network's weights
# ---------------------------------------------------------------------------

def onnx_from_nn(spec, input_name, channels):
    """Rebuild the layers of a small convolutional network (the kinds used by the image
    fixtures) as an ONNX graph with the weights decoded from the specification."""
    nodes, inits = [], []

    def const(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array, dtype=np.float32), name))
        return name

    for layer in nn_layers(spec):
        kind = layer.WhichOneof("layer")
        p = getattr(layer, kind)
        x, y, n = list(layer.input), layer.output[0], layer.name
        if kind == "convolution":
            assert not p.isDeconvolution
            groups = p.nGroups or 1
            kh, kw = list(p.kernelSize) or [3, 3]
            w = nn_weights(p.weights, (p.outputChannels, p.kernelChannels, kh, kw))
            ins = [x[0], const(n + "_w", w)]
            if p.hasBias:
                ins.append(const(n + "_b", nn_weights(p.bias, (p.outputChannels,))))
            attrs = dict(group=groups, kernel_shape=[kh, kw], strides=list(p.stride) or [1, 1],
                         dilations=list(p.dilationFactor) or [1, 1])
            if p.WhichOneof("ConvolutionPaddingType") == "same":
                assert p.same.asymmetryMode == 0  # BOTTOM_RIGHT_HEAVY: the extra row at the end
                attrs["auto_pad"] = "SAME_UPPER"
            else:
                b = p.valid.paddingAmounts.borderAmounts
                attrs["pads"] = ([b[0].startEdgeSize, b[1].startEdgeSize, b[0].endEdgeSize,
                                  b[1].endEdgeSize] if len(b) else [0, 0, 0, 0])
            nodes.append(helper.make_node("Conv", ins, [y], name=n, **attrs))
        elif kind == "batchnorm":
            c = p.channels
            ins = [x[0]] + [const(n + "_" + f, nn_weights(getattr(p, f), (c,)))
                            for f in ("gamma", "beta", "mean", "variance")]
            nodes.append(helper.make_node("BatchNormalization", ins, [y], name=n,
                                          epsilon=p.epsilon or 1e-5))
        elif kind == "activation":
            assert p.WhichOneof("NonlinearityType") == "ReLU"
            nodes.append(helper.make_node("Relu", x, [y], name=n))
        elif kind == "clip":
            nodes.append(helper.make_node("Clip", [x[0], const(n + "_lo", p.minVal),
                                                   const(n + "_hi", p.maxVal)], [y], name=n))
        elif kind == "pooling":
            if p.globalPooling:
                op = {0: "GlobalMaxPool", 1: "GlobalAveragePool"}[p.type]
                nodes.append(helper.make_node(op, x, [y], name=n))
            else:
                assert p.WhichOneof("PoolingPaddingType") == "valid" and p.type in (0, 1)
                assert not any(a.startEdgeSize or a.endEdgeSize
                               for a in p.valid.paddingAmounts.borderAmounts)
                op = {0: "MaxPool", 1: "AveragePool"}[p.type]
                nodes.append(helper.make_node(op, x, [y], name=n, kernel_shape=list(p.kernelSize),
                                              strides=list(p.stride)))
        elif kind == "flatten":
            nodes.append(helper.make_node("Flatten", x, [y], name=n, axis=1))
        elif kind == "innerProduct":
            w = nn_weights(p.weights, (p.outputChannels, p.inputChannels))
            ins = [x[0], const(n + "_w", w)]
            if p.hasBias:
                ins.append(const(n + "_b", nn_weights(p.bias, (p.outputChannels,))))
            nodes.append(helper.make_node("Gemm", ins, [y], name=n, transB=1))
        elif kind == "add":
            assert len(x) == 2
            nodes.append(helper.make_node("Add", x, [y], name=n))
        elif kind == "softmax":
            nodes.append(helper.make_node("Softmax", x, [y], name=n, axis=1))
        else:
            raise ValueError("no ONNX rebuild for layer kind %s" % kind)
    last = nn_layers(spec)[-1].output[0]
    graph = helper.make_graph(
        nodes, "rebuilt",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [1, channels, None, None])],
        [helper.make_tensor_value_info(last, TensorProto.FLOAT, [1, None])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return lambda tensor: session.run(None, {input_name: tensor[None].astype(np.float32)})[0]


def classifier_outputs(spec, probabilities):
    d = spec.description
    labels = class_labels(spec)
    probabilities = np.asarray(probabilities, dtype=np.float64).reshape(-1)
    assert len(labels) == len(probabilities)
    best = int(np.argmax(probabilities))
    assert np.sort(probabilities)[-1] - np.sort(probabilities)[-2] > 1e-3, "label too close to call"
    return {d.predictedFeatureName: labels[best],
            d.predictedProbabilitiesName: {str(l): float(v) for l, v in zip(labels, probabilities)}}


def class_labels(spec):
    m = getattr(spec, spec.WhichOneof("Type"))
    kind = m.WhichOneof("ClassLabels")
    return list(getattr(m, kind).vector)


# ---------------------------------------------------------------------------
# 1. Image classifiers (Fixtures/Models)
# ---------------------------------------------------------------------------

IMAGE_NOTE = (
    "Image input: the network sees the float tensor [3, H, W] in RGB order, value = byte * "
    "channelScale (1/255 as float32) + the per-channel bias (0 here). The expected outputs come "
    "from onnxruntime running Conv/BatchNormalization/Relu/MaxPool/GlobalAveragePool/Flatten/"
    "Gemm/Softmax rebuilt from the weights as stored in the model (same padding = the extra row "
    "and column at the end, BOTTOM_RIGHT_HEAVY). classLabelProbs is the softmax output as a "
    "dictionary; classLabel its arg max.")


def image_classifier_cases(writer):
    models = os.path.join(HERE, "Models")
    rng = np.random.default_rng(9101)
    images = [random_image(rng, 16, 16) for _ in range(4)]
    images.append(np.zeros((16, 16, 3), dtype=np.uint8))
    gradient = np.zeros((16, 16, 3), dtype=np.uint8)
    gradient[..., 0] = np.arange(16)[None, :] * 17
    gradient[..., 1] = np.arange(16)[:, None] * 17
    gradient[..., 2] = 255
    images.append(gradient)
    for name, source, extra in (
            ("image_classifier", "ImageClassifier.mlmodel", ""),
            ("image_classifier_fp16", "ImageClassifierFP16.mlmodel",
             " Weights are float16 (WeightParams.float16Value, little-endian IEEE half), "
             "widened to float32 by this script; the network still computes in float32."),
            ("image_classifier_int8", "ImageClassifierInt8.mlmodel",
             " Weights are 8-bit linear quantized (rawValue bytes q, one scale and bias per "
             "output channel for the convolutions and the inner product, one for the biases): "
             "the reference uses w = scale * q + bias, decoded by this script from the saved "
             "specification, not the original float weights; batchnorm stays float32.")):
        spec = load_spec(os.path.join(models, source))
        run = onnx_from_nn(spec, "image", 3)
        cases = []
        for img in images:
            probs = run(preprocess(spec, "image", img))
            cases.append({"inputs": {"image": image_value(img)},
                          "outputs": classifier_outputs(spec, probs)})
        writer.write(name, spec, ORT, cases,
                     "copy of Fixtures/Models/%s: 16x16 RGB, conv/batchnorm/relu/max pool/conv/"
                     "relu/global average pool/flatten/inner product/softmax, %s weights"
                     % (source, "/".join(weight_form(spec))), IMAGE_NOTE + extra)

    spec = load_spec(os.path.join(models, "ImageClassifierFlexible.mlmodel"))
    size_range = spec.description.input[0].type.imageType.imageSizeRange
    sizes = [(16, 16), (24, 20), (8, 32), (64, 8)]
    for w, h in sizes:
        assert size_range.widthRange.lowerBound <= w <= size_range.widthRange.upperBound
        assert size_range.heightRange.lowerBound <= h
    run = onnx_from_nn(spec, "image", 3)
    cases = []
    for w, h in [sizes[0]] + sizes:  # two at 16x16; JSON size keeps the rest to one each
        if True:
            img = random_image(rng, w, h)
            cases.append({"inputs": {"image": image_value(img)},
                          "outputs": classifier_outputs(spec, run(preprocess(spec, "image", img)))})
    writer.write("image_classifier_flexible", spec, ORT, cases,
                 "copy of Fixtures/Models/ImageClassifierFlexible.mlmodel: image size range "
                 "width 8...64, height 8...unbounded; cases at 16x16, 24x20, 8x32, 64x8 (WxH)",
                 IMAGE_NOTE + " The image size varies per case within the declared range; the "
                 "global pool makes the classifier size-independent.")


# ---------------------------------------------------------------------------
# 2. MobileNet-style block
# ---------------------------------------------------------------------------

def rand(rng, *shape, scale=0.1):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def hwio(w_oihw):
    """The builder takes convolution weights as [kH, kW, C_in/groups, C_out]."""
    return np.ascontiguousarray(np.transpose(w_oihw, (2, 3, 1, 0)))


def mobilenet_cases(writer):
    rng = np.random.default_rng(9201)
    labels = ["airplane", "boat", "car", "dog", "flower"]
    c = 8
    builder = NeuralNetworkBuilder([("image", datatypes.Array(3, 32, 32))],
                                   [("labelProbs", datatypes.Array(len(labels)))],
                                   mode="classifier")
    builder.add_convolution("stem", 3, c, 3, 3, 2, 2, "same", 1, hwio(rand(rng, c, 3, 3, 3, scale=0.3)),
                            None, False, input_name="image", output_name="stem_out")
    builder.add_batchnorm("stem_bn", c, (1 + rand(rng, c)), rand(rng, c), rand(rng, c),
                          rng.uniform(0.5, 1.5, c).astype(np.float32), "stem_out", "stem_bn_out")
    builder.add_clip("stem_relu6", "stem_bn_out", "stem_relu6_out", 0.0, 6.0)
    builder.add_convolution("dw", 1, c, 3, 3, 1, 1, "same", c, hwio(rand(rng, c, 1, 3, 3, scale=0.5)),
                            rand(rng, c), True, input_name="stem_relu6_out", output_name="dw_out")
    builder.add_clip("dw_relu6", "dw_out", "dw_relu6_out", 0.0, 6.0)
    builder.add_convolution("pw", c, c, 1, 1, 1, 1, "valid", 1, hwio(rand(rng, c, c, 1, 1, scale=0.4)),
                            rand(rng, c), True, input_name="dw_relu6_out", output_name="pw_out")
    builder.add_elementwise("residual", ["pw_out", "stem_relu6_out"], "residual_out", "ADD")
    builder.add_pooling("gap", 1, 1, 1, 1, "AVERAGE", "VALID", "residual_out", "gap_out",
                        is_global=True)
    builder.add_flatten("flatten", 0, "gap_out", "flatten_out")
    builder.add_inner_product("fc", rand(rng, len(labels), c, scale=0.8), rand(rng, len(labels)),
                              c, len(labels), True, "flatten_out", "fc_out")
    builder.add_softmax("softmax", "fc_out", "labelProbs")
    builder.set_class_labels(labels, predicted_feature_name="label",
                             prediction_blob="labelProbs")
    builder.set_pre_processing_parameters(image_input_names=["image"], is_bgr=False,
                                          image_scale=1 / 127.5, red_bias=-1.0,
                                          green_bias=-1.0, blue_bias=-1.0)
    spec = builder.spec
    run = onnx_from_nn(spec, "image", 3)
    cases = []
    for _ in range(2):  # a 32x32 image is ~37 KB of JSON
        img = random_image(rng, 32, 32)
        cases.append({"inputs": {"image": image_value(img)},
                      "outputs": classifier_outputs(spec, run(preprocess(spec, "image", img)))})
    writer.write("mobilenet_block", spec, ORT, cases,
                 "classifier, 32x32 RGB, scale 1/127.5 bias -1: conv 3x3 stride 2 same + "
                 "batchnorm + clip(0, 6) (ReLU6), depthwise 3x3 (groups 8), pointwise 1x1, "
                 "residual add, global average pool, flatten, inner product, softmax; 5 labels",
                 "Image input: [3, 32, 32] RGB, value = byte * float32(1/127.5) - 1 (scaler "
                 "channelScale, red/green/blueBias). ReLU6 is the spec's clip layer (minVal 0, "
                 "maxVal 6; a specification version 4 layer). Same padding on the stride-2 stem: "
                 "total padding 1, put at the end (BOTTOM_RIGHT_HEAVY), as ONNX SAME_UPPER.")


# ---------------------------------------------------------------------------
# NumPy float64 reference kernels for single layers ([C, H, W] tensors, batch 1)
# ---------------------------------------------------------------------------

def same_pads(size, kernel, stride):
    out = -(-size // stride)
    total = max(0, (out - 1) * stride + kernel - size)
    return total // 2, total - total // 2  # BOTTOM_RIGHT_HEAVY


def conv2d(x, w, b, stride=(1, 1), dilation=(1, 1), pads=(0, 0, 0, 0), groups=1):
    """x [C, H, W]; w [O, C/groups, kh, kw]; pads (top, bottom, left, right)."""
    c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    t, btm, l, r = pads
    xp = np.zeros((c, h + t + btm, wd + l + r))
    xp[:, t:t + h, l:l + wd] = x
    ekh, ekw = (kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1
    ho = (xp.shape[1] - ekh) // stride[0] + 1
    wo = (xp.shape[2] - ekw) // stride[1] + 1
    y = np.zeros((o, ho, wo))
    og = o // groups
    for g in range(groups):
        xs = xp[g * cg:(g + 1) * cg]
        for i in range(ho):
            for j in range(wo):
                patch = xs[:, i * stride[0]:i * stride[0] + ekh:dilation[0],
                           j * stride[1]:j * stride[1] + ekw:dilation[1]]
                y[g * og:(g + 1) * og, i, j] = np.tensordot(w[g * og:(g + 1) * og], patch, 3)
    if b is not None:
        y += b[:, None, None]
    return y


def deconv2d(x, w, b, stride, groups=1, crop=(0, 0, 0, 0)):
    """x [C, H, W]; w [C, O/groups, kh, kw] (Core ML's deconvolution layout)."""
    c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // groups
    full = np.zeros((og * groups, (h - 1) * stride[0] + kh, (wd - 1) * stride[1] + kw))
    for ci in range(c):
        g = ci // cg
        for i in range(h):
            for j in range(wd):
                full[g * og:(g + 1) * og, i * stride[0]:i * stride[0] + kh,
                     j * stride[1]:j * stride[1] + kw] += x[ci, i, j] * w[ci]
    t, btm, l, r = crop
    y = full[:, t:full.shape[1] - btm, l:full.shape[2] - r]
    if b is not None:
        y = y + b[:, None, None]
    return y


def pool2d(x, kind, kernel, stride, pads=(0, 0, 0, 0), exclude_padding=True, out_hw=None):
    """Windows start at i * stride - top; positions outside the input are padding: ignored
    by max, zeros for L2 and average (average divides by the kernel area, or by the number
    of input positions in the window when exclude_padding)."""
    c, h, w = x.shape
    t, btm, l, r = pads
    if out_hw is None:
        out_hw = ((h + t + btm - kernel[0]) // stride[0] + 1, (w + l + r - kernel[1]) // stride[1] + 1)
    y = np.zeros((c,) + tuple(out_hw))
    for i in range(out_hw[0]):
        for j in range(out_hw[1]):
            r0, c0 = i * stride[0] - t, j * stride[1] - l
            r1, c1 = r0 + kernel[0], c0 + kernel[1]
            win = x[:, max(r0, 0):min(r1, h), max(c0, 0):min(c1, w)]
            n = win.shape[1] * win.shape[2]
            assert n > 0
            if kind == "MAX":
                y[:, i, j] = win.max(axis=(1, 2))
            elif kind == "L2":
                y[:, i, j] = np.sqrt((win ** 2).sum(axis=(1, 2)))
            else:
                y[:, i, j] = win.sum(axis=(1, 2)) / (n if exclude_padding else kernel[0] * kernel[1])
    return y


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def self_check_kernels():
    """Cross-check the NumPy convolution, deconvolution and pooling kernels against
    onnxruntime once (they are the base of many layer references)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 7, 6))
    w = rng.standard_normal((6, 2, 3, 2))
    b = rng.standard_normal(6)

    def ort(node, inputs):
        names = ["i%d" % k for k in range(len(inputs))]
        node.input[:] = names
        node.output[:] = ["y"]
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info(
            nm, TensorProto.DOUBLE if False else TensorProto.FLOAT, list(a.shape))
            for nm, a in zip(names, inputs)], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, None, None, None])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        s = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return s.run(None, {nm: a.astype(np.float32) for nm, a in zip(names, inputs)})[0][0]

    got = conv2d(x, w, b, (2, 1), (1, 2), (1, 2, 0, 1), groups=2)
    want = ort(helper.make_node("Conv", [], [], group=2, strides=[2, 1], dilations=[1, 2],
                                pads=[1, 0, 2, 1]), [x[None], w, b])
    assert np.allclose(got, want, atol=1e-4), "conv2d"
    wd = rng.standard_normal((4, 3, 3, 2))
    got = deconv2d(x, wd, b[:6], (2, 3), groups=2, crop=(1, 0, 0, 1))
    want = ort(helper.make_node("ConvTranspose", [], [], group=2, strides=[2, 3],
                                pads=[1, 0, 0, 1]), [x[None], wd, b[:6]])
    assert np.allclose(got, want, atol=1e-4), "deconv2d"
    for kind, op, extra in (("MAX", "MaxPool", {}), ("AVG", "AveragePool", {"count_include_pad": 1}),
                            ("L2", "LpPool", {"p": 2})):
        got = pool2d(x, kind, (3, 2), (2, 2), (1, 1, 0, 1), exclude_padding=False)
        want = ort(helper.make_node(op, [], [], kernel_shape=[3, 2], strides=[2, 2],
                                    pads=[1, 0, 1, 1], **extra), [x[None]])
        assert np.allclose(got, want, atol=1e-4), kind
    got = pool2d(x, "AVG", (3, 3), (2, 2), (1, 1, 1, 1), exclude_padding=True)
    want = ort(helper.make_node("AveragePool", [], [], kernel_shape=[3, 3], strides=[2, 2],
                                pads=[1, 1, 1, 1]), [x[None]])
    assert np.allclose(got, want, atol=1e-4), "avg exclude"


# ---------------------------------------------------------------------------
# 3. Layer coverage networks (multi-array inputs)
# ---------------------------------------------------------------------------

RANK5_NOTE = (
    "Multi-array inputs without arrayInputShapeMapping (RANK5_ARRAY_MAPPING): a declared "
    "shape [C, H, W] is the tensor [1, 1, C, H, W] (a rank-1 shape [C] is [1, 1, C, 1, 1]); "
    "every output is given in its declared shape, which is the layer's [C, H, W] result "
    "(a [C, 1, 1] result declared [C] is the same values).")


def layer_net(inputs, outputs, rank_n=False):
    return NeuralNetworkBuilder([(n, datatypes.Array(*s)) for n, s in inputs],
                                [(n, datatypes.Array(*s)) for n, s in outputs],
                                disable_rank5_shape_mapping=rank_n)


def check_shapes(spec, case):
    declared = {f.name: tuple(f.type.multiArrayType.shape) for f in spec.description.output}
    for name, value in case["outputs"].items():
        if name in declared and declared[name]:
            assert np.shape(value) == declared[name], (name, np.shape(value), declared[name])


def run_cases(spec, inputs_fn, forward, count, rng):
    cases = []
    for _ in range(count):
        inputs = inputs_fn(rng)
        outputs = forward({k: np.asarray(v, dtype=np.float64) for k, v in inputs.items()})
        case = {"inputs": inputs, "outputs": outputs}
        check_shapes(spec, case)
        cases.append(case)
    return cases


def f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def layer_weights(spec, layer_name, field, shape):
    layer = [l for l in nn_layers(spec) if l.name == layer_name][0]
    return nn_weights(getattr(getattr(layer, layer.WhichOneof("layer")), field), shape)


def convolution_cases(writer):
    rng = np.random.default_rng(9301)
    b = layer_net([("x", (4, 5, 5))],
                  [("dilated", (3, 1, 3)), ("padded", (3, 3, 3)), ("grouped", (6, 5, 5)),
                   ("same_stride2", (2, 3, 3)), ("depthwise", (4, 3, 3)),
                   ("deconv", (2, 11, 11)), ("deconv_cropped", (6, 8, 8)), ("rect", (3, 1, 4))])
    W = {}

    def conv(name, o, cg, kh, kw, stride, mode, groups, bias, deconv=False, output_shape=None, **kw_):
        w = rand(rng, *((cg, o // groups, kh, kw) if deconv else (o, cg, kh, kw)), scale=0.4)
        W[name] = (w, rand(rng, o) if bias else None)
        if deconv:  # builder layout [kH, kW, C_in, C_out/groups]
            wb = np.ascontiguousarray(np.transpose(w, (2, 3, 0, 1)))
        else:
            wb = hwio(w)
        b.add_convolution(name, cg, o, kh, kw, stride[0], stride[1], mode, groups, wb,
                          W[name][1], bias, is_deconv=deconv, output_shape=output_shape,
                          input_name="x", output_name=name, **kw_)

    conv("dilated", 3, 4, 3, 3, (1, 1), "valid", 1, True, dilation_factors=[2, 1])
    conv("padded", 3, 4, 3, 2, (2, 2), "valid", 1, True, padding_top=1, padding_bottom=2,
         padding_left=0, padding_right=1)
    conv("grouped", 6, 2, 3, 3, (1, 1), "same", 2, True)
    conv("same_stride2", 2, 4, 2, 3, (2, 2), "same", 1, False)
    conv("depthwise", 4, 1, 3, 3, (1, 1), "valid", 4, True)
    conv("deconv", 2, 4, 3, 3, (2, 2), "valid", 1, True, deconv=True)
    conv("deconv_cropped", 6, 4, 2, 4, (2, 2), "valid", 2, False, deconv=True,
         padding_top=1, padding_bottom=1, padding_left=1, padding_right=3)
    conv("rect", 3, 4, 5, 2, (1, 1), "valid", 1, True)
    spec = b.spec
    # The reference uses the weights as stored (read back), in Core ML's layouts.
    for name in W:
        layer = [l for l in nn_layers(spec) if l.name == name][0].convolution
        kh, kw = layer.kernelSize
        shape = ((layer.kernelChannels, layer.outputChannels // (layer.nGroups or 1), kh, kw)
                 if layer.isDeconvolution else (layer.outputChannels, layer.kernelChannels, kh, kw))
        w = nn_weights(layer.weights, shape)
        assert np.array_equal(w, W[name][0].astype(np.float64)), name
        W[name] = (w, nn_weights(layer.bias, (layer.outputChannels,)) if layer.hasBias else None)

    def forward(v):
        x = v["x"]
        out = {}
        out["dilated"] = conv2d(x, *W["dilated"], dilation=(2, 1))
        out["padded"] = conv2d(x, *W["padded"], stride=(2, 2), pads=(1, 2, 0, 1))
        out["grouped"] = conv2d(x, *W["grouped"], pads=same_pads(5, 3, 1) * 2, groups=2)
        out["same_stride2"] = conv2d(x, *W["same_stride2"], stride=(2, 2),
                                     pads=same_pads(5, 2, 2) + same_pads(5, 3, 2))
        out["depthwise"] = conv2d(x, *W["depthwise"], groups=4)
        out["deconv"] = deconv2d(x, *W["deconv"], stride=(2, 2))
        out["deconv_cropped"] = deconv2d(x, *W["deconv_cropped"], stride=(2, 2), groups=2,
                                         crop=(1, 1, 1, 3))
        out["rect"] = conv2d(x, *W["rect"])
        return out

    cases = run_cases(spec, lambda r: {"x": f32(r.standard_normal((4, 5, 5)))}, forward, 3, rng)
    writer.write("convolution", spec, NUMPY, cases,
                 "convolution: dilation [2, 1], explicit valid padding (top 1, bottom 2, right 1) "
                 "stride 2, groups 2 same, same padding stride 2 with a 2x3 kernel, depthwise, "
                 "5x2 kernel; deconvolution stride 2, and grouped deconvolution with padding "
                 "amounts (cropped output)",
                 RANK5_NOTE + " Weights: convolution [C_out, C_in/groups, kH, kW], deconvolution "
                 "[C_in, C_out/groups, kH, kW]. Same padding: output ceil(H/stride), total "
                 "padding max(0, (out-1)*stride + k - H), the larger half at the bottom/right. "
                 "Deconvolution with valid padding amounts: the full output (H-1)*stride + k "
                 "with top/bottom/left/right rows and columns removed. Deconvolution with "
                 "outputShape is not covered (ambiguous crop placement).")


def pooling_cases(writer):
    rng = np.random.default_rng(9302)
    outs = [("max_valid", (3, 3, 3)), ("avg_same_include_pad", (3, 4, 4)),
            ("avg_same_exclude_pad", (3, 4, 4)), ("avg_padded_include", (3, 4, 3)),
            ("l2_valid", (3, 3, 3)), ("global_max", (3, 1, 1)), ("global_avg", (3, 1, 1)),
            ("max_last_pixel", (3, 4, 4)), ("avg_last_pixel_exclude", (3, 4, 4)),
            ("max_same_top_left", (3, 4, 4))]
    b = layer_net([("x", (3, 7, 7))], outs)
    b.add_pooling("max_valid", 3, 3, 2, 2, "MAX", "VALID", "x", "max_valid")
    b.add_pooling("avg_same_include_pad", 3, 3, 2, 2, "AVERAGE", "SAME", "x",
                  "avg_same_include_pad", exclude_pad_area=False)
    b.add_pooling("avg_same_exclude_pad", 3, 3, 2, 2, "AVERAGE", "SAME", "x",
                  "avg_same_exclude_pad", exclude_pad_area=True)
    b.add_pooling("avg_padded_include", 2, 3, 2, 3, "AVERAGE", "VALID", "x", "avg_padded_include",
                  exclude_pad_area=False, padding_top=1, padding_bottom=0, padding_left=1,
                  padding_right=1)
    b.add_pooling("l2_valid", 3, 3, 2, 2, "L2", "VALID", "x", "l2_valid")
    b.add_pooling("global_max", 1, 1, 1, 1, "MAX", "VALID", "x", "global_max", is_global=True)
    b.add_pooling("global_avg", 1, 1, 1, 1, "AVERAGE", "VALID", "x", "global_avg", is_global=True)
    b.add_pooling("max_last_pixel", 3, 3, 2, 2, "MAX", "INCLUDE_LAST_PIXEL", "x", "max_last_pixel",
                  padding_top=1, padding_bottom=1, padding_left=1, padding_right=1)
    b.add_pooling("avg_last_pixel_exclude", 3, 3, 2, 2, "AVERAGE", "INCLUDE_LAST_PIXEL", "x",
                  "avg_last_pixel_exclude", exclude_pad_area=True, padding_top=1,
                  padding_bottom=1, padding_left=1, padding_right=1)
    b.add_pooling("max_same_top_left", 2, 2, 2, 2, "MAX", "SAME", "x", "max_same_top_left",
                  same_padding_asymmetry_mode="TOP_LEFT_HEAVY")
    spec = b.spec
    ilp = [l for l in nn_layers(spec) if l.name == "max_last_pixel"][0].pooling
    assert list(ilp.includeLastPixel.paddingAmounts) == [1, 1], ilp

    def last_pixel_out(size, k, s, p):
        out = -(-(size + 2 * p - k) // s) + 1
        if p > 0 and (out - 1) * s >= size + p:
            out -= 1
        return out

    def forward(v):
        x = v["x"]
        o = {}
        o["max_valid"] = pool2d(x, "MAX", (3, 3), (2, 2))
        sp = same_pads(7, 3, 2)
        o["avg_same_include_pad"] = pool2d(x, "AVG", (3, 3), (2, 2), sp + sp, False)
        o["avg_same_exclude_pad"] = pool2d(x, "AVG", (3, 3), (2, 2), sp + sp, True)
        o["avg_padded_include"] = pool2d(x, "AVG", (2, 3), (2, 3), (1, 0, 1, 1), False)
        o["l2_valid"] = pool2d(x, "L2", (3, 3), (2, 2))
        o["global_max"] = x.max(axis=(1, 2), keepdims=True)
        o["global_avg"] = x.mean(axis=(1, 2), keepdims=True)
        n = last_pixel_out(7, 3, 2, 1)
        o["max_last_pixel"] = pool2d(x, "MAX", (3, 3), (2, 2), (1, 1, 1, 1), out_hw=(n, n))
        o["avg_last_pixel_exclude"] = pool2d(x, "AVG", (3, 3), (2, 2), (1, 1, 1, 1), True,
                                             out_hw=(n, n))
        top, bottom = same_pads(7, 2, 2)
        tl = (bottom, top)  # TOP_LEFT_HEAVY: the larger half first
        o["max_same_top_left"] = pool2d(x, "MAX", (2, 2), (2, 2), tl + tl)
        return o

    cases = run_cases(spec, lambda r: {"x": f32(r.standard_normal((3, 7, 7)))}, forward, 3, rng)
    writer.write("pooling", spec, NUMPY, cases,
                 "pooling: max/L2 valid, average same with and without avgPoolExcludePadding, "
                 "average with explicit valid padding amounts counting the padding, global max "
                 "and average, includeLastPixel (padding 1) max and average, same padding "
                 "TOP_LEFT_HEAVY",
                 RANK5_NOTE + " Windows start at i*stride - top padding; padded positions are "
                 "ignored by max, count as zeros for L2, and for average count in the divisor "
                 "(the kernel area) unless avgPoolExcludePadding (then the divisor is the number "
                 "of input positions in the window). includeLastPixel: H_out = ceil((H + 2p - k) "
                 "/ s) + 1, minus 1 if (H_out - 1) * s >= H + p; windows that run past the "
                 "padded input use only the positions inside the input.")


def activation_cases(writer):
    rng = np.random.default_rng(9303)
    shape = (4, 3, 3)
    prelu = f32([0.1, 0.25, -0.3, 0.6])
    ps_alpha, ps_beta = f32([0.5, 1.0, 1.5, 2.0]), f32([1.0, 0.5, 2.0, -1.0])
    kinds = [
        ("linear", "LINEAR", [0.7, -0.2], lambda x: 0.7 * x - 0.2),
        ("relu", "RELU", None, lambda x: np.maximum(x, 0)),
        ("leaky_relu", "LEAKYRELU", [0.15], lambda x: np.where(x >= 0, x, f32(0.15) * x)),
        ("thresholded_relu", "THRESHOLDEDRELU", 0.4, lambda x: np.where(x >= f32(0.4), x, 0.0)),
        ("prelu", "PRELU", prelu, lambda x: np.where(x >= 0, x, prelu[:, None, None] * x)),
        ("tanh", "TANH", None, np.tanh),
        ("scaled_tanh", "SCALED_TANH", [1.7, 0.6], lambda x: f32(1.7) * np.tanh(f32(0.6) * x)),
        ("sigmoid", "SIGMOID", None, lambda x: 1 / (1 + np.exp(-x))),
        ("sigmoid_hard", "SIGMOID_HARD", [0.2, 0.5],
         lambda x: np.clip(f32(0.2) * x + 0.5, 0, 1)),
        ("elu", "ELU", 0.8, lambda x: np.where(x >= 0, x, f32(0.8) * (np.exp(x) - 1))),
        ("softsign", "SOFTSIGN", None, lambda x: x / (1 + np.abs(x))),
        ("softplus", "SOFTPLUS", None, lambda x: np.logaddexp(0, x)),
        ("parametric_softplus", "PARAMETRICSOFTPLUS", [ps_alpha, ps_beta],
         lambda x: ps_alpha[:, None, None] * np.logaddexp(0, ps_beta[:, None, None] * x)),
    ]
    b = layer_net([("x", shape)], [(n, shape) for n, _, _, _ in kinds])
    for name, kind, params, _ in kinds:
        if kind == "PARAMETRICSOFTPLUS":
            params = [params[0].astype(np.float32), params[1].astype(np.float32)]
        elif kind == "PRELU":
            params = params.astype(np.float32)
        b.add_activation(name, kind, "x", name, params=params)
    spec = b.spec
    linear = [l for l in nn_layers(spec) if l.name == "linear"][0].activation.linear
    a, c = float(np.float32(linear.alpha)), float(np.float32(linear.beta))
    kinds[0] = ("linear", "LINEAR", None, lambda x: a * x + c)

    def inputs(r):
        x = r.uniform(-3, 3, shape)
        x[0, 0, :] = [0.0, 0.4, -0.4]  # thresholds and zero
        return {"x": f32(x)}

    cases = run_cases(spec, inputs, lambda v: {n: fn(v["x"]) for n, _, _, fn in kinds}, 4, rng)
    writer.write("activations", spec, NUMPY, cases,
                 "every ActivationParams kind, one output each: linear, ReLU, leaky ReLU, "
                 "thresholded ReLU, PReLU (per channel), tanh, scaled tanh, sigmoid, hard "
                 "sigmoid, ELU, softsign, softplus, parametric softplus (per channel)",
                 RANK5_NOTE + " Formulas from NeuralNetwork.proto: thresholded ReLU keeps x when "
                 "x >= alpha; PReLU/parametric softplus parameters run along C (axis -3); hard "
                 "sigmoid min(max(alpha*x + beta, 0), 1); parameters are float32 values.")


def elementwise_cases(writer):
    rng = np.random.default_rng(9304)
    s = (3, 4, 4)
    b = layer_net([("a", s), ("b", s), ("c", (3, 1, 1)), ("v", (6,)), ("w", (6,))],
                  [("add3", s), ("add_channel", s), ("add_scalar", s), ("mul", s),
                   ("mul_channel", s), ("mul_scalar", s), ("average", s), ("maximum", s),
                   ("minimum", s), ("concat", (6, 4, 4)), ("dot", (1,)), ("cosine", (1,))])
    b.add_elementwise("add3", ["a", "b", "a"], "add3", "ADD")
    b.add_elementwise("add_channel", ["a", "c"], "add_channel", "ADD")
    b.add_elementwise("add_scalar", ["a"], "add_scalar", "ADD", alpha=0.75)
    b.add_elementwise("mul", ["a", "b"], "mul", "MULTIPLY")
    b.add_elementwise("mul_channel", ["a", "c"], "mul_channel", "MULTIPLY")
    b.add_elementwise("mul_scalar", ["b"], "mul_scalar", "MULTIPLY", alpha=-1.5)
    b.add_elementwise("average", ["a", "b", "b"], "average", "AVE")
    b.add_elementwise("maximum", ["a", "b"], "maximum", "MAX")
    b.add_elementwise("minimum", ["a", "b"], "minimum", "MIN")
    b.add_elementwise("concat", ["a", "b"], "concat", "CONCAT")
    b.add_elementwise("dot", ["v", "w"], "dot", "DOT")
    b.add_elementwise("cosine", ["v", "w"], "cosine", "COS")
    spec = b.spec

    def forward(x):
        a, bb, c, v, w = x["a"], x["b"], x["c"], x["v"], x["w"]
        return {"add3": a + bb + a, "add_channel": a + c, "add_scalar": a + 0.75, "mul": a * bb,
                "mul_channel": a * c, "mul_scalar": -1.5 * bb, "average": (a + 2 * bb) / 3,
                "maximum": np.maximum(a, bb), "minimum": np.minimum(a, bb),
                "concat": np.concatenate([a, bb]), "dot": np.array([v @ w]),
                "cosine": np.array([v @ w / np.linalg.norm(v) / np.linalg.norm(w)])}

    def inputs(r):
        return {"a": f32(r.standard_normal(s)), "b": f32(r.standard_normal(s)),
                "c": f32(r.standard_normal((3, 1, 1))), "v": f32(r.standard_normal(6)),
                "w": f32(r.standard_normal(6))}

    cases = run_cases(spec, inputs, forward, 3, rng)
    writer.write("elementwise", spec, NUMPY, cases,
                 "add (3 inputs, [C,1,1] channel broadcast, scalar alpha), multiply (2 inputs, "
                 "channel broadcast, scalar), average (3 inputs), max, min, concat (channels), "
                 "dot product and cosine similarity of [6] vectors",
                 RANK5_NOTE + " The [C, 1, 1] input c broadcasts over H and W (the rank-5 "
                 "add/multiply broadcasting rule); dot/cosine read [6] vectors as [6, 1, 1] and "
                 "give one value, declared [1].")


def reorganize_cases(writer):
    rng = np.random.default_rng(9305)
    s = (4, 3, 4)
    outs = [("flatten_first", (48,)), ("flatten_last", (48,)), ("reshape_first", (3, 2, 8)),
            ("reshape_last", (3, 2, 8)), ("permute", (4, 4, 3)), ("split_a", (2, 3, 4)),
            ("split_b", (2, 3, 4)), ("slice_c", (2, 3, 4)), ("slice_h", (4, 1, 4)),
            ("slice_w", (4, 3, 2)), ("crop", (4, 2, 2)), ("pad_constant", (4, 4, 7)),
            ("pad_reflection", (4, 5, 6)), ("pad_replication", (4, 5, 6)),
            ("upsample_nearest", (4, 6, 12)), ("upsample_bilinear", (4, 6, 8))]
    b = layer_net([("x", s)], outs)
    b.add_flatten("flatten_first", 0, "x", "flatten_first")
    b.add_flatten("flatten_last", 1, "x", "flatten_last")
    b.add_reshape("reshape_first", "x", "reshape_first", (3, 2, 8), 0)
    b.add_reshape("reshape_last", "x", "reshape_last", (3, 2, 8), 1)
    b.add_permute("permute", (0, 1, 3, 2), "x", "permute")
    b.add_split("split", "x", ["split_a", "split_b"])
    b.add_slice("slice_c", "x", "slice_c", "channel", 1, 4, 2)
    b.add_slice("slice_h", "x", "slice_h", "height", 1, -1, 1)
    b.add_slice("slice_w", "x", "slice_w", "width", 0, 5, 3)
    b.add_crop("crop", 1, 1, 0, 1, [], ["x"], "crop")
    b.add_padding("pad_constant", left=2, right=1, top=1, bottom=0, value=0.5,
                  input_name="x", output_name="pad_constant", padding_type="constant")
    b.add_padding("pad_reflection", left=2, right=0, top=1, bottom=1, input_name="x",
                  output_name="pad_reflection", padding_type="reflection")
    b.add_padding("pad_replication", left=2, right=0, top=1, bottom=1, input_name="x",
                  output_name="pad_replication", padding_type="replication")
    b.add_upsample("upsample_nearest", 2, 3, "x", "upsample_nearest", mode="NN")
    b.add_upsample("upsample_bilinear", 2, 2, "x", "upsample_bilinear", mode="BILINEAR")
    spec = b.spec

    def bilinear(x, fh, fw):
        c, h, w = x.shape

        def axis(n, f):
            src = np.minimum(np.arange(n * f) / f, n - 1)  # UPSAMPLE_MODE grid: start 0, end n - n/N
            lo = np.floor(src).astype(int)
            hi = np.minimum(lo + 1, n - 1)
            return lo, hi, src - lo

        (hl, hh, hf), (wl, wh, wf) = axis(h, fh), axis(w, fw)
        top = x[:, hl][:, :, wl] * (1 - wf) + x[:, hl][:, :, wh] * wf
        bot = x[:, hh][:, :, wl] * (1 - wf) + x[:, hh][:, :, wh] * wf
        return top * (1 - hf)[None, :, None] + bot * hf[None, :, None]

    def forward(v):
        x = v["x"]
        o = {"flatten_first": x.reshape(-1), "flatten_last": x.transpose(1, 2, 0).reshape(-1),
             "reshape_first": x.reshape(3, 2, 8),
             "reshape_last": x.transpose(1, 2, 0).reshape(2, 8, 3).transpose(2, 0, 1),
             "permute": x.transpose(0, 2, 1), "split_a": x[:2], "split_b": x[2:],
             "slice_c": x[1:4:2], "slice_h": x[:, 1:2], "slice_w": x[:, :, 0:5:3],
             "crop": x[:, 0:2, 1:3],
             "pad_constant": np.pad(x, ((0, 0), (1, 0), (2, 1)), constant_values=0.5),
             "pad_reflection": np.pad(x, ((0, 0), (1, 1), (2, 0)), mode="reflect"),
             "pad_replication": np.pad(x, ((0, 0), (1, 1), (2, 0)), mode="edge"),
             "upsample_nearest": x.repeat(2, axis=1).repeat(3, axis=2),
             "upsample_bilinear": bilinear(x, 2, 2)}
        return o

    cases = run_cases(spec, lambda r: {"x": f32(r.standard_normal(s))}, forward, 3, rng)
    writer.write("reorganize", spec, NUMPY, cases,
                 "flatten (channel first/last), reshape (channel first/last), permute, split, "
                 "slice (channel/height/width, negative end, stride), crop, padding (constant "
                 "0.5, reflection, replication), upsample (nearest 2x3, bilinear 2x2)",
                 RANK5_NOTE + " permute axis [0, 1, 3, 2] of [Seq, C, H, W] swaps H and W. "
                 "CHANNEL_LAST flatten/reshape: read as [H, W, C], reshape, and back to "
                 "[C, H, W]. Slice end -1 means N - 1 (exclusive). Crop: top 0, bottom 1, left 1, "
                 "right 1. Bilinear upsample: source position = out / factor (UPSAMPLE_MODE "
                 "grid), clamped to the last row/column; nearest repeats each value.")


def normalize_cases(writer):
    rng = np.random.default_rng(9306)
    s = (5, 3, 4)
    b = layer_net([("x", s)], [(n, s) for n in ("softmax", "l2_normalize", "lrn", "mvn_across",
                                                  "mvn_per_channel", "mvn_mean_only", "scale",
                                                  "bias", "batchnorm")])
    scale = rand(rng, 5, scale=1.0)
    shift = rand(rng, 5, scale=1.0)
    bias_hw = rand(rng, 1, 3, 4, scale=1.0)
    gamma, beta, mean = rand(rng, 5, scale=1.0), rand(rng, 5), rand(rng, 5)
    var = rng.uniform(0.5, 2, 5).astype(np.float32)
    b.add_softmax("softmax", "x", "softmax")
    b.add_l2_normalize("l2_normalize", "x", "l2_normalize", epsilon=1e-6)
    b.add_lrn("lrn", "x", "lrn", alpha=0.3, beta=0.75, local_size=3, k=2.0)
    b.add_mvn("mvn_across", "x", "mvn_across", across_channels=True, normalize_variance=True,
              epsilon=1e-5)
    b.add_mvn("mvn_per_channel", "x", "mvn_per_channel", across_channels=False,
              normalize_variance=True, epsilon=1e-5)
    b.add_mvn("mvn_mean_only", "x", "mvn_mean_only", across_channels=False,
              normalize_variance=False, epsilon=1e-5)
    b.add_scale("scale", scale, shift, True, "x", "scale", shape_scale=[5], shape_bias=[5])
    b.add_bias("bias", bias_hw, "x", "bias", shape_bias=[1, 3, 4])
    b.add_batchnorm("batchnorm", 5, gamma, beta, mean, var, "x", "batchnorm", epsilon=1e-3)
    spec = b.spec
    sc = layer_weights(spec, "scale", "scale", (5,))[:, None, None]
    sb = layer_weights(spec, "scale", "bias", (5,))[:, None, None]
    bh = layer_weights(spec, "bias", "bias", (1, 3, 4))
    g, be, mu, va = (layer_weights(spec, "batchnorm", f, (5,))[:, None, None]
                     for f in ("gamma", "beta", "mean", "variance"))
    eps32 = lambda e: float(np.float32(e))

    def forward(v):
        x = v["x"]
        sq = np.pad(x ** 2, ((1, 1), (0, 0), (0, 0)))
        window = sq[:-2] + sq[1:-1] + sq[2:]
        return {"softmax": softmax(x, 0),
                "l2_normalize": x / np.sqrt((x ** 2).sum() + eps32(1e-6)),
                "lrn": x / (2.0 + eps32(0.3) / 3 * window) ** eps32(0.75),
                "mvn_across": (x - x.mean()) / np.sqrt(x.var() + eps32(1e-5)),
                "mvn_per_channel": (x - x.mean(axis=(1, 2), keepdims=True))
                / np.sqrt(x.var(axis=(1, 2), keepdims=True) + eps32(1e-5)),
                "mvn_mean_only": x - x.mean(axis=(1, 2), keepdims=True),
                "scale": x * sc + sb, "bias": x + bh,
                "batchnorm": g * (x - mu) / np.sqrt(va + eps32(1e-3)) + be}

    cases = run_cases(spec, lambda r: {"x": f32(r.standard_normal(s) * 2)}, forward, 3, rng)
    writer.write("normalize", spec, NUMPY, cases,
                 "softmax (over C), L2 normalize, LRN (local size 3, k 2), MVN (across channels, "
                 "per channel, mean only), scale with bias (per channel), bias [1, H, W], "
                 "batchnorm (epsilon 1e-3)",
                 RANK5_NOTE + " L2 normalize: x / sqrt(sum of all C*H*W squares + epsilon). LRN: "
                 "x / (k + alpha/localSize * sum of squares over channels c-1..c+1 (zeros "
                 "outside))^beta. MVN: (x - mean) / sqrt(variance + epsilon), population variance "
                 "over C,H,W (across channels) or H,W per channel. Epsilons are float32 values.")


REDUCE_MODES = ["sum", "avg", "prod", "logsum", "sumsquare", "L1", "L2", "max", "min", "argmax"]
REDUCE_AXES = {"CHW": (0, 1, 2), "HW": (1, 2), "C": (0,), "H": (1,), "W": (2,)}


def unary_reduce_cases(writer):
    rng = np.random.default_rng(9307)
    s = (3, 4, 5)
    unary = [("sqrt", "sqrt", {}, np.sqrt),
             ("rsqrt", "rsqrt", {"epsilon": 1e-4}, lambda x: 1 / np.sqrt(x + float(np.float32(1e-4)))),
             ("inverse", "inverse", {"epsilon": 1e-4}, lambda x: 1 / (x + float(np.float32(1e-4)))),
             ("power", "power", {"alpha": 2.5}, lambda x: x ** 2.5),
             ("exp", "exp", {}, np.exp),
             ("log", "log", {}, np.log),
             ("abs_shifted", "abs", {"shift": -1.0, "scale": 2.0}, lambda x: np.abs(2 * x - 1)),
             ("threshold", "threshold", {"alpha": 0.8}, lambda x: np.maximum(x, f32(0.8)))]
    reduce = []
    axes_cycle = list(REDUCE_AXES)
    for i, mode in enumerate(REDUCE_MODES):
        for axis in (axes_cycle[i % 5], axes_cycle[(i + 2) % 5]):
            if mode == "argmax" and axis not in ("C", "H", "W"):
                axis = {"CHW": "C", "HW": "W"}[axis]
            reduce.append(("reduce_%s_%s" % (mode, axis), mode, axis))
    reduce = list(dict((n, (n, m, a)) for n, m, a in reduce).values())

    def reduced_shape(axis):
        return tuple(1 if i in REDUCE_AXES[axis] else n for i, n in enumerate(s))

    b = layer_net([("x", s)], [(n, s) for n, _, _, _ in unary]
                  + [(n, reduced_shape(a)) for n, _, a in reduce])
    for name, mode, kw, _ in unary:
        b.add_unary(name, "x", name, mode, **kw)
    for name, mode, axis in reduce:
        b.add_reduce(name, "x", name, axis, mode)

    def red(x, mode, axes):
        k = dict(axis=axes, keepdims=True)
        if mode == "argmax":
            return np.argmax(x, axis=axes[0], keepdims=True).astype(np.float64)
        return {"sum": lambda: x.sum(**k), "avg": lambda: x.mean(**k), "prod": lambda: x.prod(**k),
                "logsum": lambda: np.log(x.sum(**k)), "sumsquare": lambda: (x ** 2).sum(**k),
                "L1": lambda: np.abs(x).sum(**k), "L2": lambda: np.sqrt((x ** 2).sum(**k)),
                "max": lambda: x.max(**k), "min": lambda: x.min(**k)}[mode]()

    def forward(v):
        x = v["x"]
        out = {n: fn(x) for n, _, _, fn in unary}
        out.update({n: red(x, m, REDUCE_AXES[a]) for n, m, a in reduce})
        return out

    def inputs(r):  # distinct values 0.025 apart: every arg max is unambiguous
        return {"x": f32(0.3 + 1.5 * r.permutation(60).reshape(s) / 60)}

    cases = run_cases(b.spec, inputs, forward, 3, rng)
    for case in cases:  # arg max must be unambiguous
        x = case["inputs"]["x"]
        for axis in (0, 1, 2):
            top2 = np.sort(x, axis=axis)
            assert (np.take(top2, -1, axis) - np.take(top2, -2, axis)).min() > 1e-4
    writer.write("unary_reduce", b.spec, NUMPY, cases,
                 "unary: sqrt, rsqrt, inverse (epsilon 1e-4), power 2.5, exp, log, abs with "
                 "scale 2 and shift -1, threshold 0.8; reduce: sum, avg, prod, logsum, sumsquare, "
                 "L1, L2, max, min, argmax, each over two of CHW/HW/C/H/W",
                 RANK5_NOTE + " Unary: x <- scale * x + shift first; rsqrt 1/sqrt(x + eps); "
                 "inverse 1/(x + eps); threshold max(alpha, x). Reduce keeps reduced axes as 1 "
                 "(declared shapes); logsum = log(sum x); argmax gives the index as a float. "
                 "Inputs are in [0.3, 1.8] so every function is defined.")


def misc_cases(writer):
    rng = np.random.default_rng(9308)
    vocab, dim = 7, 5
    table = rand(rng, dim, vocab, scale=1.0)
    table_bias = rand(rng, dim)
    constant = rand(rng, 2, 3, 3, scale=1.0)
    b = layer_net([("index", (1,)), ("y", (2, 3, 3))],
                  [("embedding", (dim,)), ("constant_plus_y", (2, 3, 3))])
    b.add_embedding("embedding", table, table_bias, vocab, dim, True, "index", "embedding")
    b.add_load_constant("constant", "constant_out", constant, [2, 3, 3])
    b.add_elementwise("constant_plus_y", ["constant_out", "y"], "constant_plus_y", "ADD")
    spec = b.spec
    t = layer_weights(spec, "embedding", "weights", (dim, vocab))
    tb = layer_weights(spec, "embedding", "bias", (dim,))
    k = layer_weights(spec, "constant", "data", (2, 3, 3))
    cases = []
    for i in (0, 3, 6, 2):
        y = f32(rng.standard_normal((2, 3, 3)))
        cases.append({"inputs": {"index": np.array([float(i)]), "y": y},
                      "outputs": {"embedding": t[:, i] + tb, "constant_plus_y": k + y}})
    writer.write("embedding_constant", spec, NUMPY, cases,
                 "embedding (vocabulary 7, 5 outputs, bias; index given as a float in a [1] "
                 "array), load constant [2, 3, 3] added to an input",
                 RANK5_NOTE + " Embedding weights are [outputChannels, inputDim]: the output is "
                 "column `index` plus the bias.")


def rank_n_cases(writer):
    rng = np.random.default_rng(9309)
    b = layer_net([("x", (2, 3, 4)), ("y", (2, 4, 2)), ("z", (1, 3, 1, 2))],
                  [("inner_product", (2, 3, 5)), ("matmul_weights", (2, 3, 5)),
                   ("matmul_inputs", (2, 3, 2)), ("matmul_transposed", (2, 2, 2)),
                   ("softmax_last", (2, 3, 4)), ("softmax_first", (2, 3, 4)),
                   ("concat", (2, 3, 9)), ("reshape", (6, 4)), ("squeeze", (3, 2)),
                   ("expand_dims", (1, 2, 3, 4, 1)), ("transpose", (4, 2, 3))], rank_n=True)
    wi, bi = rand(rng, 5, 4, scale=0.7), rand(rng, 5)
    wm, bm = rand(rng, 4, 5, scale=0.7), rand(rng, 5)
    b.add_inner_product("inner_product", wi, bi, 4, 5, True, "x", "inner_product")
    b.add_batched_mat_mul("matmul_weights", ["x"], "matmul_weights", weight_matrix_rows=4,
                          weight_matrix_columns=5, W=wm, bias=bm)
    b.add_batched_mat_mul("matmul_inputs", ["x", "y"], "matmul_inputs")
    b.add_batched_mat_mul("matmul_transposed", ["y", "y"], "matmul_transposed",
                          transpose_a=True)
    b.add_softmax_nd("softmax_last", "x", "softmax_last", -1)
    b.add_softmax_nd("softmax_first", "x", "softmax_first", 0)
    b.add_concat_nd("concat", ["x", "inner_product"], "concat", -1)
    b.add_reshape_static("reshape", "x", "reshape", (6, 4))
    b.add_squeeze("squeeze", "z", "squeeze", axes=[0, 2])
    b.add_expand_dims("expand_dims", "x", "expand_dims", axes=[0, -1])
    b.add_transpose("transpose", [2, 0, 1], "x", "transpose")
    spec = b.spec
    assert nn_of(spec).arrayInputShapeMapping == 1
    Wi = layer_weights(spec, "inner_product", "weights", (5, 4))
    Bi = layer_weights(spec, "inner_product", "bias", (5,))
    # batchedMatmul stores its weight matrix transposed: [columns (C_out), rows (C_in)].
    Wm = layer_weights(spec, "matmul_weights", "weights", (5, 4)).T
    Bm = layer_weights(spec, "matmul_weights", "bias", (5,))

    def forward(v):
        x, y, z = v["x"], v["y"], v["z"]
        ip = x @ Wi.T + Bi
        return {"inner_product": ip, "matmul_weights": x @ Wm + Bm, "matmul_inputs": x @ y,
                "matmul_transposed": y.transpose(0, 2, 1) @ y,
                "softmax_last": softmax(x, -1), "softmax_first": softmax(x, 0),
                "concat": np.concatenate([x, ip], -1), "reshape": x.reshape(6, 4),
                "squeeze": z.reshape(3, 2), "expand_dims": x[None, ..., None],
                "transpose": x.transpose(2, 0, 1)}

    def inputs(r):
        return {"x": f32(r.standard_normal((2, 3, 4))), "y": f32(r.standard_normal((2, 4, 2))),
                "z": f32(r.standard_normal((1, 3, 1, 2)))}

    cases = run_cases(spec, inputs, forward, 3, rng)
    writer.write("rank_n", spec, NUMPY, cases,
                 "EXACT_ARRAY_MAPPING (rank-N) layers: innerProduct on rank 3, batchedMatmul "
                 "with weights and bias, with two inputs, with transposeA; softmaxND (axis -1 "
                 "and 0), concatND, reshapeStatic, squeeze, expandDims, transpose",
                 "arrayInputShapeMapping = EXACT_ARRAY_MAPPING: inputs keep their declared rank "
                 "and shape (no rank-5 padding), outputs are in their declared shapes. "
                 "innerProduct weights [C_out, C_in] act on the last axis; batchedMatmul's single-"
                 "input weights are stored [C_out, C_in] (the transpose of the builder's W).")


def rank_n_more_cases(writer):
    """The other rank-N layers converted networks use: broadcastable arithmetic, gelu,
    rank-N reductions, static slices, splits, constants and reshapes."""
    rng = np.random.default_rng(9310)
    const = rand(rng, 1, 3, 4, scale=1.0)
    b = layer_net([("x", (2, 3, 4)), ("y", (3, 1))],
                  [("add", (2, 3, 4)), ("sub", (2, 3, 4)), ("mul", (2, 3, 4)), ("div", (2, 3, 4)),
                   ("max", (2, 3, 4)), ("min", (2, 3, 4)), ("pow", (2, 3, 4)),
                   ("gelu_exact", (2, 3, 4)), ("gelu_tanh", (2, 3, 4)), ("gelu_sigmoid", (2, 3, 4)),
                   ("reduce_sum", (2, 1, 4)), ("reduce_mean", (2, 3)), ("reduce_max", (1, 1, 1)),
                   ("slice", (2, 2, 2)), ("split_a", (2, 3, 1)), ("split_b", (2, 3, 3)),
                   ("with_constant", (2, 3, 4)), ("reshaped", (2, 4, 3))], rank_n=True)
    b.add_add_broadcastable("add", ["x", "y"], "add")
    b.add_subtract_broadcastable("sub", ["x", "y"], "sub")
    b.add_multiply_broadcastable("mul", ["x", "y"], "mul")
    b.add_divide_broadcastable("div", ["x", "add"], "div")
    b.add_max_broadcastable("max", ["x", "y"], "max")
    b.add_min_broadcastable("min", ["x", "y"], "min")
    b.add_unary("abs_x", "x", "abs_x", mode="abs")
    b.add_pow_broadcastable("pow", ["abs_x", "y"], "pow")
    b.add_gelu("gelu_exact", "x", "gelu_exact", mode="EXACT")
    b.add_gelu("gelu_tanh", "x", "gelu_tanh", mode="TANH_APPROXIMATION")
    b.add_gelu("gelu_sigmoid", "x", "gelu_sigmoid", mode="SIGMOID_APPROXIMATION")
    b.add_reduce_sum("reduce_sum", "x", "reduce_sum", axes=[1], keepdims=True)
    b.add_reduce_mean("reduce_mean", "x", "reduce_mean", axes=[-1], keepdims=False)
    b.add_reduce_max("reduce_max", "x", "reduce_max", reduce_all=True, keepdims=True)
    b.add_slice_static("slice", "x", "slice", begin_ids=[0, 1, 0], end_ids=[2, 3, 4], strides=[1, 1, 2],
                       begin_masks=[False, False, False], end_masks=[False, False, False])
    b.add_split_nd("split", "x", ["split_a", "split_b"], axis=-1, split_sizes=[1, 3])
    b.add_load_constant_nd("constant", "constant", const, const.shape)
    b.add_add_broadcastable("with_constant", ["x", "constant"], "with_constant")
    b.add_rank_preserving_reshape("reshaped", "x", "reshaped", (2, 4, 3))
    spec = b.spec
    assert nn_of(spec).arrayInputShapeMapping == 1
    from scipy.special import erf

    def forward(v):
        x, y = v["x"].astype(np.float64), v["y"].astype(np.float64)
        return {"add": x + y, "sub": x - y, "mul": x * y, "div": x / (x + y), "max": np.maximum(x, y),
                "min": np.minimum(x, y), "pow": np.abs(x) ** y,
                "gelu_exact": 0.5 * x * (1 + erf(x / np.sqrt(2))),
                "gelu_tanh": 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
                "gelu_sigmoid": x / (1 + np.exp(-1.702 * x)),
                "reduce_sum": x.sum(axis=1, keepdims=True), "reduce_mean": x.mean(axis=-1),
                "reduce_max": x.max().reshape(1, 1, 1), "slice": x[:, 1:3, 0:4:2],
                "split_a": x[..., :1], "split_b": x[..., 1:],
                "with_constant": x + const.astype(np.float64), "reshaped": x.reshape(2, 4, 3)}

    def inputs(r):
        return {"x": f32(r.standard_normal((2, 3, 4))), "y": f32(r.uniform(0.5, 2.0, (3, 1)))}

    cases = run_cases(spec, inputs, forward, 3, rng)
    writer.write("rank_n_more", spec, NUMPY, cases,
                 "rank-N layers: add/subtract/multiply/divide/max/min/pow broadcastable, gelu (3 modes), "
                 "reduceSum/Mean/Max (axes, keepDims, reduceAll), sliceStatic, splitND, loadConstantND, "
                 "rankPreservingReshape",
                 "EXACT_ARRAY_MAPPING; NumPy broadcasting; gelu's tanh approximation with sqrt(2/pi) and "
                 "0.044715, the sigmoid one x*sigmoid(1.702x).")


def instance_norm_cases(writer):
    """Batch norm computing its statistics from the input (instance normalization)."""
    rng = np.random.default_rng(9311)
    b = layer_net([("x", (3, 4, 5))], [("y", (3, 4, 5))])
    gamma, beta = rand(rng, 3, scale=1.0) + 1, rand(rng, 3)
    b.add_batchnorm("norm", 3, gamma, beta, input_name="x", output_name="y",
                    compute_mean_var=True, instance_normalization=True, epsilon=1e-5)
    spec = b.spec
    G = layer_weights(spec, "norm", "gamma", (3,))
    Bt = layer_weights(spec, "norm", "beta", (3,))

    def forward(v):
        x = v["x"].astype(np.float64)
        mean = x.mean(axis=(1, 2), keepdims=True)
        var = x.var(axis=(1, 2), keepdims=True)
        return {"y": (x - mean) / np.sqrt(var + 1e-5) * G[:, None, None] + Bt[:, None, None]}

    cases = run_cases(spec, lambda r: {"x": f32(r.standard_normal((3, 4, 5)))}, forward, 3, rng)
    writer.write("instance_norm", spec, NUMPY, cases,
                 "batchnorm with computeMeanVar and instanceNormalization: each channel normalized over "
                 "its plane (population variance), then gamma and beta",
                 "Statistics of the input itself, per channel over H x W; epsilon 1e-5 inside the root.")


# ---------------------------------------------------------------------------
# 4. MLP regressor (Fixtures/Models/ArrayRegressor.mlmodel)
# ---------------------------------------------------------------------------

def mlp_regressor_cases(writer):
    spec = load_spec(os.path.join(HERE, "Models", "ArrayRegressor.mlmodel"))
    layers = {l.name: l for l in nn_layers(spec)}
    params = []
    for name in ("dense1", "dense2"):
        p = layers[name].batchedMatmul
        rows, cols = p.weightMatrixFirstDimension, p.weightMatrixSecondDimension
        params.append((nn_weights(p.weights, (cols, rows)).T, nn_weights(p.bias, (cols,))))
    rng = np.random.default_rng(9401)
    cases = []
    for n in (1, 5, 1, 5, 3):
        x = f32(rng.standard_normal((n, 8)))
        h = np.maximum(x @ params[0][0] + params[0][1], 0)
        cases.append({"inputs": {"features": x}, "outputs": {"target": h @ params[1][0] + params[1][1]}})
    writer.write("mlp_regressor", spec, NUMPY, cases,
                 "copy of Fixtures/Models/ArrayRegressor.mlmodel: batchedMatmul 8->16 + ReLU + "
                 "batchedMatmul 16->4, flexible batch N x 8 (cases at N = 1, 5, 3)",
                 "EXACT_ARRAY_MAPPING: the input [N, 8] is used as is (N from the shape range "
                 "1...unbounded); the output target is [N, 4]. batchedMatmul weights are stored "
                 "[C_out, C_in]: y = x W^T + b.")


# ---------------------------------------------------------------------------
# 5. Pipeline: neural network features -> GLM classifier
# ---------------------------------------------------------------------------

def pipeline_cases(writer):
    rng = np.random.default_rng(9501)
    d_in, d_hidden = 6, 8
    w1, b1 = rand(rng, d_hidden, d_in, scale=0.6), rand(rng, d_hidden, scale=0.3)
    nn = NeuralNetworkBuilder([("input", datatypes.Array(d_in))],
                              [("features", datatypes.Array(d_hidden))])
    nn.add_inner_product("dense", w1, b1, d_in, d_hidden, True, "input", "dense_out")
    nn.add_activation("relu", "RELU", "dense_out", "features")
    nn_spec = nn.spec
    W = layer_weights(nn_spec, "dense", "weights", (d_hidden, d_in))
    B = layer_weights(nn_spec, "dense", "bias", (d_hidden,))

    def features(x):
        return np.maximum(x @ W.T + B, 0)

    X = f32(rng.standard_normal((120, d_in)))
    H = features(X)
    labels = np.array(["low", "mid", "high"])
    score = H @ rng.standard_normal(d_hidden)
    y = labels[np.digitize(score, np.quantile(score, [1 / 3, 2 / 3]))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        glm = LogisticRegression(multi_class="ovr", C=10.0).fit(H, y)
        glm_spec = ct.converters.sklearn.convert(
            glm, [("features", datatypes.Array(d_hidden))], "label").get_spec()
    pipe = PipelineClassifier([("input", datatypes.Array(d_in))], list(glm.classes_),
                              output_features=[("label", datatypes.String()),
                                               ("classProbability",
                                                datatypes.Dictionary(datatypes.String()))])
    pipe.add_model(nn_spec)
    pipe.add_model(glm_spec)
    spec = pipe.spec
    spec.description.predictedFeatureName = "label"
    spec.description.predictedProbabilitiesName = "classProbability"
    glm_out = {f.name for f in glm_spec.description.output}
    assert glm_out == {"label", "classProbability"}, glm_out
    rows = list(X[:5]) + [np.zeros(d_in, dtype=np.float64), f32(rng.standard_normal(d_in) * 3)]
    cases = []
    for x in rows:
        x = f32(x)
        h = features(x[None])
        p = glm.predict_proba(h)[0]
        cases.append({"inputs": {"input": x},
                      "outputs": {"label": str(glm.predict(h)[0]),
                                  "classProbability": {str(c): float(v)
                                                       for c, v in zip(glm.classes_, p)}}})
    writer.write("pipeline_features_glm", spec,
                 "%s (inner product + ReLU) and scikit-learn %s LogisticRegression(multi_class="
                 "'ovr').predict/predict_proba" % (NUMPY, sklearn.__version__), cases,
                 "pipelineClassifier as Create ML makes one: neuralNetwork ([6] -> inner product "
                 "-> ReLU -> [8] feature vector) then GLM classifier (3 string classes, one-vs-rest)",
                 "Stage 1 is a plain neuralNetwork with a rank-1 input [6] (RANK5 mapping: "
                 "[1,1,6,1,1]) whose output 'features' [8] feeds the GLM classifier. Stage 2 is "
                 "scikit-learn's one-vs-rest logistic regression as coremltools converts it "
                 "(logistic per class, normalized to sum 1).")


# ---------------------------------------------------------------------------
# 6. ML programs
# ---------------------------------------------------------------------------

MIL_BLOB_DTYPES = {1: np.float16, 2: np.float32, 3: np.uint8, 4: np.int8, 6: np.int16,
                   7: np.uint16, 14: np.int32, 15: np.uint32}
MIL_BLOB_SUBBYTE = {8: (4, True), 9: (1, False), 10: (2, False), 11: (4, False),
                    12: (3, False), 13: (6, False)}


def read_blob(weight_bin, offset, count):
    """One value of MIL blob storage v2: a 64-byte metadata record at `offset` (sentinel
    0xDEADBEEF, data type, sizeInBytes, data offset), then the data. Sub-byte values are
    packed from the least significant bit of each byte."""
    sentinel, dtype = struct.unpack_from("<II", weight_bin, offset)
    assert sentinel == 0xDEADBEEF, hex(sentinel)
    size, data_offset = struct.unpack_from("<QQ", weight_bin, offset + 8)
    raw = weight_bin[data_offset:data_offset + size]
    if dtype in MIL_BLOB_DTYPES:
        values = np.frombuffer(raw, dtype=np.dtype(MIL_BLOB_DTYPES[dtype]).newbyteorder("<"))
        assert values.size == count, (values.size, count)
        return values
    nbits, signed = MIL_BLOB_SUBBYTE[dtype]
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")
    bits = bits[:count * nbits].reshape(count, nbits).astype(np.int64)
    values = bits @ (1 << np.arange(nbits))
    if signed:
        values = np.where(values >= 1 << (nbits - 1), values - (1 << nbits), values)
    return values


def blob_header(weight_bin):
    count, version = struct.unpack_from("<II", weight_bin, 0)
    assert version == 2, version
    return count


class ProgramWeights:
    """The constants of a saved ML program, read from model.mlmodel and weight.bin."""

    def __init__(self, package):
        self.spec = load_spec(package_root_model_path(package))
        self.bin = read_bytes(os.path.join(package, "Data", "com.apple.CoreML", "weights",
                                           "weight.bin"))
        blob_header(self.bin)
        self.ops = {}
        for fn in self.spec.mlProgram.functions.values():
            for block in fn.block_specializations.values():
                for op in block.operations:
                    for out in op.outputs:
                        self.ops[out.name] = op

    def value(self, name):
        """A const's value, or the dense tensor of a constexpr op decoded here."""
        op = self.ops[name]
        if op.type == "const":
            return self.literal(op.attributes["val"])
        args = {k: self.bound(v.arguments[0]) for k, v in op.inputs.items()}
        # iOS16 constexpr ops hold their values as attributes.
        args.update({k: self.literal(v) for k, v in op.attributes.items() if k != "name"})
        if op.type == "constexpr_lut_to_dense":  # iOS18: indices [...], lut [...groups, 2^n, 1]
            idx, lut = args["indices"], args["lut"]
            assert lut.shape[-1] == 1
            out = np.empty(idx.shape)
            groups = lut.shape[:-2]
            gs = [s // g for s, g in zip(idx.shape, groups)]
            for pos in np.ndindex(*idx.shape):
                g = tuple(p // s for p, s in zip(pos, gs))
                out[pos] = lut[g + (idx[pos], 0)]
            return out
        if op.type == "constexpr_blockwise_shift_scale":  # iOS18: scale * (data - offset)
            data, scale = args["data"].astype(np.float64), args["scale"].astype(np.float64)
            offset = args.get("offset")
            reps = [d // s for d, s in zip(data.shape, scale.shape)]
            if offset is not None:
                data = data - np.kron(offset.astype(np.float64), np.ones(reps))
            return data * np.kron(scale, np.ones(reps))
        if op.type == "constexpr_sparse_to_dense" and "shape" not in args:  # iOS18: mask [...] of uint1
            mask, values = args["mask"].astype(bool), args["nonzero_data"].astype(np.float64)
            out = np.zeros(mask.shape)
            out[mask] = values  # row-major order, as the values are stored
            return out
        if op.type == "constexpr_affine_dequantize":  # iOS16: (q - zero_point) * scale on axis
            q = args["quantized_data"].astype(np.float64)
            axis = int(args["axis"])
            shape = [1] * q.ndim
            zp, sc = args["zero_point"].astype(np.float64), args["scale"].astype(np.float64)
            if zp.size > 1:
                zp = zp.reshape([-1 if i == axis else 1 for i in range(q.ndim)])
            if sc.size > 1:
                sc = sc.reshape([-1 if i == axis else 1 for i in range(q.ndim)])
            del shape
            return (q - zp) * sc
        raise ValueError("no decoder for %s" % op.type)

    def literal(self, v):
        t = v.type.tensorType
        shape = tuple(int(d.constant.size) for d in t.dimensions)
        count = int(np.prod(shape)) if shape else 1
        if v.HasField("blobFileValue"):
            data = read_blob(self.bin, v.blobFileValue.offset, count)
            return np.asarray(data).reshape(shape).astype(
                np.float64 if data.dtype.kind == "f" else np.int64)
        imm = v.immediateValue.tensor
        kind = imm.WhichOneof("value")
        if kind == "floats":
            data = np.array(imm.floats.values, dtype=np.float32).astype(np.float64)
        elif kind == "ints":
            data = np.array(imm.ints.values, dtype=np.int64)
        elif kind == "bytes":
            dt = MIL_pb2.DataType.Name(t.dataType)
            if dt in ("FLOAT16",):
                data = np.frombuffer(imm.bytes.values, "<f2").astype(np.float64)
            elif dt in ("INT8", "UINT8"):
                data = np.frombuffer(imm.bytes.values, np.int8 if dt == "INT8" else np.uint8).astype(np.int64)
            else:
                nbits = {"UINT4": 4, "INT4": 4, "UINT2": 2, "UINT1": 1, "UINT3": 3, "UINT6": 6}[dt]
                bits = np.unpackbits(np.frombuffer(imm.bytes.values, np.uint8), bitorder="little")
                data = bits[:count * nbits].reshape(count, nbits).astype(np.int64) @ (1 << np.arange(nbits))
                if dt == "INT4":
                    data = np.where(data >= 8, data - 16, data)
        elif kind == "bools":
            data = np.array(imm.bools.values)
        else:
            raise ValueError(kind)
        return data.reshape(shape)

    def op_types(self):
        return sorted({op.type for op in self.ops.values()})

    def weight_of(self, op_name, arg="weight"):
        """The decoded value feeding `arg` of the op whose output is `op_name`."""
        # With compute precision fp16, coremltools renames each op NAME to NAME_cast_fp16.
        op = self.ops.get(op_name) or self.ops[op_name + "_cast_fp16"]
        return self.bound(op.inputs[arg].arguments[0])

    def bound(self, binding):
        if binding.WhichOneof("binding") == "value":
            return self.literal(binding.value)
        return self.value(binding.name)


def finish_program(prog, target, precision=ct.precision.FLOAT32):
    """Convert without the graph passes that would fold ops away (conv + batch_norm fusion
    and the like), so the saved program holds the ops the fixture is meant to cover."""
    pipeline = ct.PassPipeline.DEFAULT
    pipeline.remove_passes([p for p in pipeline.passes if p.startswith("common::fuse_")])
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        return ct.convert(prog, convert_to="mlprogram", skip_model_load=True,
                          minimum_deployment_target=target, compute_precision=precision,
                          pass_pipeline=pipeline)


def np_linear(x, w, b):
    return x @ w.T + b


def program_mlp_cases(writer):
    rng = np.random.default_rng(9601)
    w1, b1 = rand(rng, 24, 12, scale=0.5), rand(rng, 24)
    w2, b2 = rand(rng, 5, 24, scale=0.5), rand(rng, 5)

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 12))], opset_version=ct.target.iOS15)
    def prog(x):
        h = mb.relu(x=mb.linear(x=x, weight=w1, bias=b1, name="dense1"), name="relu")
        return mb.softmax(x=mb.linear(x=h, weight=w2, bias=b2, name="dense2"), axis=-1, name="probs")

    model = finish_program(prog, ct.target.iOS15)
    path = os.path.join(writer.dir, "program_mlp.mlpackage")
    save_ml_package(model, path)
    pw = ProgramWeights(path)
    W1, B1 = pw.weight_of("dense1"), pw.weight_of("dense1", "bias")
    W2, B2 = pw.weight_of("dense2"), pw.weight_of("dense2", "bias")
    cases = []
    for _ in range(4):
        x = f32(rng.standard_normal((2, 12)))
        cases.append({"inputs": {"x": x}, "outputs": {
            "probs": softmax(np_linear(np.maximum(np_linear(x, W1, B1), 0), W2, B2), -1)}})
    writer.write_package("program_mlp", model, NUMPY, cases,
                         "ML program (iOS15, fp32): linear 12->24, relu, linear 24->5, softmax; "
                         "input [2, 12]",
                         "Weights read back from the package (float32 consts, in weight.bin "
                         "when large) by this script. linear: x W^T + b with W [out, in].")


def program_image_classifier_cases(writer):
    """An ML program classifier with an image input, as coremltools converts one:
    the image's scale and bias become program ops, and a `classify` op ends it."""
    rng = np.random.default_rng(9611)
    wc, bc = rand(rng, 4, 3, 3, 3, scale=0.4), rand(rng, 4)
    wl, bl = rand(rng, 3, 4, scale=0.8), rand(rng, 3)
    labels = ["sky", "grass", "sand"]

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 3, 10, 12))], opset_version=ct.target.iOS15)
    def prog(image):
        h = mb.relu(x=mb.conv(x=image, weight=wc, bias=bc, pad_type="same", name="conv"), name="relu")
        h = mb.reduce_mean(x=h, axes=[2, 3], keep_dims=False, name="pool")
        return mb.softmax(x=mb.linear(x=h, weight=wl, bias=bl, name="fc"), axis=-1, name="probs")

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        model = ct.convert(prog, convert_to="mlprogram", skip_model_load=True,
                           minimum_deployment_target=ct.target.iOS15, compute_precision=ct.precision.FLOAT32,
                           inputs=[ct.ImageType(name="image", shape=(1, 3, 10, 12), scale=1 / 255.0,
                                                bias=[-0.5, -0.5, -0.5], color_layout=ct.colorlayout.RGB)],
                           classifier_config=ct.ClassifierConfig(labels))
    path = os.path.join(writer.dir, "program_image_classifier.mlpackage")
    save_ml_package(model, path)
    cases = []
    for _ in range(4):
        pixels = rng.integers(0, 256, size=(10, 12, 3), dtype=np.uint8)
        x = (pixels.astype(np.float64) / 255.0 - 0.5).transpose(2, 0, 1)[None].astype(np.float32)
        h = np.maximum(np_conv_nchw(x.astype(np.float64), wc.astype(np.float64), bc.astype(np.float64), pads=(1, 1, 1, 1)), 0)
        probs = softmax(np_linear(h.mean(axis=(2, 3)), wl.astype(np.float64), bl.astype(np.float64)), -1)[0]
        order = np.sort(probs)
        if order[-1] - order[-2] < 1e-3:
            continue
        cases.append({"inputs": {"image": image_value(pixels)},
                      "outputs": {"classLabel": labels[int(np.argmax(probs))],
                                  "classLabel_probs": {l: float(p) for l, p in zip(labels, probs)}}})
    writer.write_package("program_image_classifier", model, NUMPY, cases,
                         "ML program classifier (iOS15) on a 12x10 RGB image: scale 1/255 and bias -0.5 "
                         "as program ops, conv 3x3 same, relu, mean over H and W, linear, softmax, classify",
                         "The image's bytes, times 1/255, minus 0.5, in RGB order as [1, 3, H, W]; the "
                         "label and probabilities are those of the classify op coremltools adds.")


def np_conv_nchw(x, w, b, stride=(1, 1), pads=(0, 0, 0, 0), groups=1):
    return np.stack([conv2d(xi, w, b, stride=stride, pads=pads, groups=groups) for xi in x])


def cnn_program(rng):
    wc1, bc1 = rand(rng, 6, 3, 3, 3, scale=0.4), rand(rng, 6)
    gamma, beta = (1 + rand(rng, 6)), rand(rng, 6)
    mean, var = rand(rng, 6), rng.uniform(0.5, 1.5, 6).astype(np.float32)
    wc2 = rand(rng, 8, 6, 3, 3, scale=0.3)
    wl, bl = rand(rng, 4, 8 * 2 * 2, scale=0.4), rand(rng, 4)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 3, 12, 12))], opset_version=ct.target.iOS15)
    def prog(image):
        h = mb.conv(x=image, weight=wc1, bias=bc1, pad_type="same", name="conv1")
        h = mb.batch_norm(x=h, mean=mean, variance=var, gamma=gamma, beta=beta, epsilon=1e-5,
                          name="bn1")
        h = mb.relu(x=h, name="relu1")
        h = mb.max_pool(x=h, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid", name="pool1")
        h = mb.conv(x=h, weight=wc2, strides=[1, 1], pad_type="custom", pad=[1, 0, 1, 0],
                    name="conv2")
        h = mb.relu(x=h, name="relu2")
        h = mb.avg_pool(x=h, kernel_sizes=[3, 3], strides=[2, 2], pad_type="valid",
                        exclude_padding_from_average=True, name="pool2")
        h = mb.reshape(x=h, shape=[1, 32], name="flatten")
        h = mb.linear(x=h, weight=wl, bias=bl, name="fc")
        return mb.softmax(x=h, axis=-1, name="probs")

    return prog


def cnn_reference(pw):
    W1, B1 = pw.weight_of("conv1"), pw.weight_of("conv1", "bias")
    bn = {k: pw.weight_of("bn1", k) for k in ("mean", "variance", "gamma", "beta")}
    W2 = pw.weight_of("conv2")
    WL, BL = pw.weight_of("fc"), pw.weight_of("fc", "bias")

    def forward(x):
        h = conv2d(x[0], W1, B1, pads=(1, 1, 1, 1))
        h = (h - bn["mean"][:, None, None]) / np.sqrt(bn["variance"][:, None, None]
                                                     + float(np.float32(1e-5)))
        h = h * bn["gamma"][:, None, None] + bn["beta"][:, None, None]
        h = pool2d(np.maximum(h, 0), "MAX", (2, 2), (2, 2))
        h = np.maximum(conv2d(h, W2, None, pads=(1, 0, 1, 0)), 0)
        h = pool2d(h, "AVG", (3, 3), (2, 2))
        return softmax(np_linear(h.reshape(1, 32), WL, BL), -1)

    return forward


def program_cnn_cases(writer):
    for name, precision, tol, seed in (("program_cnn", ct.precision.FLOAT32, 1e-4, 9602),
                                       ("program_fp16", ct.precision.FLOAT16, 1e-2, 9602)):
        rng = np.random.default_rng(seed)
        model = finish_program(cnn_program(rng), ct.target.iOS15, precision)
        path = os.path.join(writer.dir, name + ".mlpackage")
        save_ml_package(model, path)
        pw = ProgramWeights(path)
        forward = cnn_reference(pw)
        cases = []
        for _ in range(4):
            x = f32(rng.standard_normal((1, 3, 12, 12)))
            cases.append({"inputs": {"image": x}, "outputs": {"probs": forward(x)}})
        fp16 = precision == ct.precision.FLOAT16
        writer.write_package(
            name, model, NUMPY, cases,
            "ML program (iOS15, %s): conv same + batch_norm + relu + max_pool, conv custom pad "
            "[1,0,1,0] + relu, avg_pool, reshape, linear, softmax; input [1, 3, 12, 12]"
            % ("compute precision fp16" if fp16 else "fp32"),
            ("Conv pad order [top, bottom, left, right]; same padding puts the extra row at the "
             "end. Weights read back from the package by this script. " +
             ("The program computes in float16 (fp16 consts and casts inserted by coremltools, "
              "float32 input/output); the reference is float64 with the fp16 weights as stored, "
              "so the tolerance is 1e-2." if fp16 else "")).strip(), tolerance=tol)


def gelu(x):
    from math import erf
    return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))


def program_ops_cases(writer):
    rng = np.random.default_rng(9603)
    gamma_ln, beta_ln = 1 + rand(rng, 4), rand(rng, 4)
    gamma_in, beta_in = 1 + rand(rng, 2), rand(rng, 2)
    mat = rand(rng, 4, 5, scale=1.0)
    idx = np.array([3, 0, 3, 1, 2], dtype=np.int32)

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3, 4)), mb.TensorSpec(shape=(2, 3, 4))],
                opset_version=ct.target.iOS16)
    def prog(a, b):
        pos = mb.add(x=mb.abs(x=b), y=np.float32(0.5))
        outs = [
            mb.add(x=a, y=b, name="add"), mb.sub(x=a, y=b, name="sub"),
            mb.mul(x=a, y=b, name="mul"), mb.real_div(x=a, y=pos, name="real_div"),
            mb.maximum(x=a, y=b, name="maximum"), mb.minimum(x=a, y=b, name="minimum"),
            mb.pow(x=pos, y=a, name="pow"),
            mb.gelu(x=a, mode="EXACT", name="gelu"), mb.silu(x=a, name="silu"),
            mb.sigmoid(x=a, name="sigmoid"), mb.tanh(x=a, name="tanh"),
            mb.elu(x=a, alpha=0.7, name="elu"), mb.leaky_relu(x=a, alpha=0.1, name="leaky_relu"),
            mb.clip(x=a, alpha=-0.5, beta=0.8, name="clip"),
            mb.softmax(x=a, axis=1, name="softmax"),
            mb.reduce_mean(x=a, axes=[-1], keep_dims=True, name="reduce_mean"),
            mb.reduce_sum(x=a, axes=[0, 2], keep_dims=False, name="reduce_sum"),
            mb.reduce_max(x=a, axes=[1], keep_dims=False, name="reduce_max"),
            mb.transpose(x=a, perm=[2, 0, 1], name="transpose"),
            mb.concat(values=[a, b], axis=1, name="concat"),
            mb.slice_by_index(x=a, begin=[0, 1, 0], end=[2, 3, 4], stride=[1, 1, 2],
                              name="slice_by_index"),
            mb.pad(x=a, pad=[0, 0, 1, 0, 2, 1], mode="constant", constant_val=0.25, name="pad"),
            mb.pad(x=a, pad=[0, 0, 1, 1, 1, 2], mode="reflect", name="pad_reflect"),
            mb.gather(x=a, indices=idx, axis=-1, name="gather"),
            mb.layer_norm(x=a, axes=[-1], gamma=gamma_ln, beta=beta_ln, epsilon=1e-5,
                          name="layer_norm"),
            mb.instance_norm(x=mb.expand_dims(x=a, axes=[0]), gamma=gamma_in, beta=beta_in,
                             epsilon=1e-5, name="instance_norm"),
            mb.squeeze(x=mb.slice_by_index(x=a, begin=[0, 0, 0], end=[1, 3, 4]), axes=[0],
                       name="squeeze"),
            mb.expand_dims(x=a, axes=[1], name="expand_dims"),
            mb.cast(x=mb.mul(x=a, y=np.float32(3.0)), dtype="int32", name="cast"),
            mb.matmul(x=a, y=mat, name="matmul"),
            mb.upsample_nearest_neighbor(x=a, scale_factor_height=2, scale_factor_width=3,
                                         name="upsample_nearest_neighbor"),
        ]
        split = mb.split(x=a, num_splits=2, axis=-1, name="split")
        outs += [mb.identity(x=split[0], name="split_0"), mb.identity(x=split[1], name="split_1")]
        return tuple(outs)

    model = finish_program(prog, ct.target.iOS16)
    path = os.path.join(writer.dir, "program_ops.mlpackage")
    save_ml_package(model, path)
    pw = ProgramWeights(path)
    out_names = [f.name for f in pw.spec.description.output]
    g_ln, b_ln = pw.weight_of("layer_norm", "gamma"), pw.weight_of("layer_norm", "beta")
    g_in, b_in = pw.weight_of("instance_norm", "gamma"), pw.weight_of("instance_norm", "beta")
    M = pw.weight_of("matmul", "y")

    def forward(a, b):
        pos = np.abs(b) + 0.5
        mu = a.mean(-1, keepdims=True)
        ln = (a - mu) / np.sqrt(a.var(-1, keepdims=True) + float(np.float32(1e-5))) * g_ln + b_ln
        im = a.mean((1, 2), keepdims=True)
        inorm = ((a - im) / np.sqrt(a.var((1, 2), keepdims=True) + float(np.float32(1e-5)))
                 * g_in[:, None, None] + b_in[:, None, None])[None]
        sig = 1 / (1 + np.exp(-a))
        return {"add": a + b, "sub": a - b, "mul": a * b, "real_div": a / pos,
                "maximum": np.maximum(a, b), "minimum": np.minimum(a, b), "pow": pos ** a,
                "gelu": gelu(a), "silu": a * sig, "sigmoid": sig, "tanh": np.tanh(a),
                "elu": np.where(a > 0, a, float(np.float32(0.7)) * (np.exp(a) - 1)),
                "leaky_relu": np.where(a >= 0, a, float(np.float32(0.1)) * a),
                "clip": np.clip(a, -0.5, float(np.float32(0.8))), "softmax": softmax(a, 1),
                "reduce_mean": a.mean(-1, keepdims=True), "reduce_sum": a.sum((0, 2)),
                "reduce_max": a.max(1), "transpose": a.transpose(2, 0, 1),
                "concat": np.concatenate([a, b], 1), "slice_by_index": a[:, 1:3, 0:4:2],
                "pad": np.pad(a, ((0, 0), (1, 0), (2, 1)), constant_values=0.25),
                "pad_reflect": np.pad(a, ((0, 0), (1, 1), (1, 2)), mode="reflect"),
                "gather": a[..., idx], "layer_norm": ln, "instance_norm": inorm, "squeeze": a[0],
                "expand_dims": a[:, None], "cast": np.trunc(a * 3).astype(np.int64),
                "matmul": a @ M, "upsample_nearest_neighbor": a.repeat(2, 1).repeat(3, 2),
                "split_0": a[..., :2], "split_1": a[..., 2:]}

    cases = []
    for _ in range(3):
        a, b = f32(rng.standard_normal((2, 3, 4)) * 1.5), f32(rng.standard_normal((2, 3, 4)))
        a[np.abs(a * 3 - np.round(a * 3)) < 0.02] += 0.05  # keep the int32 cast away from ties
        out = forward(a, b)
        assert set(out) == set(out_names), set(out) ^ set(out_names)
        cases.append({"inputs": {"a": a, "b": b}, "outputs": out})
    writer.write_package("program_ops", model, NUMPY, cases,
                         "ML program (iOS16, fp32), one output per op: add, sub, mul, real_div, "
                         "maximum, minimum, pow, gelu (exact), silu, sigmoid, tanh, elu, "
                         "leaky_relu, clip, softmax, reduce_mean/sum/max, transpose, concat, "
                         "split, slice_by_index, pad (constant, reflect), gather, layer_norm, "
                         "instance_norm, squeeze, expand_dims, cast to int32, matmul, "
                         "upsample_nearest_neighbor",
                         "Outputs are named after the op that makes them. pad lists [before, "
                         "after] per axis. cast fp32 -> int32 truncates toward zero (inputs kept "
                         "away from ties); the int32 output is given as integers. gelu mode EXACT "
                         "uses erf. instance_norm normalizes over H, W of [1, C, H, W].")


def compressed_program(writer, name, target, compress, checks, note, seed):
    rng = np.random.default_rng(seed)
    w1, b1 = rand(rng, 32, 64, scale=0.3), rand(rng, 32)
    w2, b2 = rand(rng, 8, 32, scale=0.3), rand(rng, 8)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 64))], opset_version=target)
    def prog(x):
        h = mb.relu(x=mb.linear(x=x, weight=w1, bias=b1, name="dense1"), name="relu")
        return mb.linear(x=h, weight=w2, bias=b2, name="dense2")

    model = finish_program(prog, target)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        model = compress(model)
    path = os.path.join(writer.dir, name + ".mlpackage")
    save_ml_package(model, path)
    pw = ProgramWeights(path)
    types = pw.op_types()
    W1, B1 = pw.weight_of("dense1"), pw.weight_of("dense1", "bias")
    W2, B2 = pw.weight_of("dense2"), pw.weight_of("dense2", "bias")
    assert not np.allclose(W1, w1, atol=1e-6), "weights were not compressed"
    # Sanity of the decoding: close to the original weights (each within one quantization
    # step of its range) and strongly correlated with them.
    for dense, orig in ((W1, w1), (W2, w2)):
        assert np.corrcoef(dense.reshape(-1), orig.reshape(-1))[0, 1] > 0.75, name
        assert np.abs(dense - orig).max() <= np.ptp(orig) / 3 + 1e-6, name
    cases = []
    out = pw.spec.description.output[0].name
    inp = pw.spec.description.input[0].name
    for _ in range(4):
        x = f32(rng.standard_normal((1, 64)))
        cases.append({"inputs": {inp: x},
                      "outputs": {out: np_linear(np.maximum(np_linear(x, W1, B1), 0), W2, B2)}})
    writer.write_package(name, model, NUMPY, cases, checks + " (ops: %s)" % ", ".join(types),
                         note)


def program_compressed_cases(writer):
    opt = ct.optimize.coreml
    for nbits in (4, 2):
        def palettize(model, nbits=nbits):
            cfg = opt.OptimizationConfig(global_config=opt.OpPalettizerConfig(
                mode="uniform", nbits=nbits, weight_threshold=32))
            return opt.palettize_weights(model, cfg)
        compressed_program(
            writer, "program_palettized_%dbit" % nbits, ct.target.iOS18, palettize,
            "ML program (iOS18): linear 64->32, relu, linear 32->8 with %d-bit palettized "
            "weights (constexpr_lut_to_dense, one %d-entry table per weight)" % (nbits, 1 << nbits),
            "The reference uses the weights decoded by this script from weight.bin (MIL blob "
            "storage v2: 64-byte file header, then for each blob a 64-byte metadata record: "
            "sentinel 0xDEADBEEF, data type, sizeInBytes, data offset), not the original float "
            "weights: the indices are UInt%d values packed from the least significant bit of "
            "each byte, the table is fp32 [1, 1, %d, 1]; dense[i, j] = lut[indices[i, j]]."
            % (nbits, 1 << nbits), 9604 + nbits)

    def blockwise(model):
        cfg = opt.OptimizationConfig(global_config=opt.OpLinearQuantizerConfig(
            mode="linear_symmetric", dtype="int4", granularity="per_block", block_size=32,
            weight_threshold=32))
        return opt.linear_quantize_weights(model, cfg)

    compressed_program(
        writer, "program_int4_blockwise", ct.target.iOS18, blockwise,
        "ML program (iOS18): linear 64->32, relu, linear 32->8 with int4 weights, one scale per "
        "block of 32 input values (constexpr_blockwise_shift_scale)",
        "The reference uses the weights decoded by this script from weight.bin (MIL blob "
        "storage v2 records, see program_palettized_4bit): Int4 data packed two per byte from the "
        "least significant bit, sign-extended; dense = scale[i, j / 32] * data[i, j] (symmetric: "
        "no offset).", 9610)

    def pruned(model):
        cfg = opt.OptimizationConfig(global_config=opt.OpMagnitudePrunerConfig(
            target_sparsity=0.5, weight_threshold=32))
        return opt.prune_weights(model, cfg)

    compressed_program(
        writer, "program_pruned", ct.target.iOS18, pruned,
        "ML program (iOS18): linear 64->32, relu, linear 32->8 with half the weights pruned "
        "(constexpr_sparse_to_dense: a one-bit mask and the non-zero values)",
        "The reference uses the weights decoded by this script from weight.bin: the mask is UInt1 "
        "packed from the least significant bit; the non-zero values fill the set positions in "
        "row-major order, zeros elsewhere.", 9612)

    def int8(model):
        cfg = opt.OptimizationConfig(global_config=opt.OpLinearQuantizerConfig(
            mode="linear", dtype="int8", granularity="per_channel", weight_threshold=32))
        return opt.linear_quantize_weights(model, cfg)

    compressed_program(
        writer, "program_int8", ct.target.iOS16, int8,
        "ML program (iOS16): linear 64->32, relu, linear 32->8 with per-channel int8 weights and "
        "zero points (constexpr_affine_dequantize)",
        "The reference uses the weights decoded by this script from the saved package: "
        "dense = (quantized_data - zero_point) * scale along the op's axis (per output channel).",
        9611)


# ---------------------------------------------------------------------------
# Quantized neural-network weights beyond the image classifier copies
# ---------------------------------------------------------------------------

def quantized_dense_cases(writer):
    rng = np.random.default_rng(9701)
    b = NeuralNetworkBuilder([("x", datatypes.Array(16))], [("y", datatypes.Array(5))])
    b.add_inner_product("dense1", rand(rng, 12, 16, scale=0.5), rand(rng, 12), 16, 12, True,
                        "x", "h")
    b.add_activation("relu", "RELU", "h", "h_relu")
    b.add_inner_product("dense2", rand(rng, 5, 12, scale=0.5), rand(rng, 5), 12, 5, True,
                        "h_relu", "y")
    base = b.spec
    inputs = [f32(rng.standard_normal(16)) for _ in range(4)]
    variants = [("dense_fp16", 16, None, "float16 weights (WeightParams.float16Value)"),
                ("dense_linear_4bit", 4, "linear",
                 "4-bit linear quantization: w = scale[c] * q + bias[c] per output channel"),
                ("dense_kmeans_lut_3bit", 3, "kmeans_lut", "3-bit look-up table (k-means): w = lut[q]"),
                ("dense_linear_lut_2bit", 2, "linear_lut", "2-bit look-up table (linear): w = lut[q]")]
    for name, nbits, mode, what in variants:
        model = ct.models.MLModel(copy_spec(base), skip_model_load=True)
        # coremltools 9.0 with NumPy 2: skip the optional layer fusion (as generate.py does)
        # and flatten the k-means table it returns as a column (a float field refuses it).
        original = quantization_utils._optimize_nn
        kmeans = quantization_utils._get_kmeans_lookup_table_and_weight
        quantization_utils._optimize_nn = lambda layers: None

        def flat_kmeans(*args, **kwargs):
            lut, codes = kmeans(*args, **kwargs)
            return np.asarray(lut, dtype=np.float32).reshape(-1), codes
        quantization_utils._get_kmeans_lookup_table_and_weight = flat_kmeans
        try:
            with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if nbits == 16:
                    q = quantization_utils.quantize_weights(model, nbits=16)
                else:
                    q = quantization_utils.quantize_weights(model, nbits=nbits,
                                                            quantization_mode=mode)
        finally:
            quantization_utils._optimize_nn = original
            quantization_utils._get_kmeans_lookup_table_and_weight = kmeans
        spec = q.get_spec() if hasattr(q, "get_spec") else q
        W1 = layer_weights(spec, "dense1", "weights", (12, 16))
        B1 = layer_weights(spec, "dense1", "bias", (12,))
        W2 = layer_weights(spec, "dense2", "weights", (5, 12))
        B2 = layer_weights(spec, "dense2", "bias", (5,))
        cases = [{"inputs": {"x": x}, "outputs": {"y": np.maximum(x @ W1.T + B1, 0) @ W2.T + B2}}
                 for x in inputs]
        writer.write(name, spec, NUMPY, cases,
                     "neuralNetwork [16] -> inner product 12 -> ReLU -> inner product 5 with %s "
                     "(%s)" % (what, ", ".join(weight_form(spec))),
                     RANK5_NOTE + " The reference uses the dequantized weights decoded by this "
                     "script from the saved specification (not the original float weights): "
                     "rawValue holds numberOfBits per value, written most significant bit first "
                     "into a stream that fills each byte from its most significant bit; linear: "
                     "scale * q + bias (one value, or one per output channel = weight row); "
                     "look-up table: the table entry q.")


# ---------------------------------------------------------------------------

def write_readme(out_dir, entries):
    path = os.path.join(out_dir, "Parity", "README.md")
    text = read_bytes(path).decode() if os.path.exists(path) else "# Parity fixtures\n"
    if README_HEADING in text:
        text = text[:text.index(README_HEADING)].rstrip("\n") + "\n"
    lines = [
        "", README_HEADING, "",
        "Made by `Fixtures/network_parity.py` (also run by `Fixtures/generate.py`), in "
        "`Networks/`: neural networks (`NAME.mlmodel`) and ML programs (`NAME.mlpackage`) with "
        "the same JSON format. Image inputs are objects `{\"width\", \"height\", \"pixelFormat\": "
        "\"rgb\", \"pixels\"}` (bytes row by row, 3 per pixel); the network sees [3, H, W] in RGB "
        "order, byte * channelScale + the channel's bias. Multi-array outputs are given in their "
        "declared shape. Weights are always taken from the saved model and decoded by the "
        "script itself (float16, quantized bits, look-up tables, MIL blob storage), so "
        "compressed models are compared with their dequantized weights. Each file's `note` "
        "states the layer semantics it relies on.", ""]
    for name, kind, reference, count, checks in entries:
        lines.append("- `Networks/%s.json` (%s, %d cases, %s): %s" % (name, kind, count, reference, checks))
    write_bytes(path, (text + "\n".join(lines) + "\n").encode())


def generate(out_dir):
    writer = Writer(out_dir)
    if os.path.isdir(writer.dir):
        shutil.rmtree(writer.dir)
    os.makedirs(writer.dir)
    self_check_kernels()
    image_classifier_cases(writer)
    mlp_regressor_cases(writer)
    pipeline_cases(writer)
    mobilenet_cases(writer)
    convolution_cases(writer)
    pooling_cases(writer)
    activation_cases(writer)
    elementwise_cases(writer)
    normalize_cases(writer)
    reorganize_cases(writer)
    unary_reduce_cases(writer)
    misc_cases(writer)
    rank_n_cases(writer)
    rank_n_more_cases(writer)
    instance_norm_cases(writer)
    quantized_dense_cases(writer)
    program_mlp_cases(writer)
    program_cnn_cases(writer)
    program_ops_cases(writer)
    program_compressed_cases(writer)
    program_image_classifier_cases(writer)
    write_readme(out_dir, writer.entries)
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(writer.dir) for f in fs)
    assert total <= MAX_TOTAL_BYTES, total
    return writer.entries


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=HERE, help="output folder (default: %(default)s)")
    args = parser.parse_args(argv)
    entries = generate(os.path.abspath(args.out))
    print("wrote %d network parity case files to %s"
          % (len(entries), os.path.join(os.path.abspath(args.out), SUBDIR)))


if __name__ == "__main__":
    sys.exit(main())
