"""Object-detection fixtures: a tiny network that measures one bright blob,
followed by a NonMaximumSuppression stage, as Create ML and YOLO exporters
shape detectors; the network alone (a detector without NMS); random boxes
for NMS parity against NumPy.

The network sees a 64x64 grayscale image (scaled to 0...1) and computes the
blob's intensity moments with one matrix product against the pixel
coordinates: S = sum I, the centroid (mx, my) = (sum I x, sum I y) / S and
the standard deviations sd = sqrt(sum I x^2 / S - mx^2). Coordinates are
normalized to the model's input, origin at the top left, pixel i spanning
[i/64, (i+1)/64). It gives two boxes as (centre x, centre y, width, height):
  row 0: centre (mx, my), size 4 sd       confidences [0.9, 0.1] ("blob", "background")
  row 1: centre (mx, my), size 4.4 sd     confidences [0.6, 0.4]
Row 1 overlaps row 0 with IoU 1/1.21 = 0.83, so NMS at IoU 0.5 keeps row 0
alone. For a Gaussian blob of standard deviation s drawn in an image, row 0
is the square centre +/- 2 s of the blob wherever crop, scale, region of
interest and orientation put it: the box can be checked in the original
image's pixels.
"""

import json
import os

import numpy as np

from coremltools.models import datatypes
from coremltools.models.neural_network import NeuralNetworkBuilder
from coremltools.proto import FeatureTypes_pb2
from coremltools.proto import Model_pb2

SIZE = 64
LABELS = ["blob", "background"]
DOUBLE = FeatureTypes_pb2.ArrayFeatureType.DOUBLE


def build_blob_network():
    """The measuring network alone: image in, `confidence` [2, 2] and
    `coordinates` [2, 4] out (a detector without its NMS stage)."""
    builder = NeuralNetworkBuilder(
        [("image", datatypes.Array(1, SIZE, SIZE))],
        [("confidence", datatypes.Array(2, 2)), ("coordinates", datatypes.Array(2, 4))],
        disable_rank5_shape_mapping=True,
    )
    centres = (np.arange(SIZE, dtype=np.float64) + 0.5) / SIZE
    xs = np.tile(centres, SIZE)          # column of each pixel, row-major
    ys = np.repeat(centres, SIZE)        # row of each pixel
    weights = np.stack([np.ones(SIZE * SIZE), xs, ys, xs * xs, ys * ys], axis=1).astype(np.float32)
    builder.add_reshape_static("flatten", "image", "pixels", (1, SIZE * SIZE))
    builder.add_batched_mat_mul("moments", ["pixels"], "sums", weight_matrix_rows=SIZE * SIZE,
                                weight_matrix_columns=5, W=weights)

    def take(name, begin, end):
        builder.add_slice_static(name, "sums", name, begin_ids=[0, begin], end_ids=[1, end], strides=[1, 1],
                                 begin_masks=[True, False], end_masks=[True, False])
    take("mass", 0, 1)
    take("first", 1, 3)
    take("second", 3, 5)
    builder.add_divide_broadcastable("centre", ["first", "mass"], "centre")
    builder.add_divide_broadcastable("square_mean", ["second", "mass"], "square_mean")
    builder.add_multiply_broadcastable("centre_squared", ["centre", "centre"], "centre_squared")
    builder.add_subtract_broadcastable("variance", ["square_mean", "centre_squared"], "variance")
    builder.add_unary("sd", "variance", "sd", mode="sqrt")
    builder.add_load_constant_nd("four", "four", constant_value=np.array([[4.0]], dtype=np.float32), shape=[1, 1])
    builder.add_load_constant_nd("wider", "wider", constant_value=np.array([[4.4]], dtype=np.float32), shape=[1, 1])
    builder.add_multiply_broadcastable("size0", ["sd", "four"], "size0")
    builder.add_multiply_broadcastable("size1", ["sd", "wider"], "size1")
    builder.add_concat_nd("box0", ["centre", "size0"], "box0", axis=1)
    builder.add_concat_nd("box1", ["centre", "size1"], "box1", axis=1)
    builder.add_concat_nd("boxes", ["box0", "box1"], "coordinates", axis=0)
    builder.add_load_constant_nd("scores", "scores_const",
                                 constant_value=np.array([[0.9, 0.1], [0.6, 0.4]], dtype=np.float32), shape=[2, 2])
    # The confidences pass through an operation on the image's mass (times
    # zero) so that they are computed, not a bare constant output.
    builder.add_load_constant_nd("zero", "zero", constant_value=np.array([[0.0]], dtype=np.float32), shape=[1, 1])
    builder.add_multiply_broadcastable("no_mass", ["mass", "zero"], "no_mass")
    builder.add_add_broadcastable("confidences", ["scores_const", "no_mass"], "confidence")
    builder.set_pre_processing_parameters(image_input_names=["image"], image_scale=1.0 / 255.0)
    spec = builder.spec
    image = spec.description.input[0]
    image.type.imageType.colorSpace = FeatureTypes_pb2.ImageFeatureType.GRAYSCALE
    for output in spec.description.output:
        output.type.multiArrayType.dataType = DOUBLE
    return spec


def _array(features, name, columns, rows=None):
    feature = features.add()
    feature.name = name
    kind = feature.type.multiArrayType
    kind.dataType = DOUBLE
    if rows is not None:
        kind.shape.extend([rows, columns])
        return
    kind.shape.extend([1, columns])
    first = kind.shapeRange.sizeRanges.add()
    first.lowerBound, first.upperBound = 0, -1
    second = kind.shapeRange.sizeRanges.add()
    second.lowerBound, second.upperBound = columns, columns


def _double(features, name, optional):
    feature = features.add()
    feature.name = name
    feature.type.doubleType.SetInParent()
    feature.type.isOptional = optional


def build_nms_stage(labels, iou=0.5, confidence=0.2, rows=2):
    """NMS over `rows` boxes (None: any number), class-agnostic."""
    spec = Model_pb2.Model()
    spec.specificationVersion = 4
    description = spec.description
    _array(description.input, "raw_confidence", len(labels), rows=rows)
    _array(description.input, "raw_coordinates", 4, rows=rows)
    _double(description.input, "iouThreshold", False)
    _double(description.input, "confidenceThreshold", False)
    _array(description.output, "confidence", len(labels))
    _array(description.output, "coordinates", 4)
    nms = spec.nonMaximumSuppression
    nms.pickTop.perClass = False
    nms.iouThreshold = iou
    nms.confidenceThreshold = confidence
    nms.confidenceInputFeatureName = "raw_confidence"
    nms.coordinatesInputFeatureName = "raw_coordinates"
    nms.iouThresholdInputFeatureName = "iouThreshold"
    nms.confidenceThresholdInputFeatureName = "confidenceThreshold"
    nms.confidenceOutputFeatureName = "confidence"
    nms.coordinatesOutputFeatureName = "coordinates"
    nms.stringClassLabels.vector.extend(labels)
    return spec


def build_detector():
    """The network, its outputs renamed, then NMS: a pipeline with the
    image and the two optional thresholds in, `confidence` and `coordinates` out."""
    network = build_blob_network()
    for layer in network.neuralNetwork.layers:
        for index, name in enumerate(layer.output):
            if name in ("confidence", "coordinates"):
                layer.output[index] = "raw_" + name
    for output in network.description.output:
        output.name = "raw_" + output.name
    nms = build_nms_stage(LABELS)

    spec = Model_pb2.Model()
    spec.specificationVersion = 4
    description = spec.description
    description.input.add().CopyFrom(network.description.input[0])
    _double(description.input, "iouThreshold", True)
    _double(description.input, "confidenceThreshold", True)
    description.output.add().CopyFrom(nms.description.output[0])
    description.output.add().CopyFrom(nms.description.output[1])
    spec.pipeline.models.add().CopyFrom(network)
    spec.pipeline.models.add().CopyFrom(nms)
    return spec


def gaussian_blob(width, height, centre_x, centre_y, sd_x, sd_y, peak=255.0):
    """8-bit gray pixels of a Gaussian blob on black; the centre in continuous
    pixel coordinates (pixel i spans [i, i + 1))."""
    xs = np.arange(width) + 0.5
    ys = np.arange(height) + 0.5
    values = peak * np.exp(-((xs[None, :] - centre_x) ** 2) / (2 * sd_x ** 2)
                           - ((ys[:, None] - centre_y) ** 2) / (2 * sd_y ** 2))
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


def nms_numpy(confidence, coordinates, iou_threshold, confidence_threshold):
    """Class-agnostic NMS in NumPy float64, written for these fixtures (the
    rule of docs/runtime.md): the indices kept, in visiting order."""
    scores = confidence.max(axis=1)
    order = [int(i) for i in np.argsort(-scores, kind="stable") if scores[i] >= confidence_threshold]
    x0 = coordinates[:, 0] - coordinates[:, 2] / 2
    x1 = coordinates[:, 0] + coordinates[:, 2] / 2
    y0 = coordinates[:, 1] - coordinates[:, 3] / 2
    y1 = coordinates[:, 1] + coordinates[:, 3] / 2
    area = coordinates[:, 2] * coordinates[:, 3]
    kept = []
    for i in order:
        if not kept:
            kept.append(i)
            continue
        others = np.array(kept)
        w = np.maximum(0.0, np.minimum(x1[i], x1[others]) - np.maximum(x0[i], x0[others]))
        h = np.maximum(0.0, np.minimum(y1[i], y1[others]) - np.maximum(y0[i], y0[others]))
        inter = w * h
        iou = inter / (area[i] + area[others] - inter)
        if not np.any(iou > iou_threshold):
            kept.append(i)
    return kept


def nms_random_cases(seed=2201, count=40, boxes=300, classes=3):
    """Many random boxes (clustered, so that suppression happens) with the
    NumPy result; thresholds away from every score and IoU tie."""
    rng = np.random.default_rng(seed)
    cases = []
    while len(cases) < count:
        centres = rng.uniform(0.1, 0.9, (boxes // 10, 2))
        picks = rng.integers(0, len(centres), boxes)
        xy = centres[picks] + rng.normal(0, 0.02, (boxes, 2))
        wh = rng.uniform(0.05, 0.25, (boxes, 2))
        coordinates = np.round(np.concatenate([xy, wh], axis=1), 6)
        raw = rng.random((boxes, classes + 1))
        confidence = np.round(raw[:, :classes] / raw.sum(axis=1, keepdims=True), 6)
        scores = confidence.max(axis=1)
        if len(set(scores.tolist())) != boxes:
            continue
        iou_threshold = float(rng.choice([0.3, 0.45, 0.5, 0.6, 0.7]))
        confidence_threshold = float(rng.choice([0.0, 0.2, 0.3, 0.4]))
        if np.min(np.abs(scores - confidence_threshold)) < 1e-9:
            continue
        kept = nms_numpy(confidence, coordinates, iou_threshold, confidence_threshold)
        cases.append({"confidence": confidence.tolist(), "coordinates": coordinates.tolist(),
                      "iouThreshold": iou_threshold, "confidenceThreshold": confidence_threshold,
                      "kept": kept})
    return cases


def build_nms_only():
    """The NMS stage alone, over any number of boxes of 3 classes (for the
    parity test against `nms_numpy`)."""
    return build_nms_stage(["a", "b", "c"], rows=None)


def generate_detection(out_dir, save):
    """Writes the detector models (through `save`, so that they are indexed)
    and Detection/nms-random.json."""
    save("Detector.mlmodel", build_detector())
    save("DetectorRaw.mlmodel", build_blob_network())
    save("DetectorNMS.mlmodel", build_nms_only())
    save("ImageInverter.mlmodel", build_image_inverter())
    save("ColourSegmenter.mlmodel", build_colour_segmenter())
    folder = os.path.join(out_dir, "Detection")
    os.makedirs(folder, exist_ok=True)
    document = {"note": "Random boxes (centre x, centre y, width, height) of 3 classes; `kept` is the class-agnostic "
                        "NMS of Fixtures/detection.py (NumPy float64): the indices kept, in visiting order.",
                "cases": nms_random_cases(count=12, boxes=150)}
    with open(os.path.join(folder, "nms-random.json"), "w") as f:
        json.dump(document, f, separators=(",", ":"), sort_keys=True)
        f.write("\n")


# ---------------------------------------------------------------------------
# Image outputs and segmentation
# ---------------------------------------------------------------------------

def build_image_inverter():
    """A 32x32 RGB image in, its negative (255 - x) out as an image: a model
    whose output is an image (style transfer, super-resolution shape)."""
    builder = NeuralNetworkBuilder([("image", datatypes.Array(3, 32, 32))], [("inverted", datatypes.Array(3, 32, 32))])
    builder.add_activation("negate", "LINEAR", "image", "inverted", params=[-1.0, 255.0])
    builder.set_pre_processing_parameters(image_input_names=["image"], image_scale=1.0)
    spec = builder.spec
    output = spec.description.output[0]
    output.type.ClearField("multiArrayType")
    output.type.imageType.width = 32
    output.type.imageType.height = 32
    output.type.imageType.colorSpace = FeatureTypes_pb2.ImageFeatureType.RGB
    return spec


def build_colour_segmenter():
    """A 32x32 RGB image in, per-pixel scores of three classes (red, green,
    blue: the channels scaled to 0...1) out as a [3, 32, 32] multi-array: the
    shape of a segmentation model's output."""
    builder = NeuralNetworkBuilder([("image", datatypes.Array(3, 32, 32))], [("scores", datatypes.Array(3, 32, 32))])
    builder.add_activation("identity", "LINEAR", "image", "scores", params=[1.0, 0.0])
    builder.set_pre_processing_parameters(image_input_names=["image"], image_scale=1.0 / 255.0)
    spec = builder.spec
    spec.description.metadata.userDefined["classes"] = "red,green,blue"
    return spec
