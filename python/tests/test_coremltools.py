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
