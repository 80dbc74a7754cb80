#!/usr/bin/env python3
"""Generate the Core ML fixture files that modelc's tests read.

Usage:
    generate.py [--out DIR]                 write Models/, Broken/ and index.json
                                            (default DIR: the folder of this script)
    generate.py --large PATH [--megabytes 80] [--layers N]
                                            write one large float32 neural network
                                            (.mlmodel) for benchmarks; not indexed
    generate.py --large-program PATH [--megabytes 80]
                                            write one large float32 ML program
                                            (.mlpackage) for benchmarks; not indexed

Everything is deterministic: fixed random seeds, deterministic protobuf
serialization, no dates, stable package identifiers. Running the script twice
gives byte-identical files.

Models/ holds valid models made with coremltools (see Scripts/requirements.txt for the
pinned versions). Broken/ holds bad inputs, most of them hand-made in protobuf
wire format. index.json describes every file with facts read back from the
saved bytes by the Python protobuf classes of coremltools, so that modelc's
own reader can be checked against a second, independent implementation.

coremltools runs on Linux without its native Core ML bindings: it prints
"Failed to load _MLModelProxy" warnings, and nothing here ever calls
`.predict` or needs a compiled model.
"""

import argparse
import json
import os
import shutil
import struct
import sys
import uuid
import warnings
import zlib

os.environ.setdefault("TQDM_DISABLE", "1")  # the MIL converter's progress bars

import numpy as np

import coremltools as ct
import coremltools.optimize.coreml as cto
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import types as mil_types
from coremltools.models import datatypes
from coremltools.models import array_feature_extractor
from coremltools.models.neural_network import NeuralNetworkBuilder
from coremltools.models.neural_network import flexible_shape_utils
from coremltools.models.neural_network import quantization_utils
from coremltools.models.neural_network.update_optimizer_utils import SgdParams
from coremltools.proto import FeatureTypes_pb2
from coremltools.proto import MIL_pb2
from coremltools.proto import Model_pb2
from coremltools.proto import NeuralNetwork_pb2

from sklearn.ensemble import RandomForestClassifier
from sklearn.feature_extraction import DictVectorizer
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import Normalizer, StandardScaler
from sklearn.svm import SVC, SVR
from sklearn.tree import DecisionTreeRegressor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import parity  # noqa: E402  (Fixtures/parity.py: the runtime parity fixtures)
import network_parity  # noqa: E402  (Fixtures/network_parity.py: neural network and ML program parity fixtures)
import detection  # noqa: E402  (Fixtures/detection.py: the object detector and NMS fixtures)
import conformance_regressions  # noqa: E402  (Fixtures/conformance_regressions.py: one model per defect of issue 25)
import network_lowering  # noqa: E402  (Fixtures/network_lowering.py: layers only the tensor engine's lowering runs)
import model_references  # noqa: E402  (Fixtures/model_references.py: references for the networks of Fixtures/Models)

# Field numbers of Model.proto / Pipeline (checked against Model_pb2 at run time).
MODEL_SPECIFICATION_VERSION = 1
MODEL_DESCRIPTION = 2
MODEL_PIPELINE = 202
PIPELINE_MODELS = 1
UNKNOWN_MODEL_TYPE_FIELD = 9999
DEEP_NESTING_LEVELS = 50000

# Stable namespace for the identifiers in Manifest.json (instead of random UUIDs).
MANIFEST_NAMESPACE = uuid.UUID("6d6f6465-6c63-4669-7874-757265730000")

# coremltools writes the day of conversion into the metadata; drop it so the
# output does not depend on the date.
VOLATILE_METADATA_KEYS = ("com.github.apple.coremltools.conversion_date",)

WEIGHT_PARAMS = NeuralNetwork_pb2.WeightParams.DESCRIPTOR.full_name


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------

def check_field_numbers():
    model = Model_pb2.Model.DESCRIPTOR.fields_by_name
    assert model["specificationVersion"].number == MODEL_SPECIFICATION_VERSION
    assert model["description"].number == MODEL_DESCRIPTION
    assert model["pipeline"].number == MODEL_PIPELINE
    assert Model_pb2.Pipeline.DESCRIPTOR.fields_by_name["models"].number == PIPELINE_MODELS
    assert UNKNOWN_MODEL_TYPE_FIELD not in Model_pb2.Model.DESCRIPTOR.fields_by_number


def serialize(spec):
    for key in VOLATILE_METADATA_KEYS:
        if key in spec.description.metadata.userDefined:
            del spec.description.metadata.userDefined[key]
    return spec.SerializeToString(deterministic=True)


def write_bytes(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o644)


def save_spec(spec, path):
    write_bytes(path, serialize(spec))


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def parse_model(data):
    spec = Model_pb2.Model()
    spec.ParseFromString(data)
    return spec


def rand(rng, *shape, scale=0.1):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def as_spec(model):
    return model.get_spec() if hasattr(model, "get_spec") else model


def quiet_sklearn_convert(model, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return as_spec(ct.converters.sklearn.convert(model, *args, **kwargs))


def set_metadata(spec, short, author="modelc fixtures", license_="MIT",
                 version="1.0", user=None):
    md = spec.description.metadata
    md.shortDescription = short
    md.author = author
    md.license = license_
    md.versionString = version
    for k, v in (user or {}).items():
        md.userDefined[k] = v


def describe_features(spec, descriptions):
    for feature in list(spec.description.input) + list(spec.description.output):
        if feature.name in descriptions:
            feature.shortDescription = descriptions[feature.name]


# ---------------------------------------------------------------------------
# Protobuf wire format, by hand (for the hostile files)
# ---------------------------------------------------------------------------

def varint(n):
    assert n >= 0
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def tag(field, wire_type):
    return varint((field << 3) | wire_type)


def len_field(field, payload):
    return tag(field, 2) + varint(len(payload)) + payload


def varint_field(field, value):
    return tag(field, 0) + varint(value)


# ---------------------------------------------------------------------------
# Valid models
# ---------------------------------------------------------------------------

CLASS_NAMES = ["cat", "dog", "bird"]


def add_classifier_head(builder, rng, previous, channels, features, labels):
    """Global average pool, flatten (to `features`), inner product, softmax and
    the class labels of an RGB image classifier whose input is scaled by 1/255."""
    builder.add_pooling(
        name="global_pool", height=1, width=1, stride_height=1, stride_width=1,
        layer_type="AVERAGE", padding_type="VALID",
        input_name=previous, output_name="global_pool_out", is_global=True)
    builder.add_flatten("flatten", 0, "global_pool_out", features)
    builder.add_inner_product(
        name="fc", W=rand(rng, len(labels), channels), b=rand(rng, len(labels)),
        input_channels=channels, output_channels=len(labels), has_bias=True,
        input_name=features, output_name="fc_out")
    builder.add_softmax("softmax", "fc_out", "classLabelProbs")
    builder.set_class_labels(labels, predicted_feature_name="classLabel",
                             prediction_blob="classLabelProbs")
    builder.set_pre_processing_parameters(
        image_input_names=["image"], is_bgr=False, image_scale=1.0 / 255.0)


def build_image_classifier():
    rng = np.random.default_rng(1001)
    builder = NeuralNetworkBuilder(
        [("image", datatypes.Array(3, 16, 16))],
        [("classLabelProbs", datatypes.Array(len(CLASS_NAMES)))],
        mode="classifier",
    )
    builder.add_convolution(
        name="conv1", kernel_channels=3, output_channels=8, height=3, width=3,
        stride_height=1, stride_width=1, border_mode="same", groups=1,
        W=rand(rng, 3, 3, 3, 8), b=rand(rng, 8), has_bias=True,
        input_name="image", output_name="conv1_out")
    builder.add_batchnorm(
        name="bn1", channels=8,
        gamma=(1.0 + rand(rng, 8)).astype(np.float32), beta=rand(rng, 8),
        mean=rand(rng, 8), variance=rng.uniform(0.5, 1.5, 8).astype(np.float32),
        input_name="conv1_out", output_name="bn1_out", epsilon=1e-5)
    builder.add_activation("relu1", "RELU", "bn1_out", "relu1_out")
    builder.add_pooling(
        name="pool1", height=2, width=2, stride_height=2, stride_width=2,
        layer_type="MAX", padding_type="VALID",
        input_name="relu1_out", output_name="pool1_out")
    builder.add_convolution(
        name="conv2", kernel_channels=8, output_channels=16, height=3, width=3,
        stride_height=1, stride_width=1, border_mode="same", groups=1,
        W=rand(rng, 3, 3, 8, 16), b=None, has_bias=False,
        input_name="pool1_out", output_name="conv2_out")
    builder.add_activation("relu2", "RELU", "conv2_out", "relu2_out")
    add_classifier_head(builder, rng, "relu2_out", 16, "flatten_out", CLASS_NAMES)
    spec = builder.spec
    set_metadata(spec, "Tiny 16x16 RGB image classifier with random weights (test fixture).",
                 user={"fixture.purpose": "modelc tests", "fixture.seed": "1001"})
    describe_features(spec, {
        "image": "16x16 RGB input image",
        "classLabel": "Most likely class",
        "classLabelProbs": "Probability of each class",
    })
    return spec


def build_mean_color():
    """The mean colour of the input image (0-255 per channel, RGB order): a
    global average pool and nothing else, so that what a request did to an
    image (crop, scale, region of interest) can be read from the output."""
    builder = NeuralNetworkBuilder(
        [("image", datatypes.Array(3, 32, 32))], [("meanColor", datatypes.Array(3))])
    builder.add_pooling(
        name="mean", height=1, width=1, stride_height=1, stride_width=1,
        layer_type="AVERAGE", padding_type="VALID",
        input_name="image", output_name="mean_out", is_global=True)
    builder.add_flatten("flatten", 0, "mean_out", "meanColor")
    builder.set_pre_processing_parameters(image_input_names=["image"], is_bgr=False, image_scale=1.0)
    spec = builder.spec
    set_metadata(spec, "Mean colour of a 32x32 RGB image (test fixture for image requests).")
    describe_features(spec, {"image": "32x32 RGB image", "meanColor": "Mean red, green and blue, 0-255"})
    return spec


def mean_color_enumerated(base):
    return with_enumerated_image_sizes(base, ((32, 32), (64, 32), (16, 16)),
                                       "Mean colour of an RGB image of 32x32, 64x32 or 16x16 (test fixture).")


def write_png(path, width, height, color_at):
    """An 8-bit RGB PNG of `color_at(x, y)` pixels, written with zlib alone."""
    raw = bytearray()
    for y in range(height):
        raw.append(0)
        for x in range(width):
            raw.extend(color_at(x, y))

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(data)
    return data


def generate_request_images(images_dir):
    """Images of known layout for the image-request tests: bands of solid
    red, green and blue across a wide and a tall image, and a square one
    red on top and blue below (for regions of interest)."""
    red, green, blue = (255, 0, 0), (0, 255, 0), (0, 0, 255)
    write_png(os.path.join(images_dir, "wide-bands.png"), 200, 100,
              lambda x, y: red if x < 30 else (green if x < 170 else blue))
    write_png(os.path.join(images_dir, "tall-bands.png"), 100, 200,
              lambda x, y: red if y < 30 else (green if y < 170 else blue))
    square = write_png(os.path.join(images_dir, "top-red-bottom-blue.png"), 64, 64,
                       lambda x, y: red if y < 32 else blue)
    with open(os.path.join(images_dir, "truncated.png"), "wb") as f:
        f.write(square[: len(square) // 2])
    with open(os.path.join(images_dir, "not-an-image.png"), "wb") as f:
        f.write(b"this is text, not a PNG\n")


FEATURE_BASE_LABELS = ["a", "b", "c", "d"]


def build_image_feature_base():
    """A tiny 32x32 RGB conv net classifier whose penultimate layer gives a
    32-value feature vector: the base network of the training tests."""
    rng = np.random.default_rng(1401)
    builder = NeuralNetworkBuilder(
        [("image", datatypes.Array(3, 32, 32))],
        [("classLabelProbs", datatypes.Array(len(FEATURE_BASE_LABELS)))],
        mode="classifier",
    )
    previous, channels = "image", 3
    for index, (out_channels, pool) in enumerate([(8, True), (16, True), (32, False)], start=1):
        builder.add_convolution(
            name="conv%d" % index, kernel_channels=channels, output_channels=out_channels, height=3, width=3,
            stride_height=1, stride_width=1, border_mode="same", groups=1,
            W=rand(rng, 3, 3, channels, out_channels, scale=0.5), b=rand(rng, out_channels), has_bias=True,
            input_name=previous, output_name="conv%d_out" % index)
        builder.add_activation("relu%d" % index, "RELU", "conv%d_out" % index, "relu%d_out" % index)
        previous, channels = "relu%d_out" % index, out_channels
        if pool:
            builder.add_pooling(
                name="pool%d" % index, height=2, width=2, stride_height=2, stride_width=2,
                layer_type="MAX", padding_type="VALID", input_name=previous, output_name="pool%d_out" % index)
            previous = "pool%d_out" % index
    add_classifier_head(builder, rng, previous, channels, "features", FEATURE_BASE_LABELS)
    spec = builder.spec
    set_metadata(spec, "Tiny 32x32 RGB conv net with random weights: the base network of the training tests.",
                 user={"fixture.purpose": "modelc train tests", "fixture.seed": "1401"})
    describe_features(spec, {
        "image": "32x32 RGB input image",
        "classLabel": "Most likely class",
        "classLabelProbs": "Probability of each class",
    })
    return spec


def build_image_feature_base_program(precision=ct.precision.FLOAT32):
    """The ML program twin of ImageFeatureBase: a 32x32 RGB image (scale 1/255
    as a program op), three 3x3 convolutions with ReLU, two 2x2 max pools, a
    global average pool to a [1, 32] feature vector, then a linear head,
    softmax and classify: the ML-program base network of the training tests.
    In float16 (coremltools' default precision) the image is cast to fp16
    first, every variable is fp16 and the probabilities are cast back."""
    rng = np.random.default_rng(1402)
    convs = []
    channels = 3
    for out_channels in (8, 16, 32):
        convs.append((rand(rng, out_channels, channels, 3, 3, scale=0.5), rand(rng, out_channels)))
        channels = out_channels
    wl, bl = rand(rng, len(FEATURE_BASE_LABELS), 32), rand(rng, len(FEATURE_BASE_LABELS))

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 3, 32, 32))], opset_version=ct.target.iOS15)
    def prog(image):
        h = image
        for index, (w, b) in enumerate(convs, start=1):
            h = mb.conv(x=h, weight=w, bias=b, pad_type="same", name="conv%d" % index)
            h = mb.relu(x=h, name="relu%d" % index)
            if index < 3:
                h = mb.max_pool(x=h, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid", name="pool%d" % index)
        h = mb.reduce_mean(x=h, axes=[2, 3], keep_dims=False, name="features")
        h = mb.linear(x=h, weight=wl, bias=bl, name="fc")
        return mb.softmax(x=h, axis=-1, name="probs")

    model = ct.convert(prog, convert_to="mlprogram", skip_model_load=True,
                       minimum_deployment_target=ct.target.iOS15, compute_precision=precision,
                       inputs=[ct.ImageType(name="image", shape=(1, 3, 32, 32), scale=1 / 255.0,
                                            color_layout=ct.colorlayout.RGB)],
                       classifier_config=ct.ClassifierConfig(FEATURE_BASE_LABELS))
    model.short_description = ("Tiny 32x32 RGB conv net ML program with random weights: "
                               "the ML-program base network of the training tests.")
    model.author = "modelc fixtures"
    model.license = "MIT"
    model.user_defined_metadata["fixture.purpose"] = "modelc train tests"
    model.user_defined_metadata["fixture.seed"] = "1402"
    return model


def image_classifier_flexible(base):
    spec = Model_pb2.Model()
    spec.CopyFrom(base)
    size_range = flexible_shape_utils.NeuralNetworkImageSizeRange()
    size_range.add_width_range((8, 64))
    size_range.add_height_range((8, -1))
    flexible_shape_utils.update_image_size_range(spec, "image", size_range)
    spec.description.metadata.shortDescription = (
        "Image classifier accepting any image from 8x8 up to 64 wide (test fixture).")
    return spec


def image_classifier_enumerated(base):
    return with_enumerated_image_sizes(base, ((16, 16), (32, 32), (64, 48)),
                                       "Image classifier accepting three enumerated image sizes (test fixture).")


def with_enumerated_image_sizes(base, sizes, description):
    """A copy of `base` whose "image" input takes the (width, height) `sizes`."""
    spec = Model_pb2.Model()
    spec.CopyFrom(base)
    flexible_shape_utils.add_enumerated_image_sizes(
        spec, "image", [flexible_shape_utils.NeuralNetworkImageSize(height=h, width=w) for w, h in sizes])
    spec.description.metadata.shortDescription = description
    return spec


class SkipBatchnorm(quantization_utils.QuantizedLayerSelector):
    """Quantize every supported layer except batchnorm (kept in float32)."""

    def do_quantize(self, layer, **kwargs):
        if layer.WhichOneof("layer") == "batchnorm":
            return False
        return super().do_quantize(layer, **kwargs)


def quantized(base, nbits, mode="linear"):
    spec = Model_pb2.Model()
    spec.CopyFrom(base)
    model = ct.models.MLModel(spec, skip_model_load=True)
    if nbits == 16:
        return as_spec(quantization_utils.quantize_weights(model, nbits=16))
    # For nbits < 16 coremltools first fuses convolution + batchnorm, and that
    # step is broken in coremltools 9.0 with numpy 2 (it extends a repeated
    # float field with a 2-D array and builds wrongly shaped weights). Skip the
    # optional fusion and keep batchnorm in float32; every other layer goes
    # through coremltools' own quantizer.
    original = quantization_utils._optimize_nn
    quantization_utils._optimize_nn = lambda layers: None
    try:
        return as_spec(quantization_utils.quantize_weights(
            model, nbits=nbits, quantization_mode=mode, selector=SkipBatchnorm()))
    finally:
        quantization_utils._optimize_nn = original


def build_array_regressor():
    rng = np.random.default_rng(1002)
    builder = NeuralNetworkBuilder(
        [("features", datatypes.Array(1, 8))], [("target", datatypes.Array(1, 4))],
        mode="regressor", disable_rank5_shape_mapping=True)
    builder.add_batched_mat_mul(
        name="dense1", input_names=["features"], output_name="dense1_out",
        weight_matrix_rows=8, weight_matrix_columns=16,
        W=rand(rng, 8, 16), bias=rand(rng, 16))
    builder.add_activation("relu", "RELU", "dense1_out", "relu_out")
    builder.add_batched_mat_mul(
        name="dense2", input_names=["relu_out"], output_name="target",
        weight_matrix_rows=16, weight_matrix_columns=4,
        W=rand(rng, 16, 4), bias=rand(rng, 4))
    spec = builder.spec
    set_metadata(spec, "Batch of 8 features to 4 targets; any batch size (test fixture).")
    describe_features(spec, {"features": "N x 8 features", "target": "N x 4 predictions"})
    flexible_shape_utils.set_multiarray_ndshape_range(
        spec, "features", lower_bounds=[1, 8], upper_bounds=[-1, 8])
    return spec


def array_regressor_enumerated(base):
    spec = Model_pb2.Model()
    spec.CopyFrom(base)
    spec.description.input[0].type.multiArrayType.ClearField("shapeRange")
    flexible_shape_utils.add_multiarray_ndshape_enumeration(
        spec, "features", [(1, 8), (4, 8), (16, 8)])
    spec.description.metadata.shortDescription = (
        "Batch of 8 features to 4 targets; batch of 1, 4 or 16 (test fixture).")
    return spec


def build_updatable_classifier():
    rng = np.random.default_rng(1003)
    builder = NeuralNetworkBuilder(
        [("features", datatypes.Array(4))], [("classProbs", datatypes.Array(3))],
        mode="classifier")
    builder.add_inner_product("dense1", W=rand(rng, 8, 4), b=rand(rng, 8),
                              input_channels=4, output_channels=8, has_bias=True,
                              input_name="features", output_name="dense1_out")
    builder.add_activation("relu", "RELU", "dense1_out", "relu_out")
    builder.add_inner_product("dense2", W=rand(rng, 3, 8), b=rand(rng, 3),
                              input_channels=8, output_channels=3, has_bias=True,
                              input_name="relu_out", output_name="dense2_out")
    builder.add_softmax("softmax", "dense2_out", "classProbs")
    builder.set_class_labels([10, 20, 30], predicted_feature_name="classLabel",
                             prediction_blob="classProbs")
    builder.make_updatable(["dense1", "dense2"])
    builder.set_categorical_cross_entropy_loss(name="loss", input="classProbs")
    builder.set_sgd_optimizer(SgdParams(lr=0.01, batch=4, momentum=0.9))
    builder.set_epochs(10)
    spec = builder.spec
    set_metadata(spec, "Updatable 4-feature classifier trained with SGD (test fixture).")
    return spec


def build_duplicate_output():
    """Two layers produce the blob 'hidden' (the only defect of this network)."""
    rng = np.random.default_rng(1004)
    builder = NeuralNetworkBuilder([("x", datatypes.Array(8))], [("y", datatypes.Array(8))])
    builder.add_inner_product("dense_a", W=rand(rng, 8, 8), b=None, input_channels=8,
                              output_channels=8, has_bias=False,
                              input_name="x", output_name="hidden")
    builder.add_inner_product("dense_b", W=rand(rng, 8, 8), b=None, input_channels=8,
                              output_channels=8, has_bias=False,
                              input_name="x", output_name="hidden")
    builder.add_activation("relu", "RELU", "hidden", "y")
    return builder.spec


def iris_like(seed, n=45):
    rng = np.random.default_rng(seed)
    centers = np.array([[5.0, 3.4, 1.5, 0.2], [5.9, 2.8, 4.3, 1.3], [6.6, 3.0, 5.5, 2.0]])
    y = np.arange(n) % 3
    X = centers[y] + rng.normal(0, 0.3, (n, 4))
    return X, y


def build_pipeline_classifier():
    X, y = iris_like(2001)
    labels = np.array(["small", "medium", "large"])[y]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe = Pipeline([("scaler", StandardScaler()),
                         ("logreg", LogisticRegression(multi_class="ovr"))]).fit(X, labels)
    spec = quiet_sklearn_convert(
        pipe, ["sepal_length", "sepal_width", "petal_length", "petal_width"], "size")
    set_metadata(spec, "StandardScaler + LogisticRegression pipeline (test fixture).",
                 license_="BSD-3-Clause")
    return spec


def build_glm_classifier():
    X, y = iris_like(2002)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = LogisticRegression(multi_class="ovr").fit(X, y)
    return quiet_sklearn_convert(model, [("features", datatypes.Array(4))], "species")


def build_glm_regressor(input_name="features"):
    rng = np.random.default_rng(2003)
    X = rng.normal(size=(20, 3))
    y = X @ np.array([1.5, -2.0, 0.5]) + 3.0 + rng.normal(0, 0.01, 20)
    return quiet_sklearn_convert(LinearRegression().fit(X, y),
                                 [(input_name, datatypes.Array(3))], "target")


def build_tree_regressor():
    rng = np.random.default_rng(2004)
    X = rng.uniform(-1, 1, (24, 3))
    y = np.sin(3 * X[:, 0]) + X[:, 1]
    model = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, y)
    return quiet_sklearn_convert(model, [("features", datatypes.Array(3))], "target")


def build_tree_classifier():
    X, y = iris_like(2005, n=30)
    labels = np.array(["red", "green", "blue"])[y]
    model = RandomForestClassifier(n_estimators=2, max_depth=2, random_state=0).fit(X, labels)
    return quiet_sklearn_convert(model, [("features", datatypes.Array(4))], "color")


def build_svm_classifier():
    rng = np.random.default_rng(2006)
    X = rng.normal(size=(16, 2))
    labels = np.where(X[:, 0] * X[:, 1] > 0, "yes", "no")
    model = SVC(kernel="rbf", gamma=0.5, C=1.0).fit(X, labels)
    return quiet_sklearn_convert(model, [("features", datatypes.Array(2))], "answer")


def build_svm_regressor():
    rng = np.random.default_rng(2007)
    X = rng.normal(size=(16, 2))
    y = 2 * X[:, 0] - X[:, 1]
    model = SVR(kernel="linear", C=1.0).fit(X, y)
    return quiet_sklearn_convert(model, [("features", datatypes.Array(2))], "target")


def build_knn_classifier():
    rng = np.random.default_rng(2008)
    X = rng.normal(size=(9, 2)) + np.repeat(np.array([[0, 0], [3, 0], [0, 3]]), 3, axis=0)
    y = np.repeat(np.array([1, 2, 3]), 3)
    model = KNeighborsClassifier(n_neighbors=3).fit(X, y)
    spec = quiet_sklearn_convert(model, [("features", datatypes.Array(2))], "label")
    # The scikit-learn converter stamps specification version 1, but k-nearest
    # neighbours classifiers need 4 (iOS 13); coremltools' own automatic
    # version fix needs the macOS-only native module.
    spec.specificationVersion = max(spec.specificationVersion,
                                    ct._MINIMUM_NEAREST_NEIGHBORS_SPEC_VERSION)
    return spec


def build_normalizer():
    rng = np.random.default_rng(2009)
    return quiet_sklearn_convert(Normalizer(norm="l2").fit(rng.normal(size=(5, 4))),
                                 [("features", datatypes.Array(4))], "normalized")


def build_scaler():
    rng = np.random.default_rng(2010)
    return quiet_sklearn_convert(StandardScaler().fit(rng.normal(2, 3, size=(10, 4))),
                                 [("features", datatypes.Array(4))], "scaled")


def build_one_hot_encoder():
    # coremltools' scikit-learn converter turns OneHotEncoder into a pipeline
    # over double inputs; build the Core ML OneHotEncoder model itself, with a
    # string input, directly from the coremltools protobuf classes.
    spec = Model_pb2.Model()
    spec.specificationVersion = ct.SPECIFICATION_VERSION
    inp = spec.description.input.add()
    inp.name = "color"
    inp.shortDescription = "One of red, green, blue"
    inp.type.stringType.SetInParent()
    out = spec.description.output.add()
    out.name = "encoded"
    out.type.multiArrayType.dataType = FeatureTypes_pb2.ArrayFeatureType.DOUBLE
    out.type.multiArrayType.shape.append(3)
    spec.oneHotEncoder.stringCategories.vector.extend(["red", "green", "blue"])
    spec.oneHotEncoder.outputSparse = False
    spec.oneHotEncoder.handleUnknown = spec.oneHotEncoder.IgnoreUnknown
    return spec


def build_array_feature_extractor():
    return as_spec(array_feature_extractor.create_array_feature_extractor(
        [("features", datatypes.Array(5))], "selected", [1, 3]))


def build_dict_vectorizer():
    model = DictVectorizer(sparse=False).fit(
        [{"apples": 1, "pears": 2}, {"plums": 3}, {"apples": 4, "figs": 1}])
    return quiet_sklearn_convert(model, "basket", "counts")


def build_item_similarity_recommender():
    """Item-item recommender: a sequence<int64> input and a sequence output."""
    spec = Model_pb2.Model()
    spec.specificationVersion = ct._SPECIFICATION_VERSION_IOS_13
    d = spec.description
    items = d.input.add()
    items.name = "items"
    items.shortDescription = "Items the user interacted with"
    items.type.sequenceType.int64Type.SetInParent()
    items.type.sequenceType.sizeRange.lowerBound = 0
    items.type.sequenceType.sizeRange.upperBound = -1
    k = d.input.add()
    k.name = "k"
    k.type.int64Type.SetInParent()
    k.type.isOptional = True
    rec = d.output.add()
    rec.name = "recommendations"
    rec.type.sequenceType.int64Type.SetInParent()
    rec.type.sequenceType.sizeRange.lowerBound = 0
    rec.type.sequenceType.sizeRange.upperBound = 4
    scores = d.output.add()
    scores.name = "scores"
    scores.type.dictionaryType.int64KeyType.SetInParent()
    isr = spec.itemSimilarityRecommender
    similar = {0: [(1, 0.9), (2, 0.2)], 1: [(0, 0.9), (3, 0.4)], 2: [(3, 0.7)], 3: [(2, 0.7)]}
    for item, neighbours in similar.items():
        entry = isr.itemItemSimilarities.add()
        entry.itemId = item
        for other, score in neighbours:
            s = entry.similarItemList.add()
            s.itemId = other
            s.similarityScore = score
    isr.itemInt64Ids.vector.extend([100, 101, 102, 103])
    isr.itemInputFeatureName = "items"
    isr.numRecommendationsInputFeatureName = "k"
    isr.recommendedItemListOutputFeatureName = "recommendations"
    isr.recommendedItemScoreOutputFeatureName = "scores"
    return spec


def build_ml_program():
    rng = np.random.default_rng(3001)
    w1, b1 = rand(rng, 32, 16), rand(rng, 32)
    wc, bc = rand(rng, 8, 4, 3), rand(rng, 8)
    w2, b2 = rand(rng, 4, 64), rand(rng, 4)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 16))], opset_version=ct.target.iOS15)
    def prog(x):
        h = mb.linear(x=x, weight=w1, bias=b1, name="dense1")
        h = mb.relu(x=h, name="relu1")
        h = mb.reshape(x=h, shape=[1, 4, 8], name="to_sequence")
        h = mb.conv(x=h, weight=wc, bias=bc, pad_type="same", name="conv1")
        h = mb.relu(x=h, name="relu2")
        h = mb.reshape(x=h, shape=[1, 64], name="flatten")
        h = mb.linear(x=h, weight=w2, bias=b2, name="dense2")
        return mb.softmax(x=h, axis=-1, name="probs")

    model = ct.convert(prog, convert_to="mlprogram", skip_model_load=True,
                       minimum_deployment_target=ct.target.iOS15,
                       compute_precision=ct.precision.FLOAT32)
    model.short_description = "Small ML Program: linear, relu, conv, softmax (test fixture)."
    model.author = "modelc fixtures"
    model.license = "MIT"
    model.version = "1.0"
    model.input_description["x"] = "16 input values"
    model.output_description["probs"] = "4 class probabilities"
    return model


def build_stateful_program():
    rng = np.random.default_rng(3002)
    # 16 fp16 values: large enough for coremltools to put them in weight.bin
    # (so the weights folder is not empty and survives git).
    decay = rng.uniform(0.5, 1.0, (1, 16)).astype(np.float16)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 16)),
                             mb.StateTensorSpec(shape=(1, 16), dtype=mil_types.fp16)],
                opset_version=ct.target.iOS18)
    def prog(x, accumulator):
        previous = mb.mul(x=mb.read_state(input=accumulator, name="previous"), y=decay,
                          name="decayed")
        total = mb.add(x=previous, y=mb.cast(x=x, dtype="fp16", name="x_fp16"), name="total")
        mb.coreml_update_state(state=accumulator, value=total, name="store")
        return mb.mul(x=total, y=np.float16(0.5), name="y")

    return ct.convert(prog, convert_to="mlprogram", skip_model_load=True,
                      minimum_deployment_target=ct.target.iOS18)


def build_compressible_program():
    """A tiny conv + linear network at the iOS 18 opset, in float32: the input
    of the ct.optimize.coreml compressions below (not saved itself)."""
    rng = np.random.default_rng(3003)
    wc, bc = rand(rng, 8, 32, 3, 3), rand(rng, 8)
    w1, b1 = rand(rng, 16, 64), rand(rng, 16)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 32, 4, 4))], opset_version=ct.target.iOS18)
    def prog(x):
        h = mb.conv(x=x, weight=wc, bias=bc, pad_type="valid", name="conv1")
        h = mb.relu(x=h, name="relu1")
        h = mb.reshape(x=h, shape=[1, 32], name="flatten")
        h = mb.concat(values=[h, h], axis=1, name="twice")
        h = mb.linear(x=h, weight=w1, bias=b1, name="dense1")
        return mb.softmax(x=h, axis=-1, name="probs")

    return ct.convert(prog, convert_to="mlprogram", skip_model_load=True,
                      minimum_deployment_target=ct.target.iOS18,
                      compute_precision=ct.precision.FLOAT32)


# Weights smaller than this stay float32 (the conv has 2304, the linear 1024).
COMPRESSION_THRESHOLD = 256


def compressed_programs(base):
    """iOS 18 compressions of `base` with coremltools' ct.optimize.coreml: their
    blobs are operation inputs (constexpr_blockwise_shift_scale's data and
    scale, constexpr_lut_to_dense's indices and lut), not const attributes."""
    linear = cto.OpLinearQuantizerConfig
    palettizer = cto.OpPalettizerConfig
    programs = [
        ("Int4BlockwiseProgram.mlpackage", "int4 block-wise (block size 32) linear quantization",
         cto.linear_quantize_weights(base, cto.OptimizationConfig(global_config=linear(
             mode="linear_symmetric", dtype="int4", granularity="per_block", block_size=32,
             weight_threshold=COMPRESSION_THRESHOLD)))),
        ("Int8PerChannelProgram.mlpackage", "int8 per-channel linear quantization",
         cto.linear_quantize_weights(base, cto.OptimizationConfig(global_config=linear(
             mode="linear_symmetric", dtype="int8", granularity="per_channel",
             weight_threshold=COMPRESSION_THRESHOLD)))),
    ]
    for nbits in (4, 2, 1):
        programs.append((
            "Palettized%dBitProgram.mlpackage" % nbits,
            "%d-bit palettization (lookup table, uint%d indices)" % (nbits, nbits),
            cto.palettize_weights(base, cto.OptimizationConfig(global_config=palettizer(
                nbits=nbits, mode="uniform", weight_threshold=COMPRESSION_THRESHOLD)))))
    for name, what, model in programs:
        model.short_description = "Tiny conv + linear network, %s (test fixture)." % what
        model.author = "modelc fixtures"
        model.license = "MIT"
    return programs


def build_sub_byte_program():
    """Lookup tables with uint3 and uint6 indices whose packed sizes leave
    padding bits (15 x 3 = 45 bits in 6 bytes, 21 x 6 = 126 bits in 16)."""
    rng = np.random.default_rng(3004)
    indices3 = rng.integers(0, 8, size=(5, 3)).astype(mil_types.np_uint3_dtype)
    indices6 = rng.integers(0, 64, size=(7, 3)).astype(mil_types.np_uint6_dtype)
    lut3 = rng.standard_normal((1, 1, 8, 1)).astype(np.float16)
    lut6 = rng.standard_normal((1, 1, 64, 1)).astype(np.float16)

    @mb.program(input_specs=[mb.TensorSpec(shape=(5, 3), dtype=mil_types.fp16),
                             mb.TensorSpec(shape=(7, 3), dtype=mil_types.fp16)],
                opset_version=ct.target.iOS18)
    def prog(a, b):
        w3 = mb.constexpr_lut_to_dense(indices=indices3, lut=lut3, name="w3")
        w6 = mb.constexpr_lut_to_dense(indices=indices6, lut=lut6, name="w6")
        return mb.add(x=a, y=w3, name="y3"), mb.add(x=b, y=w6, name="y6")

    model = ct.convert(prog, convert_to="mlprogram", skip_model_load=True,
                       minimum_deployment_target=ct.target.iOS18)
    model.short_description = "uint3 and uint6 palettized constants (test fixture)."
    return model


def input_blob_count(path):
    """How many operation inputs of a saved package refer to its weight file."""
    spec = parse_model(read_bytes(package_root_model_path(path)))
    count = 0
    for fn in spec.mlProgram.functions.values():
        for block in fn.block_specializations.values():
            for inner in program_blocks(block):
                for op in inner.operations:
                    for argument in op.inputs.values():
                        count += sum(1 for b in argument.arguments
                                     if b.WhichOneof("binding") == "value"
                                     and b.value.WhichOneof("value") == "blobFileValue")
    return count


def save_multifunction_package(sources, path):
    """Two saved programs as the functions of one package (coremltools'
    save_multifunction, which stores weights the functions share once)."""
    if os.path.exists(path):
        shutil.rmtree(path)
    descriptor = ct.utils.MultiFunctionDescriptor()
    for source, function in sources:
        descriptor.add_function(source, src_function_name="main", target_function_name=function)
    descriptor.default_function_name = sources[0][1]
    ct.utils.save_multifunction(descriptor, path)
    finish_ml_package(path)


def save_ml_package(model, path):
    """Save with coremltools, then make the package deterministic."""
    if os.path.exists(path):
        shutil.rmtree(path)
    model.save(path)
    finish_ml_package(path)


def finish_ml_package(path):
    """Stable identifiers in Manifest.json, a deterministic specification
    without the conversion date, and the same file modes on every machine."""
    network_parity.stabilize_manifest(path, MANIFEST_NAMESPACE)
    # Re-serialize the specification deterministically and without the date.
    model_path = package_root_model_path(path)
    save_spec(parse_model(read_bytes(model_path)), model_path)
    for root, dirs, files in os.walk(path):
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)


def package_root_model_path(path):
    with open(os.path.join(path, "Manifest.json")) as f:
        manifest = json.load(f)
    item = manifest["itemInfoEntries"][manifest["rootModelIdentifier"]]
    return os.path.join(path, "Data", item["path"])


# ---------------------------------------------------------------------------
# Broken inputs
# ---------------------------------------------------------------------------

def tiny_png():
    def chunk(kind, payload):
        return (struct.pack(">I", len(payload)) + kind + payload
                + struct.pack(">I", zlib.crc32(kind + payload) & 0xFFFFFFFF))
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    idat = zlib.compress(b"\x00\xff\x80\x00", 9)          # filter 0, one orange pixel
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def truncated_copy(data, fraction=0.6):
    cut = int(len(data) * fraction)
    # The cut must fall strictly inside the payload of a length-delimited field.
    for field, wire, start, payload, end in walk_top_level(data):
        if start <= cut < end:
            assert wire == 2 and payload < cut < end, (field, wire, start, payload, end, cut)
            return data[:cut], field
    raise AssertionError("cut is past the end")


def walk_top_level(data):
    pos = 0
    out = []
    while pos < len(data):
        start = pos
        key, pos = _read_varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _read_varint(data, pos)
            out.append((field, wire, start, start, pos))
        elif wire == 2:
            length, payload = _read_varint(data, pos)
            pos = payload + length
            out.append((field, wire, start, payload, pos))
        elif wire == 1:
            pos += 8
            out.append((field, wire, start, pos - 8, pos))
        elif wire == 5:
            pos += 4
            out.append((field, wire, start, pos - 4, pos))
        else:
            raise ValueError("wire type %d" % wire)
    return out


def _read_varint(data, pos):
    shift = value = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def unknown_model_type():
    description = Model_pb2.ModelDescription()
    x = description.input.add()
    x.name = "x"
    x.type.doubleType.SetInParent()
    y = description.output.add()
    y.name = "y"
    y.type.doubleType.SetInParent()
    payload = b"\x0a\x07mystery"  # looks like a message with one string field
    return (varint_field(MODEL_SPECIFICATION_VERSION, 4)
            + len_field(MODEL_DESCRIPTION, description.SerializeToString(deterministic=True))
            + len_field(UNKNOWN_MODEL_TYPE_FIELD, payload))


def deep_nesting(levels=DEEP_NESTING_LEVELS):
    """Model.pipeline.models[0].pipeline.models[0]... `levels` pipelines deep.

    Built from the innermost model outwards, computing only lengths, then
    written outermost first: every message here holds exactly one nested
    message as its last field, so the file is all prefixes + the innermost model.
    """
    innermost = varint_field(MODEL_SPECIFICATION_VERSION, 4)
    pipeline_key = tag(MODEL_PIPELINE, 2)
    models_key = tag(PIPELINE_MODELS, 2)
    prefixes = []
    model_len = len(innermost)
    for level in range(levels):
        pipeline_prefix = models_key + varint(model_len)
        pipeline_len = len(pipeline_prefix) + model_len
        model_prefix = pipeline_key + varint(pipeline_len)
        if level == levels - 1:  # the outermost model also carries its version
            model_prefix = varint_field(MODEL_SPECIFICATION_VERSION, 4) + model_prefix
        model_len = len(model_prefix) + pipeline_len
        prefixes.append(model_prefix + pipeline_prefix)
    data = b"".join(reversed(prefixes)) + innermost
    assert len(data) == model_len
    return data


def bad_utf8():
    placeholder = "BAD_UTF8_NAME"
    spec = build_glm_regressor(input_name=placeholder)
    data = serialize(spec)
    encoded = placeholder.encode()
    assert data.count(encoded) == 1
    replacement = b"\xff\xfe" + encoded[2:]
    assert len(replacement) == len(encoded)
    return data.replace(encoded, replacement)


def wrong_weight_count(image_spec):
    spec = Model_pb2.Model()
    spec.CopyFrom(image_spec)
    layer = find_layer(spec, "conv1")
    del layer.convolution.weights.floatValue[-1]
    return spec


def undefined_layer_input(image_spec):
    spec = Model_pb2.Model()
    spec.CopyFrom(image_spec)
    layer = find_layer(spec, "fc")
    layer.input[0] = "nonexistent_blob"
    return spec


def find_layer(spec, name):
    for layer in nn_params(spec).layers:
        if layer.name == name:
            return layer
    raise KeyError(name)


def nn_params(spec):
    return getattr(spec, spec.WhichOneof("Type"))


# ---------------------------------------------------------------------------
# The index: facts read back from the saved files
# ---------------------------------------------------------------------------

NN_TYPES = ("neuralNetwork", "neuralNetworkClassifier", "neuralNetworkRegressor")
CLASSIFIER_TYPES = ("neuralNetworkClassifier", "glmClassifier", "supportVectorClassifier",
                    "treeEnsembleClassifier", "kNearestNeighborsClassifier")
PIPELINE_TYPES = ("pipeline", "pipelineClassifier", "pipelineRegressor")


def feature_entry(feature):
    t = feature.type
    kind = t.WhichOneof("Type")
    entry = {"name": feature.name, "type": kind}
    if feature.shortDescription:
        entry["shortDescription"] = feature.shortDescription
    if t.isOptional:
        entry["isOptional"] = True
    if kind == "multiArrayType":
        a = t.multiArrayType
        entry["dataType"] = FeatureTypes_pb2.ArrayFeatureType.ArrayDataType.Name(a.dataType)
        entry["shape"] = list(a.shape)
        flex = a.WhichOneof("ShapeFlexibility")
        if flex == "enumeratedShapes":
            entry["enumeratedShapes"] = [list(s.shape) for s in a.enumeratedShapes.shapes]
        elif flex == "shapeRange":
            entry["shapeRange"] = [[r.lowerBound, r.upperBound] for r in a.shapeRange.sizeRanges]
    elif kind == "imageType":
        im = t.imageType
        entry["width"] = im.width
        entry["height"] = im.height
        entry["colorSpace"] = FeatureTypes_pb2.ImageFeatureType.ColorSpace.Name(im.colorSpace)
        flex = im.WhichOneof("SizeFlexibility")
        if flex == "enumeratedSizes":
            entry["enumeratedSizes"] = [[s.width, s.height] for s in im.enumeratedSizes.sizes]
        elif flex == "imageSizeRange":
            r = im.imageSizeRange
            entry["imageSizeRange"] = {
                "width": [r.widthRange.lowerBound, r.widthRange.upperBound],
                "height": [r.heightRange.lowerBound, r.heightRange.upperBound],
            }
    elif kind == "dictionaryType":
        entry["keyType"] = t.dictionaryType.WhichOneof("KeyType")
    elif kind == "sequenceType":
        s = t.sequenceType
        entry["elementType"] = s.WhichOneof("Type")
        entry["sizeRange"] = [s.sizeRange.lowerBound, s.sizeRange.upperBound]
    elif kind == "stateType":
        a = t.stateType.arrayType
        entry["dataType"] = FeatureTypes_pb2.ArrayFeatureType.ArrayDataType.Name(a.dataType)
        entry["shape"] = list(a.shape)
    return entry


def weight_storage(w):
    if len(w.floatValue):
        return "float32", len(w.floatValue), 4 * len(w.floatValue)
    if len(w.float16Value):
        return "float16", len(w.float16Value) // 2, len(w.float16Value)
    if len(w.rawValue):
        if w.HasField("quantization"):
            bits = w.quantization.numberOfBits
            return "quantized", len(w.rawValue) * 8 // bits, len(w.rawValue)
        raise ValueError("rawValue without quantization is not used by these fixtures")
    if len(w.int8RawValue):
        return "int8", len(w.int8RawValue), len(w.int8RawValue)
    raise ValueError("WeightParams without values is not used by these fixtures")


def weight_entries(layer_name, message, prefix=""):
    entries = []
    for fd in sorted(message.DESCRIPTOR.fields, key=lambda f: f.number):
        if fd.message_type is None:
            continue
        if fd.is_repeated:
            if fd.message_type.GetOptions().map_entry:
                continue
            values = [(prefix + fd.name + "[%d]" % i, v)
                      for i, v in enumerate(getattr(message, fd.name))]
        elif message.HasField(fd.name):
            values = [(prefix + fd.name, getattr(message, fd.name))]
        else:
            values = []
        for role, value in values:
            if fd.message_type.full_name == WEIGHT_PARAMS:
                if value.ByteSize() == 0:
                    continue
                storage, count, nbytes = weight_storage(value)
                entries.append({"layer": layer_name, "role": role, "storage": storage,
                                "count": count, "bytes": nbytes})
            else:
                entries.extend(weight_entries(layer_name, value, role + "."))
    return entries


def class_labels(spec):
    kind = spec.WhichOneof("Type")
    if kind == "pipelineClassifier":
        models = spec.pipelineClassifier.pipeline.models
        return class_labels(models[len(models) - 1]) if len(models) else None
    if kind not in CLASSIFIER_TYPES:
        return None
    params = getattr(spec, kind)
    which = params.WhichOneof("ClassLabels")
    if which == "stringClassLabels":
        return {"kind": "string", "count": len(params.stringClassLabels.vector)}
    if which == "int64ClassLabels":
        return {"kind": "int64", "count": len(params.int64ClassLabels.vector)}
    return None


def program_blocks(block):
    yield block
    for op in block.operations:
        for inner in op.blocks:
            yield from program_blocks(inner)


def blob_entry(name, value):
    tensor = value.type.tensorType
    count = 1
    for dim in tensor.dimensions:
        count *= dim.constant.size
    return {
        "name": name,
        "dataType": MIL_pb2.DataType.Name(tensor.dataType),
        "count": count,
        "offset": value.blobFileValue.offset,
        "file": value.blobFileValue.fileName,
    }


def program_facts(program):
    """Functions, operation counts, and every weight file reference: const
    attributes and operation inputs (the iOS 18 constexpr operations), named
    as modelc names them, in weight file order."""
    functions, operations, blobs = [], {}, []
    for name in sorted(program.functions):
        fn = program.functions[name]
        functions.append({
            "name": name,
            "opset": fn.opset,
            "inputs": [i.name for i in fn.inputs],
            "outputs": list(fn.block_specializations[fn.opset].outputs),
        })
        for opset in sorted(fn.block_specializations):
            for block in program_blocks(fn.block_specializations[opset]):
                for op in block.operations:
                    operations[op.type] = operations.get(op.type, 0) + 1
                    output = op.outputs[0].name if op.outputs else ""
                    for key in sorted(op.attributes):
                        value = op.attributes[key]
                        if value.WhichOneof("value") == "blobFileValue":
                            blobs.append(blob_entry(output if key == "val" else output + "." + key, value))
                    for key in sorted(op.inputs):
                        arguments = op.inputs[key].arguments
                        for i, binding in enumerate(arguments):
                            if binding.WhichOneof("binding") != "value":
                                continue
                            if binding.value.WhichOneof("value") != "blobFileValue":
                                continue
                            role = key if len(arguments) == 1 else "%s[%d]" % (key, i)
                            blobs.append(blob_entry(output + "." + role, binding.value))
    blobs.sort(key=lambda b: (b["file"], b["offset"], b["name"]))
    for blob in blobs:
        del blob["file"]
    return functions, operations, blobs


def model_entry(spec, file, fmt):
    kind = spec.WhichOneof("Type")
    d = spec.description
    entry = {
        "file": file,
        "format": fmt,
        "specificationVersion": spec.specificationVersion,
        "modelType": kind,
        "isUpdatable": spec.isUpdatable,
        "inputs": [feature_entry(f) for f in d.input],
        "outputs": [feature_entry(f) for f in d.output],
    }
    if len(d.state):
        entry["states"] = [feature_entry(f) for f in d.state]
    if d.predictedFeatureName:
        entry["predictedFeatureName"] = d.predictedFeatureName
    if d.predictedProbabilitiesName:
        entry["predictedProbabilitiesName"] = d.predictedProbabilitiesName
    md = d.metadata
    metadata = {k: getattr(md, k) for k in
                ("shortDescription", "author", "license", "versionString") if getattr(md, k)}
    if len(md.userDefined):
        metadata["userDefined"] = dict(sorted(md.userDefined.items()))
    if metadata:
        entry["metadata"] = metadata
    labels = class_labels(spec)
    if labels:
        entry["classLabels"] = labels
    if kind in NN_TYPES:
        nn = getattr(spec, kind)
        layers, weights = [], []
        for layer in nn.layers:
            layer_kind = layer.WhichOneof("layer")
            layers.append({"name": layer.name, "kind": layer_kind,
                           "inputs": list(layer.input), "outputs": list(layer.output)})
            weights.extend(weight_entries(layer.name, getattr(layer, layer_kind)))
        entry["layers"] = layers
        entry["weights"] = weights
        entry["parameterCount"] = sum(w["count"] for w in weights)
    if kind in PIPELINE_TYPES:
        pipeline = spec.pipeline if kind == "pipeline" else getattr(spec, kind).pipeline
        entry["pipeline"] = [m.WhichOneof("Type") for m in pipeline.models]
    if kind == "mlProgram":
        functions, operations, blobs = program_facts(spec.mlProgram)
        entry["functions"] = functions
        entry["operations"] = dict(sorted(operations.items()))
        entry["blobWeights"] = blobs
    return entry


def index_entry(out_dir, rel):
    path = os.path.join(out_dir, rel)
    if os.path.isdir(path):
        return model_entry(parse_model(read_bytes(package_root_model_path(path))),
                           rel, "mlpackage")
    return model_entry(parse_model(read_bytes(path)), rel, "mlmodel")


def parses_as_model(path):
    """True when the bytes parse as a Model that has a known model type."""
    try:
        if os.path.isdir(path):
            model_path = package_root_model_path(path)
            real = os.path.realpath(model_path)
            if not real.startswith(os.path.realpath(path) + os.sep):
                return False
            path = model_path
        spec = parse_model(read_bytes(path))
    except Exception:
        return False
    return spec.WhichOneof("Type") is not None


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def generate(out_dir):
    check_field_numbers()
    models_dir = os.path.join(out_dir, "Models")
    broken_dir = os.path.join(out_dir, "Broken")
    images_dir = os.path.join(out_dir, "Images")
    for d in (models_dir, broken_dir, images_dir):
        if os.path.exists(d):
            shutil.rmtree(d)
        os.makedirs(d)

    models = []

    def save(name, spec):
        rel = "Models/" + name
        save_spec(spec, os.path.join(out_dir, rel))
        models.append(rel)

    generate_request_images(images_dir)
    image = build_image_classifier()
    save("ImageClassifier.mlmodel", image)
    save("ImageClassifierFlexible.mlmodel", image_classifier_flexible(image))
    save("ImageClassifierEnumerated.mlmodel", image_classifier_enumerated(image))
    save("ImageClassifierFP16.mlmodel", quantized(image, 16))
    save("ImageClassifierInt8.mlmodel", quantized(image, 8, "linear"))
    mean_color = build_mean_color()
    save("MeanColor.mlmodel", mean_color)
    save("MeanColorEnumerated.mlmodel", mean_color_enumerated(mean_color))
    save("ImageFeatureBase.mlmodel", build_image_feature_base())
    regressor = build_array_regressor()
    save("ArrayRegressor.mlmodel", regressor)
    save("ArrayRegressorEnumerated.mlmodel", array_regressor_enumerated(regressor))
    save("UpdatableClassifier.mlmodel", build_updatable_classifier())
    save("PipelineClassifier.mlmodel", build_pipeline_classifier())
    save("GLMClassifier.mlmodel", build_glm_classifier())
    save("GLMRegressor.mlmodel", build_glm_regressor())
    save("TreeEnsembleRegressor.mlmodel", build_tree_regressor())
    save("TreeEnsembleClassifier.mlmodel", build_tree_classifier())
    save("SVMClassifier.mlmodel", build_svm_classifier())
    save("SVMRegressor.mlmodel", build_svm_regressor())
    save("KNNClassifier.mlmodel", build_knn_classifier())
    save("Normalizer.mlmodel", build_normalizer())
    save("Scaler.mlmodel", build_scaler())
    save("OneHotEncoder.mlmodel", build_one_hot_encoder())
    save("ArrayFeatureExtractor.mlmodel", build_array_feature_extractor())
    save("DictVectorizer.mlmodel", build_dict_vectorizer())
    save("ItemSimilarityRecommender.mlmodel", build_item_similarity_recommender())
    detection.generate_detection(out_dir, save)

    for name, build in (("MLProgram.mlpackage", build_ml_program),
                        ("StatefulProgram.mlpackage", build_stateful_program),
                        ("ImageFeatureBaseProgram.mlpackage", build_image_feature_base_program),
                        ("ImageFeatureBaseProgramFP16.mlpackage",
                         lambda: build_image_feature_base_program(ct.precision.FLOAT16))):
        rel = "Models/" + name
        save_ml_package(build(), os.path.join(out_dir, rel))
        models.append(rel)

    # iOS 18 compressed programs: blobs held by operation inputs.
    compressed = compressed_programs(build_compressible_program())
    for name, _, model in compressed:
        rel = "Models/" + name
        save_ml_package(model, os.path.join(out_dir, rel))
        models.append(rel)
        assert input_blob_count(os.path.join(out_dir, rel)) > 0, (name, "no blob held by an operation input")
    rel = "Models/SubByteProgram.mlpackage"
    save_ml_package(build_sub_byte_program(), os.path.join(out_dir, rel))
    models.append(rel)
    rel = "Models/MultiFunctionProgram.mlpackage"
    save_multifunction_package([(os.path.join(models_dir, "Int4BlockwiseProgram.mlpackage"), "main"),
                                (os.path.join(models_dir, "Palettized4BitProgram.mlpackage"), "palettized")],
                               os.path.join(out_dir, rel))
    models.append(rel)

    program = os.path.join(models_dir, "MLProgram.mlpackage")
    packages = ["MLProgram.mlpackage", "StatefulProgram.mlpackage", "ImageFeatureBaseProgram.mlpackage",
                "ImageFeatureBaseProgramFP16.mlpackage",
                "SubByteProgram.mlpackage",
                "MultiFunctionProgram.mlpackage"] + [name for name, _, _ in compressed]
    for package in packages:
        for part in ("Manifest.json", "Data/com.apple.CoreML/model.mlmodel",
                     "Data/com.apple.CoreML/weights/weight.bin"):
            assert os.path.isfile(os.path.join(models_dir, package, part)), (package, part)

    # ---- broken inputs ----
    broken = []

    def add_broken(name, problem, data=None, spec=None):
        rel = "Broken/" + name
        path = os.path.join(out_dir, rel)
        if spec is not None:
            save_spec(spec, path)
        elif data is not None:
            write_bytes(path, data)
        broken.append((rel, problem))

    image_bytes = read_bytes(os.path.join(models_dir, "ImageClassifier.mlmodel"))
    cut_bytes, cut_field = truncated_copy(image_bytes)
    add_broken("truncated.mlmodel",
               "first %d of %d bytes of Models/ImageClassifier.mlmodel; ends inside the "
               "payload of length-delimited field %d (neuralNetworkClassifier)"
               % (len(cut_bytes), len(image_bytes), cut_field), data=cut_bytes)
    add_broken("not-protobuf.mlmodel", "a valid 1x1 PNG image, not a protobuf message",
               data=tiny_png())
    add_broken("empty.mlmodel", "zero bytes: no specification version, description or model",
               data=b"")
    add_broken("unknown-model-type.mlmodel",
               "specificationVersion 4 and a description, but the only model field is "
               "unknown field %d (length-delimited): no known model type"
               % UNKNOWN_MODEL_TYPE_FIELD, data=unknown_model_type())
    add_broken("deep-nesting.mlmodel",
               "Model.pipeline(%d) -> Pipeline.models(%d) nested %d levels deep "
               "(hostile recursion depth)" % (MODEL_PIPELINE, PIPELINE_MODELS, DEEP_NESTING_LEVELS),
               data=deep_nesting())
    add_broken("bad-utf8.mlmodel",
               "GLMRegressor whose first input name starts with the invalid UTF-8 bytes FF FE",
               data=bad_utf8())
    add_broken("wrong-weight-count.mlmodel",
               "ImageClassifier whose conv1 weights hold 215 floats instead of 3*3*3*8 = 216",
               spec=wrong_weight_count(image))
    add_broken("undefined-layer-input.mlmodel",
               "ImageClassifier whose layer 'fc' reads blob 'nonexistent_blob' that no "
               "layer or input produces", spec=undefined_layer_input(image))
    add_broken("duplicate-output.mlmodel",
               "neural network where layers 'dense_a' and 'dense_b' both produce the blob "
               "'hidden'", spec=build_duplicate_output())

    not_a_package = os.path.join(broken_dir, "not-a-package.mlpackage")
    write_bytes(os.path.join(not_a_package, "Data", "com.apple.CoreML", "model.mlmodel"),
                read_bytes(os.path.join(models_dir, "GLMRegressor.mlmodel")))
    broken.append(("Broken/not-a-package.mlpackage",
                   "directory named .mlpackage with Data/com.apple.CoreML/model.mlmodel "
                   "(a valid GLMRegressor) but no Manifest.json"))

    escaping = os.path.join(broken_dir, "escaping-path.mlpackage")
    shutil.copytree(program, escaping)
    manifest_path = os.path.join(escaping, "Manifest.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    manifest["itemInfoEntries"][manifest["rootModelIdentifier"]]["path"] = "../../../../etc/passwd"
    write_bytes(manifest_path, (json.dumps(manifest, indent=4, sort_keys=True) + "\n").encode())
    broken.append(("Broken/escaping-path.mlpackage",
                   "copy of Models/MLProgram.mlpackage whose Manifest.json root model item path "
                   "is ../../../../etc/passwd (escapes the package)"))

    # Packages whose weight file does not hold what the program refers to
    # (inspect reports them; compile refuses them).
    int4 = os.path.join(models_dir, "Int4BlockwiseProgram.mlpackage")
    weight_file = os.path.join("Data", "com.apple.CoreML", "weights", "weight.bin")
    missing = os.path.join(broken_dir, "weights-missing.mlpackage")
    shutil.copytree(int4, missing)
    shutil.rmtree(os.path.dirname(os.path.join(missing, weight_file)))
    broken.append(("Broken/weights-missing.mlpackage",
                   "copy of Models/Int4BlockwiseProgram.mlpackage without its weights/weight.bin"))
    short = os.path.join(broken_dir, "weights-short.mlpackage")
    shutil.copytree(int4, short)
    data = read_bytes(os.path.join(short, weight_file))
    write_bytes(os.path.join(short, weight_file), data[:len(data) - 32])
    broken.append(("Broken/weights-short.mlpackage",
                   "copy of Models/Int4BlockwiseProgram.mlpackage whose weight.bin lacks its last 32 bytes "
                   "(%d of %d): the last blob runs past the end" % (len(data) - 32, len(data))))
    out_of_range = os.path.join(broken_dir, "weights-out-of-range.mlpackage")
    shutil.copytree(int4, out_of_range)
    model_path = package_root_model_path(out_of_range)
    spec = parse_model(read_bytes(model_path))
    size = os.path.getsize(os.path.join(out_of_range, weight_file))
    moved = None
    for op in spec.mlProgram.functions["main"].block_specializations["CoreML8"].operations:
        if op.type == "constexpr_blockwise_shift_scale":
            value = op.inputs["data"].arguments[0].value
            value.blobFileValue.offset = size + 64
            moved = op.outputs[0].name
            break
    assert moved is not None
    save_spec(spec, model_path)
    broken.append(("Broken/weights-out-of-range.mlpackage",
                   "copy of Models/Int4BlockwiseProgram.mlpackage whose %s.data input refers to offset %d, "
                   "past the end of weight.bin (%d bytes)" % (moved, size + 64, size)))
    for package in ("weights-missing.mlpackage", "weights-short.mlpackage", "weights-out-of-range.mlpackage"):
        for root, dirs, files in os.walk(os.path.join(broken_dir, package)):
            for name in files:
                os.chmod(os.path.join(root, name), 0o644)

    # ---- index ----
    index = {"coremltools": ct.__version__, "models": [], "broken": []}
    for rel in models:
        index["models"].append(index_entry(out_dir, rel))
        assert parses_as_model(os.path.join(out_dir, rel)), rel
    for rel, problem in broken:
        readable = parses_as_model(os.path.join(out_dir, rel))
        entry = index_entry(out_dir, rel) if readable else {"file": rel}
        entry["problem"] = problem
        entry["readable"] = readable
        if rel.startswith("Broken/weights-"):
            # Readable, but `modelc inspect` reports the weight file problem
            # and exits with the invalid-model code.
            entry["inspectExitCode"] = 76
        index["broken"].append(entry)
    expected_readable = {"Broken/wrong-weight-count.mlmodel", "Broken/undefined-layer-input.mlmodel",
                         "Broken/duplicate-output.mlmodel", "Broken/weights-missing.mlpackage",
                         "Broken/weights-short.mlpackage", "Broken/weights-out-of-range.mlpackage"}
    actual_readable = {e["file"] for e in index["broken"] if e["readable"]}
    assert actual_readable == expected_readable, actual_readable
    write_bytes(os.path.join(out_dir, "index.json"),
                (json.dumps(index, indent=2, sort_keys=True) + "\n").encode())

    parity.generate(out_dir)
    network_parity.generate(out_dir)
    conformance_regressions.generate(out_dir)
    network_lowering.generate(out_dir)
    model_references.generate(out_dir)


def generate_large(path, megabytes, layers=None):
    floats = int(megabytes * 1024 * 1024 / 4)
    if layers:
        # A fixed structure: only the size of each layer follows the megabytes.
        n = max(8, int((floats / layers) ** 0.5))
    else:
        n = 1024
        while n > 8 and n * n > floats:
            n //= 2
        layers = max(1, round(floats / (n * n)))
    rng = np.random.default_rng(4001)
    builder = NeuralNetworkBuilder([("input", datatypes.Array(n))],
                                   [("output", datatypes.Array(n))])
    blob = "input"
    for i in range(layers):
        dense = "dense%d" % i
        builder.add_inner_product(dense, W=rand(rng, n, n, scale=1.0 / np.sqrt(n)),
                                  b=rand(rng, n), input_channels=n, output_channels=n,
                                  has_bias=True, input_name=blob, output_name=dense + "_out")
        blob = dense + "_out"
        last = i == layers - 1
        builder.add_activation("relu%d" % i, "RELU", blob, "output" if last else "relu%d_out" % i)
        blob = "relu%d_out" % i
    spec = builder.spec
    set_metadata(spec, "Benchmark network: %d inner-product layers of %dx%d float32 weights."
                 % (layers, n, n))
    save_spec(spec, path)
    print("wrote %s (%d bytes, %d layers of %dx%d)" % (path, os.path.getsize(path), layers, n, n))


def generate_large_program(path, megabytes):
    """An ML program of 1024 x 1024 float32 linear layers (4 MiB each) adding
    up to `megabytes`, saved as a package whose weight.bin holds the blobs."""
    n = 1024
    layers = max(1, round(megabytes * 1024 * 1024 / 4 / (n * n)))
    rng = np.random.default_rng(4002)
    weights = [rand(rng, n, n, scale=1.0 / np.sqrt(n)) for _ in range(layers)]
    biases = [rand(rng, n) for _ in range(layers)]

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, n))], opset_version=ct.target.iOS18)
    def prog(x):
        for i in range(layers):
            x = mb.linear(x=x, weight=weights[i], bias=biases[i], name="dense%d" % i)
            x = mb.relu(x=x, name="relu%d" % i)
        return x

    model = ct.convert(prog, convert_to="mlprogram", skip_model_load=True,
                       minimum_deployment_target=ct.target.iOS18,
                       compute_precision=ct.precision.FLOAT32)
    model.short_description = "Benchmark program: %d linear layers of %dx%d float32 weights." % (layers, n, n)
    save_ml_package(model, path)
    size = os.path.getsize(os.path.join(path, "Data", "com.apple.CoreML", "weights", "weight.bin"))
    print("wrote %s (weight.bin %d bytes, %d layers of %dx%d)" % (path, size, layers, n, n))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=HERE, help="output folder (default: %(default)s)")
    parser.add_argument("--large", metavar="PATH",
                        help="write only one large float32 neural network to PATH")
    parser.add_argument("--layers", type=int, default=None,
                        help="with --large: this many layers, each sized to fit (default: 1024-wide layers)")
    parser.add_argument("--large-program", metavar="PATH",
                        help="write only one large float32 ML program (.mlpackage) to PATH")
    parser.add_argument("--megabytes", type=float, default=80,
                        help="size of the large network's weights in MiB (default: 80)")
    args = parser.parse_args(argv)
    if args.large_program:
        generate_large_program(args.large_program, args.megabytes)
    elif args.large:
        generate_large(args.large, args.megabytes, args.layers)
    else:
        generate(os.path.abspath(args.out))
        print("wrote fixtures to %s" % os.path.abspath(args.out))


if __name__ == "__main__":
    sys.exit(main())
