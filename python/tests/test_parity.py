"""Predictions through Python against the fixtures' independent references
(scikit-learn, XGBoost, NumPy float64 forward passes), the Swift CLI, and
scikit-learn trained here."""

import json
import math
import pathlib
import subprocess

import numpy as np
import pytest

import modelc
from conftest import FIXTURES, modelc_binary

PARITY = sorted((FIXTURES / "Parity").glob("*.json")) + sorted((FIXTURES / "Parity" / "Networks").glob("*.json"))


def convert(value, description):
    kind = description.get("type") if description else None
    if kind == "imageType" and isinstance(value, dict):
        from PIL import Image
        channels = {"rgb": 3, "gray": 1, "rgba": 4}[value.get("pixelFormat", "rgb")]
        pixels = np.array(value["pixels"], dtype=np.uint8).reshape(value["height"], value["width"], channels)
        return Image.fromarray(pixels[..., 0] if channels == 1 else pixels)
    if kind == "multiArrayType":
        return np.array(value, dtype=float)
    if kind == "doubleType":
        return float("nan") if value is None else float(value)
    if kind == "int64Type":
        return int(value)
    if kind == "dictionaryType":
        if description.get("keyType") == "int64KeyType":
            return {int(k): v for k, v in value.items()}
        return dict(value)
    return value


def close(got, want, tolerance, where):
    if isinstance(want, dict):
        assert isinstance(got, dict), where
        got = {str(k): v for k, v in got.items()}
        for key, value in want.items():
            close(got.get(str(key), 0.0), value, tolerance, "%s[%s]" % (where, key))
        return
    if isinstance(want, str):
        assert str(got) == want, where
        return
    if isinstance(want, list) and want and all(isinstance(item, str) for item in want):
        assert list(got) == want, where
        return
    if isinstance(want, list) or isinstance(got, np.ndarray):
        want_array = np.array(want, dtype=float)
        got_array = np.asarray(got, dtype=float).reshape(want_array.shape)
        bound = tolerance * np.maximum(1, np.abs(want_array))
        both_nan = np.isnan(want_array) & np.isnan(got_array)
        assert np.all(both_nan | (np.abs(got_array - want_array) <= bound)), where
        return
    if want is None:
        assert got is None or (isinstance(got, float) and math.isnan(got)), where
        return
    if isinstance(want, bool) or isinstance(got, str):
        assert str(got) == str(want), where
        return
    assert abs(float(got) - float(want)) <= tolerance * max(1, abs(float(want))), where


@pytest.mark.parametrize("path", PARITY, ids=[p.stem for p in PARITY])
def test_parity_fixture(path):
    fixture = json.loads(path.read_text())
    tolerance = float(fixture.get("tolerance", 1e-6))
    try:
        model = modelc.Model(path.parent / fixture["model"])
    except modelc.UnsupportedModelError as error:
        pytest.skip(str(error))
    with model:
        inputs = model.input_description
        for number, case in enumerate(fixture["cases"]):
            values = {name: convert(value, inputs.get(name)) for name, value in case["inputs"].items()}
            if "error" in case or "outputs" not in case:
                with pytest.raises(modelc.ModelError):
                    model.predict(values)
                continue
            got = model.predict(values)
            for name, want in case["outputs"].items():
                close(got[name], want, tolerance, "%s case %d output %s" % (path.stem, number, name))


def test_batches_equal_single_predictions():
    with modelc.Model(FIXTURES / "Parity" / "forest_classifier_multiclass.mlmodel") as model:
        fixture = json.loads((FIXTURES / "Parity" / "forest_classifier_multiclass.json").read_text())
        rows = [{"features": np.array(case["inputs"]["features"])} for case in fixture["cases"]]
        single = [model.predict(row) for row in rows]
        assert model.predict(rows) == single
        columns = model.predict_batch({"features": np.stack([row["features"] for row in rows])})
        labels = model.class_labels
        for index, one in enumerate(single):
            assert columns["label"][index] == one["label"]
            assert list(columns["classProbability"][index]) == [one["classProbability"][label] for label in labels]


@pytest.mark.parametrize("name", ["GLMClassifier.mlmodel", "TreeEnsembleClassifier.mlmodel", "SVMClassifier.mlmodel",
                                  "TreeEnsembleRegressor.mlmodel", "Scaler.mlmodel"])
def test_python_agrees_with_the_swift_cli(name, tmp_path):
    binary = modelc_binary()
    if binary is None:
        pytest.skip("the modelc CLI is not built")
    path = FIXTURES / "Models" / name
    with modelc.Model(path) as model:
        rng = np.random.default_rng(3)
        rows = []
        for _ in range(5):
            row = {}
            for input_name, description in model.input_description.items():
                shape = description.get("shape") or [1]
                row[input_name] = rng.normal(size=shape).round(3)
            rows.append(row)
        lines = "\n".join(json.dumps({k: v.tolist() for k, v in row.items()}) for row in rows)
        (tmp_path / "rows.jsonl").write_text(lines + "\n")
        printed = subprocess.run([str(binary), "predict", str(path), "--inputs", str(tmp_path / "rows.jsonl"), "--json"],
                                 capture_output=True, text=True, check=True).stdout.splitlines()
        for row, line in zip(model.predict(rows), printed):
            want = json.loads(line)["outputs"]
            for output, value in want.items():
                close(row[output], value, 1e-12, "%s %s" % (name, output))


def sklearn_models():
    sklearn = pytest.importorskip("sklearn")
    ct = pytest.importorskip("coremltools")
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.svm import SVC
    rng = np.random.default_rng(11)
    centers = rng.normal(0, 0.6, (3, 20))
    y = rng.integers(0, 3, 600)
    X = centers[y] + rng.normal(0, 1, (600, 20))
    forest = RandomForestClassifier(n_estimators=20, max_depth=8, random_state=0).fit(X, y)
    svm = SVC(kernel="rbf", gamma="scale", probability=True, random_state=0).fit(X[:300], y[:300])
    return ct, X, forest, svm


def test_predict_batch_matches_scikit_learn(tmp_path):
    ct, X, forest, svm = sklearn_models()
    rows = np.random.default_rng(5).normal(0, 1.2, (3000, 20))
    for name, estimator, tolerance in (("forest", forest, 1e-9), ("svm", svm, 1e-5)):
        path = tmp_path / (name + ".mlmodel")
        ct.utils.save_spec(ct.converters.sklearn.convert(estimator, "features", "label").get_spec(), str(path))
        with modelc.Model(path) as model:
            got = model.predict_batch({"features": rows})
            want = estimator.predict_proba(rows)
            if name == "forest":
                # Core ML's forest sums the trees' leaf fractions; scikit-learn averages them.
                want = want * len(estimator.estimators_)
            order = [list(estimator.classes_).index(label) for label in model.class_labels]
            np.testing.assert_allclose(got["classProbability"], want[:, order], rtol=tolerance, atol=tolerance)
            # The columnar path and the row path give the same numbers.
            single = model.predict([{"features": row} for row in rows[:50]])
            for index, outputs in enumerate(single):
                assert outputs["label"] == got["label"][index]
