"""Bad input gets a Python exception naming the input, never a crash."""

import ctypes
import shutil

import numpy as np
import pytest

import modelc
from modelc import _native
from conftest import FIXTURES

GLM = FIXTURES / "Models" / "GLMClassifier.mlmodel"


@pytest.fixture
def glm():
    with modelc.Model(GLM) as model:
        yield model


def test_wrong_dtype_names_the_input(glm):
    with pytest.raises(modelc.InputError, match='input "features" has dtype <U1'):
        glm.predict({"features": np.array(["a", "b", "c", "d"])})
    with pytest.raises(modelc.InputError, match='input "features"'):
        glm.predict({"features": np.array([1 + 2j, 0, 0, 0])})


def test_unknown_dtype_code_is_refused_by_the_c_interface():
    lib = _native.library()
    features = lib.modelc_features_new()
    try:
        shape = (ctypes.c_int64 * 1)(4)
        data = np.zeros(4)
        status = lib.modelc_features_add_array(features, b"features", 42, shape, 1, data.ctypes.data)
        assert status == 64
        assert lib.modelc_last_error() == b'input "features": unknown data type 42'
    finally:
        lib.modelc_features_free(features)


def test_wrong_shape_names_the_input(glm):
    with pytest.raises(modelc.InputError) as error:
        glm.predict({"features": np.zeros(3)})
    assert str(error.value) == 'input "features" has shape 3, expected 4'
    assert error.value.status == 93
    with pytest.raises(modelc.InputError, match='input "features"'):
        glm.predict_batch({"features": np.zeros((5, 7))})


def test_missing_input_names_the_input(glm):
    with pytest.raises(modelc.InputError, match='input "features" is missing'):
        glm.predict({})


def test_a_failed_row_of_a_batch_names_its_row(glm):
    with pytest.raises(modelc.InputError) as error:
        glm.predict([{"features": np.zeros(4)}, {"features": np.zeros(2)}])
    assert error.value.row == 1


def test_closed_model():
    model = modelc.Model(GLM)
    model.close()
    model.close()
    for call in (lambda: model.predict({"features": np.zeros(4)}), lambda: model.predict_batch({"features": np.zeros((2, 4))}),
                 model.make_state):
        with pytest.raises(modelc.ClosedError):
            call()


def test_state_of_a_model_without_state(glm):
    with pytest.raises(modelc.InputError, match="declares no state"):
        glm.make_state()


def test_freed_state_raises_and_a_state_serves_only_its_model():
    with modelc.Model(FIXTURES / "Models" / "StatefulProgram.mlpackage") as model, \
            modelc.Model(FIXTURES / "Models" / "StatefulProgram.mlpackage") as other:
        ones = {"x": np.ones((1, 16), dtype=np.float32)}
        state = model.make_state()
        with pytest.raises(modelc.InputError, match="another model"):
            other.predict(ones, state=state)
        state.close()
        state.close()
        with pytest.raises(modelc.ClosedError):
            model.predict(ones, state=state)


def test_model_file_deleted_under_an_open_model(tmp_path):
    source = tmp_path / "glm.mlmodel"
    shutil.copy(GLM, source)
    bundle = modelc.compile_model(source, tmp_path / "glm.mlmodelc")
    for path in (source, bundle):
        model = modelc.Model(path)
        if path == source:
            source.unlink()
        else:
            shutil.rmtree(bundle)
        try:
            outputs = model.predict({"features": np.array([1.0, 2, 3, 4])})
            assert outputs["species"] == 1
        except modelc.ModelError:
            pass
        model.close()


def test_missing_and_broken_files():
    with pytest.raises(modelc.ModelFileError) as error:
        modelc.Model("/nonexistent/x.mlmodel")
    assert error.value.status == 66
    with pytest.raises(modelc.ModelFileError):
        modelc.Model(FIXTURES / "Broken" / "truncated.mlmodel")
    with pytest.raises(modelc.ModelFileError):
        modelc.Model(FIXTURES / "Images" / "not-an-image.png")


def test_image_inputs(tmp_path):
    from PIL import Image
    with modelc.Model(FIXTURES / "Models" / "ImageClassifier.mlmodel") as model:
        red = Image.new("RGB", (16, 16), (250, 10, 10))
        as_pil = model.predict({"image": red})
        red.save(tmp_path / "red.png")
        as_bytes = model.predict({"image": (tmp_path / "red.png").read_bytes()})
        assert as_pil == as_bytes
        assert as_pil["classLabel"] in model.class_labels
        # Another size is fitted (center crop, then scale) as encoded files are.
        large = Image.new("RGB", (48, 32), (250, 10, 10))
        large.save(tmp_path / "large.png")
        assert model.predict({"image": large}) == model.predict({"image": (tmp_path / "large.png").read_bytes()})
        with pytest.raises(modelc.ImageError):
            model.predict({"image": b"not an image at all"})
        with pytest.raises(modelc.InputError, match='input "image"'):
            model.predict({"image": np.zeros((16, 16, 3))})


def test_flexible_image_sizes_are_checked():
    from PIL import Image
    with modelc.Model(FIXTURES / "Models" / "ImageClassifierEnumerated.mlmodel") as model:
        assert model.predict({"image": Image.new("RGB", (64, 48))})["classLabel"] in model.class_labels
        with pytest.raises(modelc.InputError, match='input "image" is a 17×16 image, expected one of 16×16, 32×32, 64×48'):
            model.predict({"image": Image.new("RGB", (17, 16))})


def test_compile_and_fetch(tmp_path):
    import hashlib
    bundle = modelc.compile_model(GLM, tmp_path / "out.mlmodelc")
    assert bundle.endswith("out.mlmodelc")
    with modelc.Model(bundle) as model:
        assert model.predict({"features": np.array([1.0, 2, 3, 4])})["species"] == 1
    digest = hashlib.sha256(GLM.read_bytes()).hexdigest()
    fetched = modelc.fetch(GLM.as_uri(), sha256=digest)
    assert open(fetched, "rb").read() == GLM.read_bytes()
    with pytest.raises(modelc.FetchError) as error:
        modelc.fetch(GLM.as_uri(), sha256="0" * 64)
    assert error.value.status == 83
    with pytest.raises(modelc.ModelFileError):
        modelc.compile_model(FIXTURES / "Broken" / "wrong-weight-count.mlmodel", tmp_path / "bad.mlmodelc")


def test_description(glm):
    assert glm.class_labels == [0, 1, 2]
    assert list(glm.input_description) == ["features"]
    assert glm.input_description["features"]["dataType"] == "DOUBLE"
    assert list(glm.output_description) == ["species", "classProbability"]
    assert "userDefined" in glm.metadata
    with modelc.Model(FIXTURES / "Models" / "ImageClassifier.mlmodel") as image:
        assert image.metadata["author"] == "modelc fixtures"
