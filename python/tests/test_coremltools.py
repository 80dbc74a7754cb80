"""coremltools' predict() on Linux through modelc.enable()."""

import numpy as np
import pytest

ct = pytest.importorskip("coremltools")

import modelc
import modelc.coremltools
from conftest import FIXTURES


def test_mlmodel_predict_runs_through_modelc(tmp_path):
    assert modelc.coremltools.enable() in (True, False)
    mlmodel = ct.models.MLModel(str(FIXTURES / "Models" / "GLMClassifier.mlmodel"))
    outputs = mlmodel.predict({"features": np.array([1.0, 2, 3, 4])})
    assert outputs["species"] == 1
    assert set(outputs["classProbability"]) == {0, 1, 2}
    batch = mlmodel.predict([{"features": np.array([1.0, 2, 3, 4])}] * 2)
    assert batch == [outputs, outputs]
    with pytest.raises(modelc.InputError):
        mlmodel.predict({"features": np.zeros(3)})
    with pytest.raises(TypeError):
        mlmodel.predict("not a dict")


def test_converted_program_and_compiled_model(tmp_path):
    from coremltools.converters.mil import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3))])
    def program(x):
        return mb.add(x=mb.mul(x=x, y=2.0), y=1.0, name="y")

    mlmodel = ct.convert(program, convert_to="mlprogram", compute_precision=ct.precision.FLOAT32)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = mlmodel.predict({"x": x})["y"]
    np.testing.assert_allclose(got, x * 2 + 1)
    assert got.dtype == np.float32
    saved = tmp_path / "p.mlpackage"
    mlmodel.save(str(saved))
    compiled = ct.models.CompiledMLModel(modelc.compile_model(saved, tmp_path / "p.mlmodelc"))
    np.testing.assert_allclose(compiled.predict({"x": x})["y"], x * 2 + 1)


def test_image_in_and_image_out(tmp_path):
    """PIL images in and out, as coremltools gives them, on a program whose output is declared an RGB image."""
    from PIL import Image
    from coremltools.converters.mil import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 3, 4, 6))], opset_version=ct.target.iOS16)
    def invert(x):
        return mb.sub(x=255.0, y=x, name="y")

    mlmodel = ct.convert(invert, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS16,
                         inputs=[ct.ImageType(name="x", shape=(1, 3, 4, 6), color_layout=ct.colorlayout.RGB)],
                         compute_precision=ct.precision.FLOAT32)
    spec = mlmodel.get_spec()
    output = spec.description.output[0]
    output.type.imageType.width = 6
    output.type.imageType.height = 4
    output.type.imageType.colorSpace = ct.proto.FeatureTypes_pb2.ImageFeatureType.RGB
    path = tmp_path / "invert.mlpackage"
    ct.models.MLModel(spec, weights_dir=mlmodel.weights_dir, skip_model_load=True).save(str(path))
    pixels = np.arange(72, dtype=np.uint8).reshape(4, 6, 3)
    with modelc.Model(path) as model:
        got = model.predict({"x": Image.fromarray(pixels)})["y"]
    assert isinstance(got, Image.Image) and got.mode == "RGB" and got.size == (6, 4)
    np.testing.assert_array_equal(np.asarray(got), 255 - pixels)


STATEFUL = FIXTURES / "Models" / "StatefulProgram.mlpackage"


def _accumulates_as_numpy(predict):
    """StatefulProgram (Fixtures/generate.py): total = state x decay + x in
    float16, state <- total, y = total / 2. Checked against the same
    recurrence in float64, with the decay read back from the first two steps."""
    ones = np.ones((1, 16), dtype=np.float32)
    y1 = predict(ones)
    np.testing.assert_array_equal(y1, np.full((1, 16), 0.5))
    y2 = predict(ones).astype(np.float64)
    decay = 2 * y2 - 1
    assert ((decay >= 0.499) & (decay < 1.0)).all()
    total = 2 * y2
    rng = np.random.default_rng(7)
    for _ in range(4):
        x = rng.uniform(-1, 1, (1, 16)).astype(np.float32)
        total = total * decay + x
        np.testing.assert_allclose(predict(x), total / 2, rtol=0, atol=1e-2)  # float16 steps
    return y1


def test_state_carries_between_predictions_and_a_new_state_starts_at_zero():
    with modelc.Model(STATEFUL) as model:
        with model.make_state() as state:
            first = _accumulates_as_numpy(lambda x: model.predict({"x": x}, state=state)["y"])
        with model.make_state() as fresh:
            np.testing.assert_array_equal(model.predict({"x": np.ones((1, 16), np.float32)}, state=fresh)["y"], first)


def test_coremltools_make_state_and_predict_with_state():
    modelc.coremltools.enable()
    mlmodel = ct.models.MLModel(str(STATEFUL))
    state = mlmodel.make_state()
    _accumulates_as_numpy(lambda x: mlmodel.predict({"x": x}, state=state)["y"])


def test_a_computation_that_fails_raises_runtime_error_as_core_ml_does():
    modelc.coremltools.enable()
    mlmodel = ct.models.MLModel(str(FIXTURES / "Parity" / "TensorOps" / "Refused" / "index_out_of_range.mlpackage"))
    x = np.ones((4, 3), np.float32)
    with pytest.raises(RuntimeError, match="Unable to compute the prediction using ML Program") as raised:
        mlmodel.predict({"x": x, "i": np.array([1, 7], np.int32)})
    # Still modelc's InputError, naming the operation's output and the index.
    assert isinstance(raised.value, modelc.InputError)
    assert 'feature "y": index 7 is outside an axis of size 4' in str(raised.value)
    # A wrong input stays an InputError only.
    with pytest.raises(modelc.InputError) as wrong:
        mlmodel.predict({"x": np.ones((2, 2), np.float32), "i": np.array([1, 2], np.int32)})
    assert not isinstance(wrong.value, RuntimeError)


def test_an_in_memory_model_leaves_no_temporary_files(tmp_path, monkeypatch):
    import gc
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    modelc.coremltools.enable()
    mlmodel = ct.models.MLModel(str(FIXTURES / "Models" / "GLMClassifier.mlmodel"))
    assert mlmodel.predict({"features": np.array([1.0, 2, 3, 4])})["species"] == 1
    saved = list(tmp_path.glob("modelc-coremltools-*"))
    assert len(saved) == 1 and (saved[0] / "model.mlmodel").exists()
    del mlmodel
    gc.collect()
    assert not saved[0].exists()
