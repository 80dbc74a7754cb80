"""What coremltools' converter tests check of Core ML's binding (issue 37), through modelc.coremltools:
image inputs and outputs of every colour space, optional inputs, flexible-shape errors, rank-0 outputs,
make_image_input's NHWC transpose.

Each model is built here with coremltools' MIL builder and converter (no PyTorch needed); the
expected values are NumPy's, the expected types and wording Core ML's binding's."""

import numpy as np
import pytest

ct = pytest.importorskip("coremltools")
Image = pytest.importorskip("PIL.Image")

from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import get_new_symbol, types  # noqa: E402

import modelc  # noqa: E402
import modelc.coremltools  # noqa: E402


@pytest.fixture(autouse=True)
def through_modelc():
    modelc.coremltools.enable()


def _convert(program, **options):
    options.setdefault("compute_precision", ct.precision.FLOAT32)
    return ct.convert(program, convert_to="mlprogram", **options)


def _with_image_output(mlmodel, tmp_path, colour_space, width, height):
    """``mlmodel`` with its output declared an image (what the converter writes for a traced
    model's ``outputs=[ct.ImageType(...)]``; a MIL program's outputs stay tensors), reloaded."""
    spec = mlmodel.get_spec()
    output = spec.description.output[0]
    output.type.imageType.width = width
    output.type.imageType.height = height
    output.type.imageType.colorSpace = getattr(ct.proto.FeatureTypes_pb2.ImageFeatureType, colour_space)
    path = tmp_path / "image_output.mlpackage"
    ct.models.MLModel(spec, weights_dir=mlmodel.weights_dir, skip_model_load=True).save(str(path))
    return ct.models.MLModel(str(path))


def test_grayscale_uint8_image_in_and_out(tmp_path):
    """An iOS17 grayscale input read as uint8 (grayscale_use_uint8): the pixels, not their float bits."""
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 1, 4, 6), dtype=types.uint8)], opset_version=ct.target.iOS17)
    def transpose(x):
        return mb.cast(x=mb.transpose(x=x, perm=[0, 1, 3, 2]), dtype="fp32", name="y")

    converted = _convert(transpose, minimum_deployment_target=ct.target.iOS17,
                         inputs=[ct.ImageType(name="x", shape=(1, 1, 4, 6), color_layout=ct.colorlayout.GRAYSCALE,
                                              grayscale_use_uint8=True)])
    mlmodel = _with_image_output(converted, tmp_path, "GRAYSCALE", 4, 6)
    pixels = np.random.default_rng(3711).integers(0, 256, (4, 6), dtype=np.uint8)
    got = mlmodel.predict({"x": Image.fromarray(pixels, mode="L")})["y"]
    assert got.mode == "L"
    np.testing.assert_array_equal(np.asarray(got), pixels.T)


def test_colour_image_output_is_rgba_as_core_ml_gives_it(tmp_path):
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 3, 4, 6))], opset_version=ct.target.iOS16)
    def invert(x):
        return mb.sub(x=255.0, y=x, name="y")

    converted = _convert(invert, minimum_deployment_target=ct.target.iOS16,
                         inputs=[ct.ImageType(name="x", shape=(1, 3, 4, 6), color_layout=ct.colorlayout.BGR)])
    mlmodel = _with_image_output(converted, tmp_path, "RGB", 6, 4)
    pixels = np.arange(72, dtype=np.uint8).reshape(4, 6, 3)
    got = mlmodel.predict({"x": Image.fromarray(pixels)})["y"]
    assert got.mode == "RGBA" and got.size == (6, 4)
    rgba = np.asarray(got)
    # The BGR input is the image's channels reversed; 255 minus each, in RGB order, opaque.
    np.testing.assert_array_equal(rgba[..., :3], 255 - pixels[..., ::-1])
    np.testing.assert_array_equal(rgba[..., 3], 255)


def test_half_float_grayscale_image_in_and_out(tmp_path):
    """GRAYSCALE_FLOAT16: float pixels (PIL mode F) in, float pixels out, unrounded and unclamped."""
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 1, 2, 3), dtype=types.fp16)], opset_version=ct.target.iOS16)
    def scale(x):
        return mb.mul(x=x, y=np.float16(300.0), name="y")

    converted = ct.convert(scale, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS16,
                           inputs=[ct.ImageType(name="x", shape=(1, 1, 2, 3), color_layout=ct.colorlayout.GRAYSCALE_FLOAT16)],
                           outputs=[ct.TensorType(name="y", dtype=np.float16)])
    mlmodel = _with_image_output(converted, tmp_path, "GRAYSCALE_FLOAT16", 3, 2)
    values = np.array([[0.0, 0.25, 0.5], [0.75, 1.0, -0.5]], dtype=np.float32)
    got = mlmodel.predict({"x": Image.fromarray(values, mode="F")})["y"]
    assert isinstance(got, Image.Image) and got.mode == "F"
    np.testing.assert_allclose(np.asarray(got), values * 300, rtol=1e-3)
    with pytest.raises(TypeError, match="must be of type PIL.Image.Image with mode=='F'"):
        mlmodel.predict({"x": Image.fromarray(np.zeros((2, 3), np.uint8), mode="L")})


def test_optional_input_left_out_takes_its_default_value():
    @mb.program(input_specs=[mb.TensorSpec(shape=(2,)), mb.TensorSpec(shape=(1,))])
    def add(x, bias):
        return mb.add(x=x, y=bias, name="y")

    mlmodel = _convert(add, inputs=[ct.TensorType(name="x", shape=(2,)),
                                    ct.TensorType(name="bias", shape=(1,), default_value=np.array([3.0], np.float32))])
    x = np.array([1.0, -1.0], np.float32)
    np.testing.assert_array_equal(mlmodel.predict({"x": x})["y"], x + 3)
    np.testing.assert_array_equal(mlmodel.predict({"x": x, "bias": np.array([0.5], np.float32)})["y"], x + 0.5)


def test_flexible_shape_errors_in_core_mls_words():
    @mb.program(input_specs=[mb.TensorSpec(shape=(get_new_symbol(),))])
    def double(x):
        return mb.mul(x=x, y=2.0, name="y")

    ranged = _convert(double, inputs=[ct.TensorType(name="x", shape=(ct.RangeDim(3, 5),))])
    np.testing.assert_array_equal(ranged.predict({"x": np.ones(4, np.float32)})["y"], np.full(4, 2.0))
    with pytest.raises(RuntimeError, match=r"Size \(99\) of dimension \(0\) is not in allowed range \(3\.\.5\)") as raised:
        ranged.predict({"x": np.ones(99, np.float32)})
    assert isinstance(raised.value, modelc.InputError)
    enumerated = _convert(double, inputs=[ct.TensorType(name="x", shape=ct.EnumeratedShapes(shapes=[(2,), (4,)]))])
    with pytest.raises(RuntimeError, match=r"MultiArray Shape \(3\) was not in enumerated set of allowed shapes"):
        enumerated.predict({"x": np.ones(3, np.float32)})


def test_a_rank0_output_is_a_vector_of_one():
    @mb.program(input_specs=[mb.TensorSpec(shape=(3,))])
    def total(x):
        return mb.reduce_sum(x=x, axes=[0], keep_dims=False, name="y")

    for precision in (ct.precision.FLOAT32, ct.precision.FLOAT16):
        mlmodel = _convert(total, compute_precision=precision)
        got = mlmodel.predict({"x": np.array([1.0, 2.0, 3.5], np.float32)})["y"]
        assert got.shape == (1,)
        np.testing.assert_allclose(got, [6.5], rtol=1e-3)


def test_compile_model_and_compiled_model_path(tmp_path):
    """coremltools' compile_model (a spec or a file) and MLModel.get_compiled_model_path through modelc."""
    import os
    import shutil
    from coremltools.models.utils import compile_model

    spec = ct.proto.Model_pb2.Model()
    spec.specificationVersion = 1
    spec.description.input.add().name = "x"
    spec.description.input[0].type.doubleType.MergeFromString(b"")
    spec.description.output.add().name = "y"
    spec.description.output[0].type.doubleType.MergeFromString(b"")
    spec.description.predictedFeatureName = "y"
    spec.glmRegressor.offset.append(0.1)
    spec.glmRegressor.weights.add().value.append(2.0)

    compiled = compile_model(spec)
    try:
        assert compiled.endswith(".mlmodelc") and os.path.isdir(compiled)
        assert ct.models.CompiledMLModel(compiled).predict({"x": 2})["y"] == pytest.approx(4.1)
    finally:
        shutil.rmtree(compiled)
    destination = str(tmp_path / "glm.mlmodelc")
    assert compile_model(spec, destination) == destination
    with pytest.raises(Exception, match=r"must have \".mlmodelc\" file extension"):
        compile_model(spec, str(tmp_path / "glm.bundle"))
    mlmodel = ct.models.MLModel(spec)
    path = mlmodel.get_compiled_model_path()
    assert ct.models.CompiledMLModel(path).predict({"x": 4})["y"] == pytest.approx(8.1)
    with pytest.raises(TypeError, match="already been compiled"):
        compile_model(mlmodel)


def test_int_keys_for_a_vectorizer_of_int_keys_behind_a_string_keyed_input():
    """What coremltools writes for scikit-learn's DictVectorizer fitted on int keys: an int64ToIndex
    vectorizer whose input is declared string-keyed. Core ML's binding takes the int keys."""
    spec = ct.proto.Model_pb2.Model()
    spec.specificationVersion = 1
    feature = spec.description.input.add()
    feature.name = "features"
    feature.type.dictionaryType.stringKeyType.MergeFromString(b"")
    output = spec.description.output.add()
    output.name = "vector"
    output.type.multiArrayType.shape.append(3)
    output.type.multiArrayType.dataType = ct.proto.FeatureTypes_pb2.ArrayFeatureType.DOUBLE
    spec.dictVectorizer.int64ToIndex.vector.extend([7, 42, 3])
    mlmodel = ct.models.MLModel(spec)
    got = mlmodel.predict({"features": {42: 2.0, 3: 5.0, 99: 1.0}})["vector"]
    np.testing.assert_array_equal(got, [0.0, 2.0, 5.0])
    np.testing.assert_array_equal(mlmodel.predict({"features": {"7": 1.5}})["vector"], [1.5, 0.0, 0.0])


def test_make_image_input_nhwc_of_a_rank_aware_network():
    """coremltools' make_image_input(image_format="NHWC") puts a transpose [1, 2, 0] after the
    [1, C, H, W] image of a rank-aware network: it permutes the last three axes (test_model's
    test_multiarray_to_image_input_util_HWC_format), giving the (H, W, C) pixels."""
    from coremltools.models import datatypes
    from coremltools.models.neural_network import NeuralNetworkBuilder
    from coremltools.models.neural_network.utils import make_image_input

    height, width = 2, 3
    builder = NeuralNetworkBuilder([("data", datatypes.Array(height, width, 3))], [("out", datatypes.Array(height, width, 3))],
                                   disable_rank5_shape_mapping=True)
    builder.add_activation("linear", "LINEAR", "data", "out")
    mlmodel = make_image_input(ct.models.MLModel(builder.spec), "data", red_bias=-5, green_bias=-6, blue_bias=-2.5,
                               scale=10.0, image_format="NHWC")
    pixels = np.random.default_rng(3713).integers(0, 256, (height, width, 3), dtype=np.uint8)
    got = mlmodel.predict({"data": Image.fromarray(pixels)})["out"]
    assert got.shape == (height, width, 3)
    np.testing.assert_allclose(got, pixels * 10.0 + [-5, -6, -2.5], rtol=1e-6)
