#!/usr/bin/env python3
"""Reference outputs for the neural networks of Fixtures/Models.

Usage:
    model_references.py [--out DIR]   write DIR/Parity/Models/ (default DIR: the folder of this script)

For every neural network in Fixtures/Models (and the pipeline holding one) that no other
parity file copies, this writes Parity/Models/NAME.json: seeded inputs and the outputs an
independent engine gives for them, in the format of Fixtures/Parity/README.md. The file's
`model` names the committed model itself (`../../Models/NAME.mlmodel`), so the reference
follows the fixture the other tests use. The references are onnxruntime running an ONNX
graph rebuilt from the weights (the convolutional classifiers, as Fixtures/network_parity.py
does for their siblings) or a NumPy float64 forward pass written here from the layer
definitions in NeuralNetwork.proto, with the NMS of Fixtures/detection.py for the detector
pipeline. Weights are decoded from the saved specification by this script; the outputs never
come from evaluating a Core ML model.

ImageClassifier, ImageClassifierFP16, ImageClassifierInt8 and ImageClassifierFlexible are
copied, with their references, into Parity/Networks by network_parity.py; ImageInverter's
output is an image, checked pixel by pixel in Tests/ModelRuntimeTests (255 - input).

Everything is deterministic: fixed seeds, no dates. Running the script twice gives
byte-identical files.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("TQDM_DISABLE", "1")

import numpy as np

import detection
import network_parity as nnp

HERE = os.path.dirname(os.path.abspath(__file__))
SUBDIR = os.path.join("Parity", "Models")
NUMPY = "NumPy %s float64 forward pass" % np.__version__
README_HEADING = "## Models"


def spec_of(name):
    return nnp.load_spec(os.path.join(HERE, "Models", name + ".mlmodel"))


def layer(spec, name):
    return [l for l in nnp.nn_layers(spec) if l.name == name][0]


def params(spec, name):
    found = layer(spec, name)
    return getattr(found, found.WhichOneof("layer"))


def f32(value):
    """A float32 parameter as float64 (what the network computes with)."""
    return float(np.float32(value))


class Writer:
    def __init__(self, out_dir):
        self.dir = os.path.join(out_dir, SUBDIR)
        self.entries = []

    def write(self, name, kind, reference, cases, checks, note, tolerance=1e-4):
        assert 1 <= len(cases) <= nnp.MAX_CASES, (name, len(cases))
        doc = {"model": "../../Models/%s.mlmodel" % name, "kind": kind, "reference": reference,
               "tolerance": tolerance, "note": note,
               "cases": [{"inputs": nnp.enc(c["inputs"], inputs=True), "outputs": nnp.enc(c["outputs"])}
                         for c in cases]}
        # Compact: the images' pixels would take a line each.
        text = (json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n").encode()
        assert len(text) <= nnp.MAX_JSON_BYTES, (name, len(text))
        nnp.write_bytes(os.path.join(self.dir, name + ".json"), text)
        self.entries.append((name, kind, reference, len(cases), checks))


# ---------------------------------------------------------------------------
# Convolutional classifiers: onnxruntime on the rebuilt graph
# ---------------------------------------------------------------------------

def classifier_cases(writer):
    rng = np.random.default_rng(9401)
    spec = spec_of("ImageClassifierEnumerated")
    sizes = [(s.width, s.height) for s in spec.description.input[0].type.imageType.enumeratedSizes.sizes]
    run = nnp.onnx_from_nn(spec, "image", 3)
    cases = []
    for width, height in sizes:
        image = nnp.random_image(rng, width, height)
        cases.append({"inputs": {"image": nnp.image_value(image)},
                      "outputs": nnp.classifier_outputs(spec, run(nnp.preprocess(spec, "image", image)))})
    writer.write("ImageClassifierEnumerated", "neuralNetworkClassifier", nnp.ORT, cases,
                 "conv/batchnorm/relu/max pool/conv/relu/global average pool/inner product/softmax at every "
                 "enumerated size (%s)" % ", ".join("%dx%d" % s for s in sizes),
                 nnp.IMAGE_NOTE + " One case per enumerated image size (WxH).")

    spec = spec_of("ImageFeatureBase")
    run = nnp.onnx_from_nn(spec, "image", 3)
    cases = []
    for _ in range(3):
        image = nnp.random_image(rng, 32, 32)
        cases.append({"inputs": {"image": nnp.image_value(image)},
                      "outputs": nnp.classifier_outputs(spec, run(nnp.preprocess(spec, "image", image)))})
    writer.write("ImageFeatureBase", "neuralNetworkClassifier", nnp.ORT, cases,
                 "the training base network: three conv/relu/pool stages, global average pool, inner product, "
                 "softmax; 32x32 RGB",
                 nnp.IMAGE_NOTE)


# ---------------------------------------------------------------------------
# Small networks: NumPy float64
# ---------------------------------------------------------------------------

def mean_color_cases(writer):
    rng = np.random.default_rng(9402)
    for name in ("MeanColor", "MeanColorEnumerated"):
        spec = spec_of(name)
        image_type = spec.description.input[0].type.imageType
        sizes = [(s.width, s.height) for s in image_type.enumeratedSizes.sizes] or [(image_type.width, image_type.height)]
        cases = []
        for width, height in (sizes * 3)[:max(3, len(sizes))]:
            image = nnp.random_image(rng, width, height)
            x = nnp.preprocess(spec, "image", image)
            cases.append({"inputs": {"image": nnp.image_value(image)}, "outputs": {"meanColor": x.mean(axis=(1, 2))}})
        writer.write(name, "neuralNetwork", NUMPY, cases,
                     "global average pool and flatten of the RGB image (scale 1): the mean red, green and blue",
                     "Image input [3, H, W], value = byte; meanColor = the mean over H and W per channel."
                     + (" One case per enumerated size (WxH) %s." % sizes if len(sizes) > 1 else ""))


def colour_segmenter_cases(writer):
    rng = np.random.default_rng(9403)
    spec = spec_of("ColourSegmenter")
    activation = params(spec, "identity").linear
    cases = []
    for _ in range(1):  # 3 x 32 x 32 scores are ~48 KB of JSON
        image = nnp.random_image(rng, 32, 32)
        x = nnp.preprocess(spec, "image", image)
        cases.append({"inputs": {"image": nnp.image_value(image)},
                      "outputs": {"scores": f32(activation.alpha) * x + f32(activation.beta)}})
    writer.write("ColourSegmenter", "neuralNetwork", NUMPY, cases,
                 "the image scaled by 1/255 through a linear activation: per-pixel class scores [3, 32, 32]",
                 "Image input [3, 32, 32] RGB, value = byte * float32(1/255); scores = alpha * value + beta "
                 "(linear activation, alpha 1, beta 0).")


def array_regressor_cases(writer):
    rng = np.random.default_rng(9404)
    for name, batches in (("ArrayRegressor", [1, 3, 7, 1]), ("ArrayRegressorEnumerated", [1, 4, 16])):
        spec = spec_of(name)
        dense1, dense2 = params(spec, "dense1"), params(spec, "dense2")

        def dense(p, x):
            # batchedMatmul stores its weight matrix transposed: [columns (C_out), rows (C_in)].
            w = nnp.nn_weights(p.weights, (p.weightMatrixSecondDimension, p.weightMatrixFirstDimension))
            return x @ w.T + nnp.nn_weights(p.bias, (p.weightMatrixSecondDimension,))

        cases = []
        for batch in batches:
            x = nnp.f32(rng.uniform(-2, 2, (batch, 8)))
            cases.append({"inputs": {"features": x}, "outputs": {"target": dense(dense2, np.maximum(dense(dense1, x), 0))}})
        writer.write(name, "neuralNetworkRegressor", NUMPY, cases,
                     "batchedMatmul (8 -> 16, bias), ReLU, batchedMatmul (16 -> 4, bias) over a batch of N; N = %s"
                     % ", ".join(map(str, batches)),
                     "EXACT_ARRAY_MAPPING: the input keeps its shape [N, 8]; target = relu(x W1 + b1) W2 + b2 with "
                     "the weights decoded from the specification (stored [C_out, C_in]).")


def updatable_classifier_cases(writer):
    rng = np.random.default_rng(9405)
    spec = spec_of("UpdatableClassifier")

    def inner(name, x):
        p = params(spec, name)
        return nnp.nn_weights(p.weights, (p.outputChannels, p.inputChannels)) @ x + nnp.nn_weights(p.bias, (p.outputChannels,))

    cases = []
    for _ in range(6):
        x = nnp.f32(rng.uniform(-3, 3, 4))
        probabilities = nnp.softmax(inner("dense2", np.maximum(inner("dense1", x), 0)), 0)
        cases.append({"inputs": {"features": x}, "outputs": nnp.classifier_outputs(spec, probabilities)})
    writer.write("UpdatableClassifier", "neuralNetworkClassifier", NUMPY, cases,
                 "innerProduct (4 -> 8), ReLU, innerProduct (8 -> 3), softmax; int64 labels",
                 "Multi-array input [4] (rank-5 mapping: [4, 1, 1]); classProbs is the softmax as a dictionary, "
                 "classLabel its arg max.")


def detector_network(spec, image):
    """The blob detector's layers (Fixtures/detection.py) over a [1, H, W] gray image, in float64:
    pixel moments by the batchedMatmul's weights, centre and standard deviation, two boxes."""
    network = spec if spec.WhichOneof("Type") == "neuralNetwork" else spec.pipeline.models[0]
    x = nnp.preprocess(network, "image", image).reshape(1, -1)
    moments = params(network, "moments")
    w = nnp.nn_weights(moments.weights, (moments.weightMatrixSecondDimension, moments.weightMatrixFirstDimension))
    sums = x @ w.T
    mass = sums[:, 0:1]
    centre = sums[:, 1:3] / mass
    variance = sums[:, 3:5] / mass - centre * centre
    unary = params(network, "sd")
    assert unary.type == 0 and f32(unary.scale) == 1 and unary.shift == 0, unary  # SQRT of x
    sd = np.sqrt(variance)

    def constant(name):
        p = params(network, name)
        return np.array(p.data.floatValue, dtype=np.float32).astype(np.float64).reshape(tuple(p.shape))

    box0 = np.concatenate([centre, sd * constant("four")], axis=1)
    box1 = np.concatenate([centre, sd * constant("wider")], axis=1)
    coordinates = np.concatenate([box0, box1], axis=0)
    confidence = constant("scores") + mass * constant("zero")
    return confidence, coordinates


def detector_images(rng):
    size = detection.SIZE
    images = [detection.gaussian_blob(size, size, 20.5, 40.0, 5.0, 3.0),
              detection.gaussian_blob(size, size, 44.0, 18.0, 2.5, 7.0),
              detection.gaussian_blob(size, size, 32.0, 32.0, 9.0, 9.0)]
    images.append(rng.integers(0, 256, (size, size), dtype=np.uint8))
    return [image[:, :, None] for image in images]


DETECTOR_NOTE = (
    "Gray image input [1, 64, 64], value = byte * float32(1/255). The network sums the pixels against "
    "[1, x, y, x^2, y^2] (pixel centres, the batchedMatmul's weights as stored): mass, centre = first moments / "
    "mass, standard deviation = sqrt(second moments / mass - centre^2); two boxes (centre, 4 and 4.4 standard "
    "deviations wide) with constant confidences. E[x^2] - E[x]^2 over 4096 float32 pixels loses digits in "
    "float32: the engines are about 5e-6 from the reference, inside the tolerance of 1e-4.")


def detector_cases(writer):
    rng = np.random.default_rng(9406)
    spec = spec_of("DetectorRaw")
    cases = []
    for image in detector_images(rng):
        confidence, coordinates = detector_network(spec, image)
        cases.append({"inputs": {"image": nnp.image_value(image)},
                      "outputs": {"confidence": confidence, "coordinates": coordinates}})
    writer.write("DetectorRaw", "neuralNetwork", NUMPY, cases,
                 "the blob detector without NMS: reshapeStatic, batchedMatmul, sliceStatic, broadcast arithmetic, "
                 "unary sqrt, loadConstantND, concatND", DETECTOR_NOTE)

    spec = spec_of("Detector")
    nms = spec.pipeline.models[1].nonMaximumSuppression
    cases = []
    for image in detector_images(rng):
        confidence, coordinates = detector_network(spec, image)
        kept = detection.nms_numpy(confidence, coordinates, nms.iouThreshold, nms.confidenceThreshold)
        cases.append({"inputs": {"image": nnp.image_value(image)},
                      "outputs": {"confidence": confidence[kept], "coordinates": coordinates[kept]}})
    writer.write("Detector", "pipeline", NUMPY + " and the NMS of Fixtures/detection.py", cases,
                 "the blob detector network then class-agnostic NMS (IoU %g, confidence %g)"
                 % (nms.iouThreshold, nms.confidenceThreshold),
                 DETECTOR_NOTE + " NMS with the stage's default thresholds (the optional threshold inputs "
                 "left out): the boxes kept, in visiting order.")


def write_readme(writer, out_dir):
    path = os.path.join(out_dir, "Parity", "README.md")
    with open(path) as f:
        text = f.read()
    lines = [README_HEADING, "",
             "Made by `Fixtures/model_references.py`: references for the neural networks of `Fixtures/Models` "
             "themselves (each file's `model` is `../../Models/NAME.mlmodel`).", ""]
    for name, kind, reference, count, checks in writer.entries:
        lines.append("- `Models/%s.json` (%s, %d cases, %s): %s" % (name, kind, count, reference, checks))
    section = "\n".join(lines) + "\n"
    start = text.find(README_HEADING + "\n")
    if start >= 0:
        end = text.find("\n## ", start + len(README_HEADING))
        text = text[:start] + section + (text[end + 1:] if end >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    nnp.write_bytes(path, text.encode())


def generate(out_dir):
    writer = Writer(out_dir)
    classifier_cases(writer)
    mean_color_cases(writer)
    colour_segmenter_cases(writer)
    array_regressor_cases(writer)
    updatable_classifier_cases(writer)
    detector_cases(writer)
    write_readme(writer, out_dir)
    return writer.entries


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=HERE, help="output folder (default: %(default)s)")
    args = parser.parse_args(argv)
    entries = generate(os.path.abspath(args.out))
    print("wrote %d model reference files to %s" % (len(entries), os.path.join(os.path.abspath(args.out), SUBDIR)))


if __name__ == "__main__":
    sys.exit(main())
