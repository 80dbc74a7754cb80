#!/usr/bin/env python3
"""Generate the parity fixtures for modelc's runtime of Core ML's classic models.

Usage:
    parity.py [--out DIR]     write DIR/Parity/ (default DIR: the folder of this script)

It also writes Parity/Refused/KIND.mlmodel: tiny specifications of the model kinds
whose parameters only Apple's frameworks can read (text classifier, word tagger,
Vision feature print, ...), which modelc must refuse at load, saying why.

For every case set NAME this writes Parity/NAME.mlmodel and Parity/NAME.json:
the model, and inputs with the outputs that the reference engine (scikit-learn,
XGBoost, or a NumPy float64 computation where no library has the model kind)
gives for them. The runtime must reproduce every output within the file's
tolerance: |got - want| <= tolerance * max(1, |want|). Parity/README.md
describes the format and every file.

The outputs never come from an evaluation of the Core ML specification: they are
the library's own answers (predict, predict_proba, transform). Where Core ML's
documented rule differs from the library, the reference is computed with the
library call that matches Core ML's rule and the file's "note" says so.

Everything is deterministic: fixed seeds, deterministic protobuf serialization,
no dates. Running the script twice gives byte-identical files.
"""

import argparse
import contextlib
import io
import json
import os
import sys
import warnings

os.environ.setdefault("TQDM_DISABLE", "1")

import numpy as np

import coremltools as ct
from coremltools.models import datatypes
from coremltools.models.array_feature_extractor import create_array_feature_extractor
from coremltools.proto import FeatureTypes_pb2
from coremltools.proto import Model_pb2

import sklearn
from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor,
                              RandomForestClassifier, RandomForestRegressor)
from sklearn.feature_extraction import DictVectorizer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import Normalizer, OneHotEncoder, StandardScaler
from sklearn.svm import SVC, SVR, NuSVC, NuSVR
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

try:
    import xgboost
except ImportError:  # optional: its case files are skipped without it
    xgboost = None

HERE = os.path.dirname(os.path.abspath(__file__))
SUBDIR = "Parity"
TOLERANCE = 1e-6
SKLEARN = "scikit-learn %s" % sklearn.__version__
NUMPY = "NumPy %s float64" % np.__version__
VOLATILE_METADATA_KEYS = ("com.github.apple.coremltools.conversion_date",)
MAX_CASES = 30
MAX_JSON_BYTES = 60 * 1024
MAX_MODEL_BYTES = 200 * 1024
DOUBLE = FeatureTypes_pb2.ArrayFeatureType.DOUBLE


# ---------------------------------------------------------------------------
# Helpers (the same conventions as generate.py)
# ---------------------------------------------------------------------------

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


def as_spec(model):
    return model.get_spec() if hasattr(model, "get_spec") else model


def convert(model, *args, **kwargs):
    """coremltools' scikit-learn converter, without its chatter."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        return as_spec(ct.converters.sklearn.convert(model, *args, **kwargs))


class numpy2_fixes:
    """coremltools 9.0's tree converter hands NumPy arrays of one element to
    float(), which NumPy 2 refuses: a multiclass GradientBoostingClassifier leaf
    {class: array([v])} and a GradientBoostingRegressor base prediction
    (init_.constant_, shape [1, 1]). Unwrap them during the conversion; nothing
    else changes in what the converter writes."""

    def __init__(self, model=None):
        self.model = model
        self.constant = None

    def __enter__(self):
        init = getattr(self.model, "init_", None)
        if init is not None and hasattr(init, "constant_") and np.size(init.constant_) == 1:
            self.constant = init.constant_
            init.constant_ = float(np.asarray(init.constant_).reshape(-1)[0])
        from coremltools.converters.sklearn import _tree_ensemble
        self.module, self.original = _tree_ensemble, _tree_ensemble._get_value

        def get_value(*args, **kwargs):
            value = self.original(*args, **kwargs)
            if isinstance(value, dict):
                value = {k: float(np.asarray(v).reshape(-1)[0]) if np.size(v) == 1 else v
                         for k, v in value.items()}
            return value
        _tree_ensemble._get_value = get_value

    def __exit__(self, *exc):
        self.module._get_value = self.original
        if self.constant is not None:
            self.model.init_.constant_ = self.constant


def fit(model, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. multi_class="ovr" is deprecated in 1.5
        return model.fit(*args)


def f32(x):
    """The nearest float32 value, as float64: inputs that every engine reads exactly."""
    return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float64)


def enc(v):
    """Encode one value in the parity JSON format (null = NaN)."""
    if v is None:
        return None
    if isinstance(v, (str, np.str_)):
        return str(v)
    if isinstance(v, (bool, np.bool_)):
        raise TypeError("booleans are not a Core ML feature type")
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if np.isnan(v):
            return None
        assert np.isfinite(v), v
        return v
    if isinstance(v, np.ndarray):
        return [enc(x) for x in v.tolist()] if v.ndim else enc(v.item())
    if isinstance(v, (list, tuple)):
        return [enc(x) for x in v]
    if isinstance(v, dict):
        return {str(enc(k)): enc(x) for k, x in v.items()}
    raise TypeError(type(v))


def label(v):
    return v.item() if isinstance(v, np.generic) else v


def classifier_outputs(spec, predicted, probabilities=None, classes=None):
    d = spec.description
    out = {d.predictedFeatureName: label(predicted)}
    if probabilities is not None:
        assert d.predictedProbabilitiesName
        out[d.predictedProbabilitiesName] = {str(label(c)): float(p)
                                             for c, p in zip(classes, probabilities)}
    return out


def set_metadata(spec, short):
    md = spec.description.metadata
    md.shortDescription = short
    md.author = "modelc fixtures"
    md.license = "MIT"
    md.versionString = "1.0"


def check_finite(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            check_finite(v)
    elif isinstance(obj, list):
        for v in obj:
            check_finite(v)
    elif isinstance(obj, float):
        assert np.isfinite(obj), obj


class Writer:
    """Writes case files and remembers them for README.md."""

    def __init__(self, out_dir):
        self.dir = os.path.join(out_dir, SUBDIR)
        self.entries = []

    def write(self, name, spec, reference, cases, checks, note=None, tolerance=TOLERANCE):
        kind = spec.WhichOneof("Type")
        assert kind, name
        assert 1 <= len(cases) <= MAX_CASES, (name, len(cases))
        inputs = {f.name for f in spec.description.input}
        outputs = {f.name for f in spec.description.output}
        for case in cases:
            assert set(case["inputs"]) <= inputs, (name, set(case["inputs"]) - inputs)
            assert set(case["outputs"]) <= outputs, (name, set(case["outputs"]) - outputs)
            check_finite(case["outputs"])
        set_metadata(spec, "Parity fixture %s: %s" % (name, checks))
        model_bytes = serialize(spec)
        assert len(model_bytes) <= MAX_MODEL_BYTES, (name, len(model_bytes))
        doc = {"model": name + ".mlmodel", "kind": kind, "reference": reference,
               "tolerance": tolerance,
               "cases": [{"inputs": enc(c["inputs"]), "outputs": enc(c["outputs"])}
                         for c in cases]}
        if note:
            doc["note"] = note
        text = (json.dumps(doc, sort_keys=True, indent=1, allow_nan=False) + "\n").encode()
        assert len(text) <= MAX_JSON_BYTES, (name, len(text))
        write_bytes(os.path.join(self.dir, name + ".mlmodel"), model_bytes)
        write_bytes(os.path.join(self.dir, name + ".json"), text)
        self.entries.append((name, kind, reference, len(cases), checks))


def grid_data(rng, n, d, low=-4, high=4, step=0.25):
    """Training data on a grid of exact binary fractions: every split threshold a
    tree learns (a midpoint of two values) is exact in float32 and float64."""
    return np.round(rng.uniform(low, high, (n, d)) / step) * step


def sklearn_split_points(model):
    """(feature, threshold) of every branch node of a fitted scikit-learn tree model."""
    if hasattr(model, "tree_"):
        trees = [model]
    else:
        trees = list(np.asarray(model.estimators_).ravel())
    points = []
    for t in trees:
        tr = t.tree_
        for node in range(tr.node_count):
            if tr.children_left[node] != -1:
                points.append((int(tr.feature[node]), float(tr.threshold[node])))
    return points


def threshold_inputs(base_rows, points, count):
    """Rows whose one feature sits exactly on a split threshold."""
    rows = []
    seen = set()
    for i, (feature, threshold) in enumerate(points):
        if (feature, threshold) in seen:
            continue
        seen.add((feature, threshold))
        row = np.array(base_rows[len(rows) % len(base_rows)], dtype=np.float64)
        row[feature] = threshold
        assert f32(threshold) == threshold, threshold
        rows.append(row)
        if len(rows) == count:
            break
    return rows


def near_threshold(points, X, rel=1e-6):
    """True for rows with a value within float32 rounding of some threshold (but
    not on it): scikit-learn compares float32 inputs, Core ML doubles."""
    bad = np.zeros(len(X), dtype=bool)
    for feature, threshold in points:
        diff = np.abs(X[:, feature] - threshold)
        bad |= (diff > 0) & (diff <= rel * max(1.0, abs(threshold)))
    return bad


def edge_rows(d, rng):
    """Zeros, negatives, large magnitudes."""
    return [np.zeros(d), -np.ones(d), np.full(d, 1e6), np.full(d, -1e6),
            f32(np.where(np.arange(d) % 2 == 0, 1e6, -1e6)),
            f32(rng.normal(0, 50, d))]


# ---------------------------------------------------------------------------
# Generalized linear models
# ---------------------------------------------------------------------------

def glm_cases(writer):
    rng = np.random.default_rng(7001)

    # Binary, string labels, named double inputs (coremltools adds no vectorizer for a GLM).
    X = rng.normal(0, 1, (60, 2)) + np.array([[1.0, -0.5]])
    y = np.where(X[:, 0] - 2 * X[:, 1] + rng.normal(0, 0.7, 60) > 1.5, "spam", "ham")
    m = fit(LogisticRegression(multi_class="ovr", C=2.0), X, y)
    spec = convert(m, [("features", datatypes.Array(2))], "verdict")
    rows = list(X[:18]) + edge_rows(2, rng) + [np.array([1e6, 5e5]), np.array([-3.0, 7.5])]
    P, L = m.predict_proba(np.array(rows)), m.predict(np.array(rows))
    cases = [{"inputs": {"features": r},
              "outputs": classifier_outputs(spec, l, p, m.classes_)} for r, l, p in zip(rows, L, P)]
    writer.write("glm_binary_string_labels", spec,
                 SKLEARN + " LogisticRegression(multi_class='ovr').predict/predict_proba",
                 cases, "binary GLM classifier (one weight row, logit), string labels, "
                 "saturating inputs")

    # Multiclass one-vs-rest, int64 labels that are not 0..K-1.
    X = rng.normal(0, 1, (90, 4))
    centers = np.array([[2, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 1]], dtype=float)
    yi = np.arange(90) % 3
    X = X + centers[yi]
    y = np.array([3, 7, 11])[yi]
    m = fit(LogisticRegression(multi_class="ovr", C=0.5), X, y)
    spec = convert(m, [("features", datatypes.Array(4))], "digit")
    rows = list(X[:20]) + [np.zeros(4), -np.ones(4), np.array([1e3, -1e3, 0, 0]),
                           np.array([-50.0, 40.0, 3.0, -2.0]), np.array([5.0, 5.0, 5.0, 5.0])]
    P, L = m.predict_proba(np.array(rows)), m.predict(np.array(rows))
    cases = [{"inputs": {"features": r}, "outputs": classifier_outputs(spec, l, p, m.classes_)}
             for r, l, p in zip(rows, L, P)]
    writer.write("glm_multiclass_ovr_int_labels", spec,
                 SKLEARN + " LogisticRegression(multi_class='ovr').predict/predict_proba",
                 cases, "3-class one-vs-rest GLM classifier, int64 labels 3/7/11",
                 note="One-vs-rest probabilities are the per-class logistic values divided by "
                      "their sum (scikit-learn's predict_proba for multi_class='ovr'; coremltools' "
                      "own tests compare Core ML's classProbability with it). No input makes all "
                      "logistic values underflow to 0.")

    # Regressors.
    X = rng.normal(0, 2, (40, 3))
    yv = X @ np.array([1.5, -2.0, 0.25]) + 3.0 + rng.normal(0, 0.1, 40)
    for name, m, what in (("glm_regressor_linear", LinearRegression(), "LinearRegression"),
                          ("glm_regressor_ridge", Ridge(alpha=3.0), "Ridge(alpha=3)")):
        fit(m, X, yv)
        spec = convert(m, [("features", datatypes.Array(3))], "target")
        rows = list(X[:16]) + edge_rows(3, rng) + [np.array([1e6, 1e6, -1e6]),
                                                   np.array([-7.5, 0.0, 123.25])]
        pred = m.predict(np.array(rows))
        cases = [{"inputs": {"features": r}, "outputs": {"target": v}} for r, v in zip(rows, pred)]
        writer.write(name, spec, SKLEARN + " %s.predict" % what, cases,
                     "GLM regressor, negative and large (1e6) inputs")


# ---------------------------------------------------------------------------
# Tree ensembles (scikit-learn)
# ---------------------------------------------------------------------------

TREE_NOTE = ("Inputs are float32-representable and the training data lies on a grid of "
             "exact binary fractions, so every threshold is exact in float32 and float64: "
             "scikit-learn (which compares float32 inputs) and Core ML (doubles) take the "
             "same branches. Rows with a feature exactly on a split threshold go to the "
             "left child in scikit-learn (x <= t), which the converter writes as "
             "BranchOnValueLessThanEqual's true child. scikit-learn trees do not accept NaN "
             "here (the converter writes no missing-value tracks), so no case has one.")


def tree_inputs(X, model, rng, n_rows=14, n_ties=8):
    points = sklearn_split_points(model)
    rows = list(X[:n_rows]) + threshold_inputs(X[n_rows:], points, n_ties)
    rows += edge_rows(X.shape[1], rng)[:5]
    rows = f32(np.array(rows))
    assert not near_threshold(points, rows).any()
    return rows


def tree_cases(writer):
    rng = np.random.default_rng(7101)
    d = 4
    X = grid_data(rng, 120, d)
    score = X[:, 0] + 0.5 * X[:, 1] * X[:, 2] - X[:, 3]
    y3 = np.digitize(score, [-1.0, 1.5])
    y2 = (score > 0.25).astype(int)
    yreg = np.sin(X[:, 0]) * 3 + X[:, 1] ** 2 - X[:, 2] + 0.5 * X[:, 3]
    names3 = np.array(["low", "mid", "high"])

    def classify(name, m, yfit, reference, checks, note, scale=1.0):
        fit(m, X, yfit)
        with numpy2_fixes(m):
            spec = convert(m, [("features", datatypes.Array(d))], "label")
        rows = tree_inputs(X, m, rng)
        P, L = m.predict_proba(rows) * scale, m.predict(rows)
        cases = [{"inputs": {"features": r}, "outputs": classifier_outputs(spec, l, p, m.classes_)}
                 for r, l, p in zip(rows, L, P)]
        writer.write(name, spec, reference, cases, checks, note=note)

    def regress(name, m, reference, checks, note):
        fit(m, X, yreg)
        with numpy2_fixes(m):
            spec = convert(m, [("features", datatypes.Array(d))], "target")
        rows = tree_inputs(X, m, rng)
        cases = [{"inputs": {"features": r}, "outputs": {"target": v}}
                 for r, v in zip(rows, m.predict(rows))]
        writer.write(name, spec, reference, cases, checks, note=note)

    classify("tree_classifier_multiclass", DecisionTreeClassifier(max_depth=5, random_state=0),
             names3[y3], SKLEARN + " DecisionTreeClassifier.predict/predict_proba",
             "decision tree, 3 string classes, leaf class fractions, ties on thresholds",
             TREE_NOTE)
    classify("tree_classifier_binary", DecisionTreeClassifier(max_depth=4, random_state=0),
             y2, SKLEARN + " DecisionTreeClassifier.predict/predict_proba",
             "decision tree, 2 int64 classes (one leaf value = P(class 1)), ties on thresholds",
             TREE_NOTE + " The converter writes a leaf probability of exactly 0.5 as 0.5 - 1e-7 "
             "(within tolerance; the label stays the first class, as in scikit-learn).")
    regress("tree_regressor", DecisionTreeRegressor(max_depth=5, random_state=0),
            SKLEARN + " DecisionTreeRegressor.predict", "decision tree regressor, ties on thresholds",
            TREE_NOTE)
    classify("forest_classifier_binary",
             RandomForestClassifier(n_estimators=7, max_depth=4, random_state=0),
             y2, SKLEARN + " RandomForestClassifier.predict/predict_proba",
             "random forest, 2 classes (leaf values scaled by 1/n_trees), ties on thresholds",
             TREE_NOTE)
    n_trees = 6
    classify("forest_classifier_multiclass",
             RandomForestClassifier(n_estimators=n_trees, max_depth=4, random_state=0),
             names3[y3],
             SKLEARN + " RandomForestClassifier.predict, and predict_proba * n_estimators (6)",
             "random forest, 3 classes: Core ML's sum of unscaled leaf fractions",
             TREE_NOTE + " For more than two classes coremltools writes every tree's leaf class "
             "fractions unscaled and no post-evaluation transform, and Core ML adds the leaf "
             "values of all trees: classProbability is n_estimators (6) times scikit-learn's "
             "predict_proba (apple/coremltools issue #1541). The reference is that product; "
             "the label (argmax) is scikit-learn's predict.", scale=float(n_trees))
    regress("forest_regressor",
            RandomForestRegressor(n_estimators=6, max_depth=4, random_state=0),
            SKLEARN + " RandomForestRegressor.predict",
            "random forest regressor (leaf values scaled by 1/n_trees)", TREE_NOTE)
    classify("gradient_boosting_classifier_binary",
             GradientBoostingClassifier(n_estimators=12, max_depth=3, learning_rate=0.3,
                                        random_state=0),
             names3[y2],
             SKLEARN + " GradientBoostingClassifier.predict/predict_proba",
             "boosted trees, 2 classes: base prediction (prior log-odds) + Regression_Logistic",
             TREE_NOTE)
    classify("gradient_boosting_classifier_multiclass",
             GradientBoostingClassifier(n_estimators=10, max_depth=2, learning_rate=0.4,
                                        random_state=0),
             y3, SKLEARN + " GradientBoostingClassifier.predict/predict_proba",
             "boosted trees, 3 int64 classes: per-class base predictions + Classification_SoftMax",
             TREE_NOTE)
    regress("gradient_boosting_regressor",
            GradientBoostingRegressor(n_estimators=15, max_depth=3, learning_rate=0.2,
                                      random_state=0),
            SKLEARN + " GradientBoostingRegressor.predict",
            "boosted regression trees: base prediction (mean) + learning-rate scaled leaves",
            TREE_NOTE)


# ---------------------------------------------------------------------------
# Tree ensembles (XGBoost)
# ---------------------------------------------------------------------------

XGB_NOTE = ("XGBoost evaluates in float32 (leaf sums and the logistic/softmax), so the "
            "tolerance is 1e-5. Inputs are float32-representable; XGBoost's splits are "
            "x < t (BranchOnValueLessThan): a value exactly on a threshold goes to the "
            "false ('no') child. null is NaN, a missing value: it follows each node's "
            "learned default direction (missingValueTracksTrueChild). Trained with "
            "base_score=0.5, the value coremltools' converter assumes (regressor base "
            "prediction 0.5; classifier margin 0).")


def xgb_split_points(booster):
    points = []

    def walk(node):
        if "leaf" in node:
            return
        points.append((int(node["split"][1:]), float(node["split_condition"])))
        for child in node["children"]:
            walk(child)
    for tree in booster.get_dump(dump_format="json"):
        walk(json.loads(tree))
    return points


def xgb_cases(writer):
    if xgboost is None:
        return
    rng = np.random.default_rng(7201)
    d = 4
    names = ["f%d" % i for i in range(d)]
    X = grid_data(rng, 200, d)
    score = X[:, 0] - X[:, 1] + 0.3 * X[:, 2] * X[:, 3]
    # Missing values in training, so that the default directions differ between nodes.
    mask = rng.random(X.shape) < 0.15
    score = np.where(mask[:, 0], score + 1.0, score)
    Xn = np.where(mask, np.nan, X)
    y2 = (score > 0).astype(int)
    y3 = np.digitize(score, [-1.5, 1.5])
    yreg = X[:, 0] * 2 - np.abs(X[:, 1]) + np.where(mask[:, 2], 3.0, X[:, 2])

    def rows_for(booster):
        points = xgb_split_points(booster)
        base = np.nan_to_num(Xn[:40])
        rows = list(Xn[:10])
        rows += threshold_inputs(base[10:], points, 8)
        nan_rows = []
        for i in range(d):
            r = np.array(base[20 + i])
            r[i] = np.nan
            nan_rows.append(r)
        nan_rows.append(np.full(d, np.nan))
        r = np.array(base[25])
        r[[0, 2]] = np.nan
        nan_rows.append(r)
        rows += nan_rows + edge_rows(d, rng)[:5]
        return f32(np.array(rows))

    def inputs(r):
        return {n: v for n, v in zip(names, r)}

    common = dict(max_depth=3, learning_rate=0.3, base_score=0.5, random_state=0,
                  tree_method="hist", n_jobs=1)
    version = "XGBoost %s" % xgboost.__version__

    for name, n_est, yv, checks in (
            ("xgboost_classifier_binary", 10, y2,
             "XGBoost binary:logistic, Regression_Logistic, missing values, ties"),
            ("xgboost_classifier_multiclass", 6, y3,
             "XGBoost multi:softprob 3 classes, Classification_SoftMax, missing values, ties")):
        m = xgboost.XGBClassifier(n_estimators=n_est, **common).fit(Xn, yv)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec = as_spec(ct.converters.xgboost.convert(m, feature_names=names, target="label",
                                                         mode="classifier"))
        rows = rows_for(m.get_booster())
        P, L = m.predict_proba(rows).astype(np.float64), m.predict(rows)
        cases = [{"inputs": inputs(r), "outputs": classifier_outputs(spec, l, p, m.classes_)}
                 for r, l, p in zip(rows, L, P)]
        writer.write(name, spec, version + " XGBClassifier.predict/predict_proba", cases,
                     checks, note=XGB_NOTE, tolerance=1e-5)

    m = xgboost.XGBRegressor(n_estimators=12, **common).fit(Xn, yreg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = as_spec(ct.converters.xgboost.convert(m, feature_names=names, target="target"))
    rows = rows_for(m.get_booster())
    cases = [{"inputs": inputs(r), "outputs": {"target": v}}
             for r, v in zip(rows, m.predict(rows).astype(np.float64))]
    writer.write("xgboost_regressor", spec, version + " XGBRegressor.predict", cases,
                 "XGBoost reg:squarederror, base prediction 0.5, missing values, ties",
                 note=XGB_NOTE, tolerance=1e-5)


# ---------------------------------------------------------------------------
# Support vector machines
# ---------------------------------------------------------------------------

SVC_NOTE = ("Labels are scikit-learn's predict: libsvm's one-vs-one vote (pairwise decision "
            "value sum(alpha_i K(sv_i, x)) - rho > 0 votes for the first class of the pair; "
            "a tie in votes goes to the class that comes first in the class list).")
PROB_NOTE = ("classProbability is scikit-learn's predict_proba, i.e. libsvm's "
             "svm_predict_probability: per pair, 1 / (1 + exp(A*f + B)) with probA/probB, "
             "clipped to [1e-7, 1 - 1e-7], then the pairs are coupled with libsvm's "
             "multiclass_probability (Wu, Lin and Weng's method 2, with its stopping rule: "
             "eps = 0.005 / k, at most max(100, k) iterations). scikit-learn's bundled libsvm "
             "does this even for two classes, where the result differs from the plain pairwise "
             "value by the iteration's truncation (up to about 0.5%; newer libsvm, and Core ML "
             "according to coremltools' converter warning, use the pairwise value directly); "
             "the reference is scikit-learn's. The label is predict (the vote); "
             "inputs where the vote and the largest probability disagree are left out, since "
             "Core ML's rule there is not documented.")


def svm_data(rng, n, d, classes):
    centers = rng.normal(0, 1.5, (classes, d))
    y = np.arange(n) % classes
    X = centers[y] + rng.normal(0, 1.0, (n, d))
    return X, y


def sparse_copy(spec):
    """The same model with its support vectors in libsvm's sparse form (1-based
    indices, zeros left out), as coremltools' libsvm converter writes them."""
    sparse = Model_pb2.Model()
    sparse.CopyFrom(spec)
    kind = sparse.WhichOneof("Type")
    svm = getattr(sparse, kind)
    dense = [list(v.values) for v in svm.denseSupportVectors.vectors]
    svm.ClearField("denseSupportVectors")
    svm.sparseSupportVectors.SetInParent()
    for values in dense:
        vector = svm.sparseSupportVectors.vectors.add()
        for i, v in enumerate(values):
            if v != 0.0:
                node = vector.nodes.add()
                node.index = i + 1
                node.value = v
    return sparse


def svm_cases(writer):
    rng = np.random.default_rng(7301)

    def svc_file(name, model, X, y, checks, probability=False, sparse_zeros=False):
        fit(model, X, y)
        spec = convert(model, [("features", datatypes.Array(X.shape[1]))], "label")
        rows = list(X[:20]) + edge_rows(X.shape[1], rng)
        rows = np.array(rows)
        L = model.predict(rows)
        note = SVC_NOTE
        if probability:
            P = model.predict_proba(rows)
            if len(model.classes_) == 2:
                # Core ML gives a binary model's Platt sigmoid as it is
                # (coremltools' converter warns of this); scikit-learn's
                # bundled libsvm couples even two classes. The reference is
                # the sigmoid of scikit-learn's own decision function, whose
                # sign is libsvm's negated for two classes.
                decision = -model.decision_function(rows)
                first = 1.0 / (1.0 + np.exp(model.probA_[0] * decision + model.probB_[0]))
                first = np.clip(first, 1e-7, 1 - 1e-7)
                P = np.stack([first, 1.0 - first], axis=1)
            keep = model.classes_[np.argmax(P, axis=1)] == L
            rows, L, P = rows[keep], L[keep], P[keep]
            cases = [{"inputs": {"features": r},
                      "outputs": classifier_outputs(spec, l, p, model.classes_)}
                     for r, l, p in zip(rows, L, P)]
            reference = SKLEARN + " %s(probability=True).predict/predict_proba" % type(model).__name__
            note = SVC_NOTE + " " + PROB_NOTE
            if len(model.classes_) == 2:
                reference = (SKLEARN + " %s(probability=True).predict and decision_function, "
                             "Platt's sigmoid with probA_/probB_ in NumPy float64" % type(model).__name__)
                note = SVC_NOTE + (" Two classes: Core ML returns libsvm's pairwise sigmoid "
                                   "1/(1+exp(A*f+B)) itself, where scikit-learn's predict_proba also "
                                   "runs the multi-class coupling (differences up to ~0.5%); the "
                                   "reference is the sigmoid of scikit-learn's decision function.")
        else:
            cases = [{"inputs": {"features": r}, "outputs": classifier_outputs(spec, l)}
                     for r, l in zip(rows, L)]
            reference = SKLEARN + " %s.predict" % type(model).__name__
        if sparse_zeros:
            spec = sparse_copy(spec)
            note += (" The support vectors are stored as sparseSupportVectors: libsvm's "
                     "1-based feature indices, zero values left out (the training data has "
                     "zeros), a copy of the dense model's vectors.")
        writer.write(name, spec, reference, cases, checks, note=note)

    X, y = svm_data(rng, 40, 3, 2)
    svc_file("svc_linear_binary", SVC(kernel="linear", C=0.8), X, np.array(["no", "yes"])[y],
             "SVC linear kernel, 2 string classes, label only")
    X, y = svm_data(rng, 45, 3, 3)
    svc_file("svc_rbf_multiclass", SVC(kernel="rbf", gamma=0.4, C=2.0), X, y,
             "SVC RBF kernel, 3 int64 classes (one-vs-one votes), label only")
    X, y = svm_data(rng, 45, 2, 3)
    svc_file("svc_poly_multiclass", SVC(kernel="poly", degree=3, gamma=0.5, coef0=1.0, C=1.0),
             X, np.array(["a", "b", "c"])[y], "SVC polynomial kernel (degree 3), 3 string classes")
    X, y = svm_data(rng, 40, 3, 2)
    svc_file("svc_sigmoid_binary", SVC(kernel="sigmoid", gamma=0.1, coef0=-0.5, C=1.0), X, y,
             "SVC sigmoid kernel, 2 int64 classes")
    X, y = svm_data(rng, 50, 3, 2)
    svc_file("svc_rbf_binary_probability",
             SVC(kernel="rbf", gamma="scale", C=1.0, probability=True, random_state=0),
             X, np.array(["neg", "pos"])[y],
             "SVC RBF, 2 classes, libsvm probability estimates (probA/probB)", probability=True)
    X, y = svm_data(rng, 60, 3, 3)
    svc_file("svc_poly_multiclass_probability",
             SVC(kernel="poly", degree=2, gamma=0.3, coef0=0.5, C=1.0, probability=True,
                 random_state=0),
             X, y, "SVC polynomial, 3 classes, libsvm pairwise coupling of probabilities",
             probability=True)
    X, y = svm_data(rng, 60, 3, 4)
    svc_file("nusvc_rbf_multiclass_probability",
             NuSVC(kernel="rbf", nu=0.3, gamma=0.5, probability=True, random_state=0),
             X, np.array([10, 20, 30, 40])[y], "NuSVC RBF, 4 classes, probabilities",
             probability=True)
    X, y = svm_data(rng, 45, 4, 3)
    X[:, 1] = np.where(np.arange(45) % 2 == 0, 0.0, X[:, 1])  # zeros to leave out
    X[::3, 3] = 0.0
    svc_file("svc_rbf_sparse_vectors", SVC(kernel="rbf", gamma=0.3, C=1.5), X, y,
             "SVC RBF, 3 classes, support vectors in sparse form", sparse_zeros=True)

    def svr_file(name, model, X, yv, checks, sparse_zeros=False):
        fit(model, X, yv)
        spec = convert(model, [("features", datatypes.Array(X.shape[1]))], "target")
        rows = np.array(list(X[:18]) + edge_rows(X.shape[1], rng))
        cases = [{"inputs": {"features": r}, "outputs": {"target": v}}
                 for r, v in zip(rows, model.predict(rows))]
        note = None
        if sparse_zeros:
            spec = sparse_copy(spec)
            note = ("The support vectors are stored as sparseSupportVectors: libsvm's 1-based "
                    "feature indices, zero values left out.")
        writer.write(name, spec, SKLEARN + " %s.predict" % type(model).__name__, cases, checks,
                     note=note)

    X = rng.normal(0, 1.5, (40, 3))
    yv = np.sin(X[:, 0]) * 2 + X[:, 1] - 0.5 * X[:, 2] ** 2
    svr_file("svr_rbf", SVR(kernel="rbf", gamma=0.5, C=3.0, epsilon=0.05), X, yv,
             "epsilon-SVR RBF kernel")
    svr_file("svr_linear", SVR(kernel="linear", C=1.0, epsilon=0.1), X, yv, "epsilon-SVR linear")
    svr_file("svr_poly", SVR(kernel="poly", degree=3, gamma=0.2, coef0=1.0, C=1.0), X, yv,
             "epsilon-SVR polynomial (degree 3)")
    svr_file("nusvr_sigmoid", NuSVR(kernel="sigmoid", nu=0.5, gamma=0.05, coef0=0.0, C=1.0),
             X, yv, "nu-SVR sigmoid kernel")
    svr_file("nusvr_rbf", NuSVR(kernel="rbf", nu=0.4, gamma=0.3, C=2.0), X, yv,
             "nu-SVR RBF kernel")
    X2 = np.array(X)
    X2[::2, 0] = 0.0
    X2[1::3, 2] = 0.0
    svr_file("svr_rbf_sparse_vectors", SVR(kernel="rbf", gamma=0.5, C=3.0), X2, yv,
             "epsilon-SVR RBF, support vectors in sparse form", sparse_zeros=True)


# ---------------------------------------------------------------------------
# k-nearest neighbours
# ---------------------------------------------------------------------------

def knn_cases(writer):
    rng = np.random.default_rng(7401)
    d = 3
    X = rng.integers(-6, 7, (36, d)).astype(np.float64)
    X = np.unique(X, axis=0)
    y = (np.arange(len(X)) * 7 % 3)  # labels 0..2 (the converter writes label indices)
    query = f32(np.round(rng.uniform(-7, 7, (200, d)), 1))
    query = np.concatenate([f32(X[:2] + 0.25), query])

    def unambiguous(m, q, weights):
        dist, idx = m.kneighbors(q, n_neighbors=min(m.n_neighbors + 1, len(X)))
        k = m.n_neighbors
        ok = dist[:, k] - dist[:, k - 1] > 1e-3 if dist.shape[1] > k else np.ones(len(q), bool)
        ok &= np.all(np.diff(dist[:, :k], axis=1) > 1e-6, axis=1) | (k == 1)
        votes = np.zeros((len(q), 3))
        for j in range(k):
            w = 1.0 / np.maximum(dist[:, j], 1e-300) if weights == "distance" else 1.0
            votes[np.arange(len(q)), y[idx[:, j]]] += w
        top = np.sort(votes, axis=1)
        ok &= top[:, -1] - top[:, -2] > 1e-6 * np.maximum(1, top[:, -1])
        return ok

    def knn_file(name, m, checks, weights="uniform", kdtree=False, exact_row=False):
        fit(m, X, y)
        # The converter takes uniform weights only; inverse-distance weights are set below.
        uniform = fit(sklearn.base.clone(m).set_params(weights="uniform"), X, y)
        spec = convert(uniform, [("features", datatypes.Array(d))], "label")
        spec.specificationVersion = max(spec.specificationVersion,
                                        ct._MINIMUM_NEAREST_NEIGHBORS_SPEC_VERSION)
        knn = spec.kNearestNeighborsClassifier
        assert knn.nearestNeighborsIndex.WhichOneof("IndexType") == (
            "singleKdTreeIndex" if kdtree else "linearIndex")
        note = ("Only the label is an output (coremltools' converter writes no probabilities). "
                "Squared Euclidean distance. Inputs are float32 (the converter declares a "
                "FLOAT32 array; the values are exact in float32). Inputs whose k nearest "
                "neighbours are not unique (equal distances at the k-th place) or whose vote "
                "is tied are left out: scikit-learn breaks a vote tie towards the smallest "
                "label and picks among equidistant neighbours in index order, and Core ML "
                "documents neither. The int64 labels are scikit-learn's class indices, which "
                "the converter writes (here they equal the classes 0, 1, 2).")
        if weights == "distance":
            knn.ClearField("uniformWeighting")
            knn.inverseDistanceWeighting.SetInParent()
        q = query
        if exact_row:
            q = np.concatenate([f32(X[5:7]), q])
        q = q[unambiguous(m, q, weights)][:24 if not exact_row else 22]
        if exact_row:
            assert np.array_equal(q[:2], X[5:7])
        cases = [{"inputs": {"features": r}, "outputs": classifier_outputs(spec, l)}
                 for r, l in zip(q, m.predict(q))]
        if weights == "distance":
            dist, idx = m.kneighbors(q)
            differ = []
            for i in range(len(q)):
                if dist[i, 0] == 0:
                    continue
                votes = np.zeros(3)
                for j in range(m.n_neighbors):
                    votes[y[idx[i, j]]] += 1.0 / dist[i, j] ** 2
                if np.argmax(votes) != m.predict(q[i:i + 1])[0]:
                    differ.append(i)
            note += (" inverseDistanceWeighting is set by hand (the converter only writes "
                     "uniform weights); the reference is scikit-learn's weights='distance': "
                     "each neighbour votes 1/d with d the Euclidean (not squared) distance, and "
                     "when the input equals training points (d = 0, cases 0 and 1) only those "
                     "vote. Cases where 1/d^2 weights would give another label: %s."
                     % (differ or "none"))
        writer.write(name, spec, SKLEARN + " KNeighborsClassifier(weights='%s').predict"
                     % weights, cases, checks, note=note)

    knn_file("knn_k1_linear", KNeighborsClassifier(n_neighbors=1, algorithm="brute"),
             "k-NN k=1, linear index")
    knn_file("knn_k5_linear", KNeighborsClassifier(n_neighbors=5, algorithm="brute"),
             "k-NN k=5 uniform votes, linear index")
    knn_file("knn_k5_kdtree", KNeighborsClassifier(n_neighbors=5, algorithm="kd_tree",
                                                   leaf_size=4),
             "k-NN k=5 uniform votes, single kd-tree index (leafSize 4)", kdtree=True)
    knn_file("knn_k4_distance", KNeighborsClassifier(n_neighbors=4, algorithm="brute",
                                                     weights="distance"),
             "k-NN k=4 inverse-distance votes, exact training points", weights="distance",
             exact_row=True)


# ---------------------------------------------------------------------------
# Feature engineering
# ---------------------------------------------------------------------------

def new_spec(version=ct.SPECIFICATION_VERSION):
    spec = Model_pb2.Model()
    spec.specificationVersion = version
    return spec


def add_feature(features, name, kind, shape=None, key=None):
    f = features.add()
    f.name = name
    if kind == "double":
        f.type.doubleType.SetInParent()
    elif kind == "int64":
        f.type.int64Type.SetInParent()
    elif kind == "string":
        f.type.stringType.SetInParent()
    elif kind == "array":
        f.type.multiArrayType.dataType = DOUBLE
        f.type.multiArrayType.shape.extend(shape)
    elif kind == "dict":
        if key == "int64":
            f.type.dictionaryType.int64KeyType.SetInParent()
        else:
            f.type.dictionaryType.stringKeyType.SetInParent()
    return f


def transform_cases(writer):
    rng = np.random.default_rng(7501)

    # Normalizer.
    rows = [rng.normal(0, 2, 4) for _ in range(12)]
    rows += [np.zeros(4), np.array([-5.0, 1.0, 2.0, -0.5]), np.array([1e6, -1e6, 3.0, 0.0]),
             np.array([0.0, 0.0, -7.0, 0.0]), np.array([1e-3, 2e-3, -3e-3, 4e-3]),
             np.array([3.0, -3.0, 3.0, 1.0])]
    rows = np.array(rows)
    for norm in ("l1", "l2", "max"):
        m = Normalizer(norm=norm).fit(rows)
        spec = convert(m, [("features", datatypes.Array(4))], "normalized")
        cases = [{"inputs": {"features": r}, "outputs": {"normalized": t}}
                 for r, t in zip(rows, m.transform(rows))]
        writer.write("normalizer_" + norm, spec, SKLEARN + " Normalizer(norm='%s').transform" % norm,
                     cases, "Normalizer %s, zero vector, negative maximum" % norm,
                     note="A zero vector stays zero (scikit-learn leaves rows with norm 0 "
                          "unchanged). 'max' divides by the largest absolute value.")

    # StandardScaler, with a constant column (scale 1).
    Xs = rng.normal(3, 4, (30, 4))
    Xs[:, 2] = 2.5
    m = StandardScaler().fit(Xs)
    spec = convert(m, [("features", datatypes.Array(4))], "scaled")
    rows = np.array(list(Xs[:14]) + edge_rows(4, rng))
    cases = [{"inputs": {"features": r}, "outputs": {"scaled": t}}
             for r, t in zip(rows, m.transform(rows))]
    writer.write("scaler", spec, SKLEARN + " StandardScaler.transform", cases,
                 "Scaler (shift -mean, scale 1/std), constant column, large inputs",
                 note="Column 2 is constant in training: scikit-learn's scale is 1 there.")

    # OneHotEncoder: Core ML's own model, built with the protobuf classes.
    cats = ["red", "green", "blue", "amber"]
    spec = new_spec()
    add_feature(spec.description.input, "color", "string")
    add_feature(spec.description.output, "encoded", "array", [len(cats)])
    spec.oneHotEncoder.stringCategories.vector.extend(cats)
    spec.oneHotEncoder.outputSparse = False
    spec.oneHotEncoder.handleUnknown = spec.oneHotEncoder.IgnoreUnknown
    m = OneHotEncoder(categories=[cats], handle_unknown="ignore", sparse_output=False)
    m.fit(np.array(cats).reshape(-1, 1))
    values = cats + ["purple", "", "Red", "red ", "green"]
    cases = [{"inputs": {"color": v}, "outputs": {"encoded": t}}
             for v, t in zip(values, m.transform(np.array(values, dtype=object).reshape(-1, 1)))]
    writer.write("one_hot_string_ignore", spec,
                 SKLEARN + " OneHotEncoder(categories=..., handle_unknown='ignore').transform",
                 cases, "OneHotEncoder, string categories, dense output, unknown values ignored",
                 note="Unknown strings (case and spaces matter) give all zeros.")

    icats = [-3, 0, 7, 1000000]
    spec = new_spec()
    add_feature(spec.description.input, "code", "int64")
    add_feature(spec.description.output, "encoded", "dict", key="int64")
    spec.oneHotEncoder.int64Categories.vector.extend(icats)
    spec.oneHotEncoder.outputSparse = True
    spec.oneHotEncoder.handleUnknown = spec.oneHotEncoder.ErrorOnUnknown
    m = OneHotEncoder(categories=[icats], handle_unknown="error", sparse_output=True)
    m.fit(np.array(icats).reshape(-1, 1))
    values = [7, -3, 1000000, 0, 7]
    T = m.transform(np.array(values).reshape(-1, 1)).tocsr()
    cases = []
    for v, i in zip(values, range(len(values))):
        row = T.getrow(i)
        cases.append({"inputs": {"code": v},
                      "outputs": {"encoded": {str(c): float(x) for c, x in zip(row.indices, row.data)}}})
    writer.write("one_hot_int64_error", spec,
                 SKLEARN + " OneHotEncoder(categories=..., handle_unknown='error', "
                 "sparse_output=True).transform",
                 cases, "OneHotEncoder, int64 categories, sparse (dictionary) output",
                 note="handleUnknown is ErrorOnUnknown: every input is a known category (an "
                      "unknown one is an error in both engines, so no case has one). The sparse "
                      "output is the dictionary {category index: 1.0} of scikit-learn's sparse row.")

    # Imputer (scikit-learn SimpleImputer through the converter).
    Xi = rng.normal(0, 3, (25, 4)).round(2)
    Xi[rng.random(Xi.shape) < 0.2] = np.nan
    Xi[:3, 1] = np.nan
    Xi[5:12, 3] = 4.0  # a most frequent value
    for strategy, extra in (("mean", {}), ("median", {}), ("most_frequent", {}),
                            ("constant", {"fill_value": -99.5})):
        m = SimpleImputer(strategy=strategy, **extra).fit(Xi)
        spec = convert(m, [("features", datatypes.Array(4))], "imputed")
        rows = np.array(list(Xi[:14]) + [np.full(4, np.nan), np.array([1e6, np.nan, -1e6, 0.0]),
                                        np.array([-0.0, 2.0, np.nan, np.nan])])
        cases = [{"inputs": {"features": r}, "outputs": {"imputed": t}}
                 for r, t in zip(rows, m.transform(rows))]
        writer.write("imputer_nan_" + strategy, spec,
                     SKLEARN + " SimpleImputer(strategy='%s').transform" % strategy, cases,
                     "Imputer replacing NaN (null) with the %s per column" % strategy)

    Xm = np.round(rng.normal(0, 2, (20, 3)), 1)
    Xm[rng.random(Xm.shape) < 0.25] = -1.0
    m = SimpleImputer(strategy="mean", missing_values=-1.0).fit(Xm)
    spec = convert(m, [("features", datatypes.Array(3))], "imputed")
    rows = np.array(list(Xm[:12]) + [np.full(3, -1.0), np.array([-1.0000001, -0.999, 1.0])])
    cases = [{"inputs": {"features": r}, "outputs": {"imputed": t}}
             for r, t in zip(rows, m.transform(rows))]
    writer.write("imputer_number_mean", spec,
                 SKLEARN + " SimpleImputer(strategy='mean', missing_values=-1).transform", cases,
                 "Imputer replacing the number -1 (replaceDoubleValue), near misses kept",
                 note="Only values exactly equal to -1 are replaced; no input is NaN.")

    # Imputer on a scalar double and on a string, built with the protobuf classes.
    spec = new_spec()
    add_feature(spec.description.input, "reading", "double")
    add_feature(spec.description.output, "filled", "double")
    train = np.array([[1.5], [np.nan], [4.0], [2.25], [np.nan], [-3.0]])
    m = SimpleImputer(strategy="mean").fit(train)
    spec.imputer.imputedDoubleValue = float(m.statistics_[0])
    spec.imputer.replaceDoubleValue = float("nan")
    values = np.array([[np.nan], [0.0], [-7.5], [1e6], [1.5]])
    cases = [{"inputs": {"reading": v[0]}, "outputs": {"filled": t[0]}}
             for v, t in zip(values, m.transform(values))]
    writer.write("imputer_double_scalar", spec, SKLEARN + " SimpleImputer(strategy='mean').transform "
                 "(one column)", cases, "Imputer on a double feature, NaN (null) replaced")

    spec = new_spec()
    add_feature(spec.description.input, "city", "string")
    add_feature(spec.description.output, "city_filled", "string")
    m = SimpleImputer(strategy="constant", missing_values="", fill_value="unknown")
    m.fit(np.array([["Paris"], [""], ["Lyon"]], dtype=object))
    spec.imputer.imputedStringValue = "unknown"
    spec.imputer.replaceStringValue = ""
    values = np.array([["Paris"], [""], ["unknown"], [" "], ["Zürich"]], dtype=object)
    cases = [{"inputs": {"city": v[0]}, "outputs": {"city_filled": t[0]}}
             for v, t in zip(values, m.transform(values))]
    writer.write("imputer_string", spec,
                 SKLEARN + " SimpleImputer(strategy='constant', missing_values='', "
                 "fill_value='unknown').transform", cases,
                 "Imputer on a string feature: the empty string replaced")

    # DictVectorizer.
    m = DictVectorizer(sparse=False).fit([{"apples": 1, "pears": 2}, {"plums": 3},
                                          {"apples": 4, "figs": 1, "kiwis": 0.5}])
    spec = convert(m, "basket", "counts")
    baskets = [{"apples": 2.0}, {"pears": -1.5, "figs": 1e6}, {}, {"durian": 9.0},
               {"apples": 1.0, "pears": 2.0, "plums": 3.0, "figs": 4.0, "kiwis": 5.0},
               {"kiwis": 0.25, "mango": 3.0}]
    cases = [{"inputs": {"basket": b}, "outputs": {"counts": t}}
             for b, t in zip(baskets, m.transform(baskets))]
    assert [x.WhichOneof("Type") for x in spec.pipeline.models] == ["dictVectorizer",
                                                                   "featureVectorizer"]
    writer.write("pipeline_dict_vectorizer", spec, SKLEARN + " DictVectorizer.transform", cases,
                 "pipeline: DictVectorizer (string-keyed dictionary) -> FeatureVectorizer "
                 "(as coremltools converts it), missing and unknown keys",
                 note="Unknown keys are ignored; missing keys give 0.")

    # FeatureVectorizer (NumPy: concatenation in input order).
    spec = new_spec()
    add_feature(spec.description.input, "a", "double")
    add_feature(spec.description.input, "b", "array", [3])
    add_feature(spec.description.input, "c", "int64")
    add_feature(spec.description.input, "d", "dict", key="int64")
    add_feature(spec.description.output, "vector", "array", [9])
    for col, dim in (("a", 1), ("b", 3), ("c", 1), ("d", 4)):
        item = spec.featureVectorizer.inputList.add()
        item.inputColumn = col
        item.inputDimensions = dim
    cases = []
    for i in range(6):
        a = round(float(rng.normal(0, 10)), 3)
        b = rng.normal(0, 1, 3).round(4)
        c = int(rng.integers(-1000, 1000))
        dct = {int(k): round(float(rng.normal()), 3) for k in rng.choice(4, i % 4 + 1, replace=False)}
        dense = np.zeros(4)
        for k, v in dct.items():
            dense[k] = v
        cases.append({"inputs": {"a": a, "b": b, "c": c, "d": dict(sorted(dct.items()))},
                      "outputs": {"vector": np.concatenate([[a], b, [float(c)], dense])}})
    writer.write("feature_vectorizer", spec, NUMPY + " concatenation", cases,
                 "FeatureVectorizer: double, array, int64 and int64-keyed dictionary inputs",
                 note="Each input contributes inputDimensions values in inputList order: a "
                      "double or int64 one value, an array its values, an int64-keyed "
                      "dictionary a dense vector with value d[k] at position k (0 elsewhere).")

    # ArrayFeatureExtractor (NumPy indexing).
    Xa = rng.normal(0, 5, (8, 5)).round(3)
    for name, index, out in (("array_feature_extractor", [3, 0, 4, 0], "selected"),
                             ("array_feature_extractor_single", 2, "picked")):
        spec = as_spec(create_array_feature_extractor([("features", datatypes.Array(5))],
                                                      out, index))
        cases = [{"inputs": {"features": r}, "outputs": {out: r[index]}} for r in Xa]
        writer.write(name, spec, NUMPY + " indexing", cases,
                     "ArrayFeatureExtractor, indices %s" % (index,),
                     note="Several indices give an array in extractIndex order (repeats "
                          "allowed); one index gives a double." if name.endswith("extractor")
                     else "One index: the output is a double feature.")

    # CategoricalMapping (a Python dict lookup).
    mapping = {"cat": 3, "dog": -1, "emu": 1000000, "": 0}
    spec = new_spec()
    add_feature(spec.description.input, "animal", "string")
    add_feature(spec.description.output, "code", "int64")
    for k, v in mapping.items():
        spec.categoricalMapping.stringToInt64Map.map[k] = v
    spec.categoricalMapping.int64Value = -99
    values = ["cat", "dog", "emu", "", "Cat", "yak", "dog"]
    cases = [{"inputs": {"animal": v}, "outputs": {"code": mapping.get(v, -99)}} for v in values]
    writer.write("categorical_mapping_string_to_int64", spec, "Python dict lookup", cases,
                 "CategoricalMapping string to int64, default -99 for unknown keys")

    rmap = {0: "zero", 7: "seven", -2: "minus two", 1 << 40: "big"}
    spec = new_spec()
    add_feature(spec.description.input, "number", "int64")
    add_feature(spec.description.output, "word", "string")
    for k, v in rmap.items():
        spec.categoricalMapping.int64ToStringMap.map[k] = v
    spec.categoricalMapping.strValue = "other"
    values = [0, 7, -2, 1 << 40, 1, -7, 7]
    cases = [{"inputs": {"number": v}, "outputs": {"word": rmap.get(v, "other")}} for v in values]
    writer.write("categorical_mapping_int64_to_string", spec, "Python dict lookup", cases,
                 "CategoricalMapping int64 to string, default 'other' for unknown keys")


# ---------------------------------------------------------------------------
# Pipelines
# ---------------------------------------------------------------------------

def pipeline_cases(writer):
    rng = np.random.default_rng(7601)

    # StandardScaler -> LogisticRegression over named double inputs: FeatureVectorizer first.
    names = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
    centers = np.array([[5.0, 3.4, 1.5, 0.2], [5.9, 2.8, 4.3, 1.3], [6.6, 3.0, 5.5, 2.0]])
    yi = np.arange(60) % 3
    X = centers[yi] + rng.normal(0, 0.35, (60, 4))
    labels = np.array(["setosa", "versicolor", "virginica"])[yi]
    pipe = fit(Pipeline([("scaler", StandardScaler()),
                         ("logreg", LogisticRegression(multi_class="ovr"))]), X, labels)
    spec = convert(pipe, names, "species")
    rows = np.array(list(X[:18]) + [np.zeros(4), np.array([7.9, 4.4, 6.9, 2.5]),
                                    np.array([-1.0, 10.0, -2.0, 0.5]),
                                    np.array([100.0, -100.0, 100.0, -100.0])])
    P, L = pipe.predict_proba(rows), pipe.predict(rows)
    cases = [{"inputs": dict(zip(names, r)),
              "outputs": classifier_outputs(spec, l, p, pipe.classes_)}
             for r, l, p in zip(rows, L, P)]
    writer.write("pipeline_scaler_logistic", spec,
                 SKLEARN + " Pipeline(StandardScaler, LogisticRegression(ovr)).predict/predict_proba",
                 cases, "pipelineClassifier: FeatureVectorizer -> Scaler -> GLM classifier")

    # SimpleImputer -> StandardScaler -> RandomForestClassifier (binary).
    X = rng.normal(0, 2, (80, 3)).round(2)
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0.5).astype(int)
    Xn = np.array(X)
    Xn[rng.random(X.shape) < 0.15] = np.nan
    pipe = fit(Pipeline([("impute", SimpleImputer(strategy="median")),
                         ("scale", StandardScaler()),
                         ("forest", RandomForestClassifier(n_estimators=5, max_depth=4,
                                                           random_state=0))]), Xn, y)
    spec = convert(pipe, [("features", datatypes.Array(3))], "label")
    rows = np.array(list(Xn[:40]) + [np.full(3, np.nan), np.array([1e6, -1e6, np.nan]),
                                     np.zeros(3)])
    points = sklearn_split_points(pipe.named_steps["forest"])
    transformed = pipe[:-1].transform(rows)
    rows = rows[~near_threshold(points, transformed, rel=1e-5)][:28]
    P, L = pipe.predict_proba(rows), pipe.predict(rows)
    cases = [{"inputs": {"features": r}, "outputs": classifier_outputs(spec, l, p, pipe.classes_)}
             for r, l, p in zip(rows, L, P)]
    writer.write("pipeline_imputer_scaler_forest", spec,
                 SKLEARN + " Pipeline(SimpleImputer, StandardScaler, RandomForestClassifier)"
                 ".predict/predict_proba", cases,
                 "pipelineClassifier: Imputer (NaN) -> Scaler -> tree ensemble (2 classes)",
                 note="scikit-learn's forest compares the scaled values in float32, Core ML in "
                      "double: inputs whose scaled value lies within 1e-5 (relative) of a "
                      "threshold are left out.")

    # DictVectorizer -> LinearRegression: a pipelineRegressor from a dictionary.
    docs = [{"a": 1.0, "b": 2.0}, {"b": -1.0, "c": 4.0}, {"a": 3.0, "c": 1.0, "d": 2.0},
            {"d": -2.0}, {"a": -1.0, "b": 0.5, "c": 0.5, "d": 0.5}, {"c": 3.0}]
    target = [3.0, 1.5, 6.0, -2.5, 0.75, 2.0]
    pipe = fit(Pipeline([("dv", DictVectorizer(sparse=False)), ("lr", LinearRegression())]),
               docs, target)
    spec = convert(pipe, "terms", "score")
    queries = docs + [{}, {"a": 1e6}, {"zzz": 5.0, "b": -3.0}, {"d": 0.125, "a": -0.5}]
    cases = [{"inputs": {"terms": q}, "outputs": {"score": v}}
             for q, v in zip(queries, pipe.predict(queries))]
    writer.write("pipeline_dict_vectorizer_linear", spec,
                 SKLEARN + " Pipeline(DictVectorizer, LinearRegression).predict", cases,
                 "pipelineRegressor: DictVectorizer -> GLM regressor, unknown keys")

    # OneHotEncoder -> LogisticRegression: the encoder converts to a pipeline of its own
    # (ArrayFeatureExtractor -> OneHotEncoder -> FeatureVectorizer), nested in the classifier.
    Xc = np.stack([rng.integers(0, 3, 60), rng.integers(0, 4, 60)], axis=1).astype(np.float64)
    y = np.where((Xc[:, 0] == 1) | (Xc[:, 1] == 3), "yes", "no")
    pipe = fit(Pipeline([("ohe", OneHotEncoder(handle_unknown="ignore")),
                         ("lr", LogisticRegression(multi_class="ovr"))]), Xc, y)
    spec = convert(pipe, [("features", datatypes.Array(2))], "answer")
    assert spec.pipelineClassifier.pipeline.models[0].WhichOneof("Type") == "pipeline"
    rows = np.array([[a, b] for a in range(3) for b in range(4)] + [[5, 1], [1, 9], [7, 7]],
                    dtype=np.float64)
    P, L = pipe.predict_proba(rows), pipe.predict(rows)
    cases = [{"inputs": {"features": r}, "outputs": classifier_outputs(spec, l, p, pipe.classes_)}
             for r, l, p in zip(rows, L, P)]
    writer.write("pipeline_nested_one_hot_logistic", spec,
                 SKLEARN + " Pipeline(OneHotEncoder(handle_unknown='ignore'), "
                 "LogisticRegression(ovr)).predict/predict_proba", cases,
                 "nested pipeline: (ArrayFeatureExtractor -> int64 OneHotEncoder (sparse) -> "
                 "FeatureVectorizer) -> GLM classifier; unknown categories",
                 note="coremltools writes the categories as 0..n-1 (the training data uses "
                      "exactly those), reads each double element as int64, and maps an unknown "
                      "category (the last three rows) to all zeros like handle_unknown='ignore'.")

    # OneHotEncoder alone: a plain "pipeline" transformer.
    ohe = OneHotEncoder(handle_unknown="ignore", sparse_output=False).fit(Xc)
    spec = convert(ohe, [("features", datatypes.Array(2))], "encoded")
    cases = [{"inputs": {"features": r}, "outputs": {"encoded": t}}
             for r, t in zip(rows, ohe.transform(rows))]
    writer.write("pipeline_one_hot_transform", spec,
                 SKLEARN + " OneHotEncoder(handle_unknown='ignore').transform", cases,
                 "pipeline (transformer): ArrayFeatureExtractor -> OneHotEncoder -> "
                 "FeatureVectorizer; unknown categories")


# ---------------------------------------------------------------------------
# Non-maximum suppression
# ---------------------------------------------------------------------------

NMS_NOTE = ("Reference semantics (NonMaximumSuppression.proto, PickTop): a box's score is its "
            "largest class confidence and its class the first class with that confidence; "
            "boxes whose score is below the confidence threshold are dropped first; the rest "
            "are visited by descending score; a visited box is kept unless it overlaps an "
            "already kept box (of the same class when perClass) with IoU strictly greater than "
            "the IoU threshold (the proto's wording 'less than' is taken as the usual "
            "'greater than': an IoU threshold of 1 means no suppression, as it says). "
            "Coordinates are (center x, center y, width, height). Outputs are the kept rows of "
            "both inputs (all class confidences of a kept box) in visiting order. The threshold "
            "inputs override the model's parameters. No case has a score or IoU exactly at a "
            "threshold or two equal scores, where the documentation leaves the rule open.")


def nms_reference(conf, coords, iou_t, conf_t, per_class):
    scores = conf.max(axis=1)
    classes = conf.argmax(axis=1)
    order = [i for i in np.argsort(-scores, kind="stable") if scores[i] >= conf_t]
    x0 = coords[:, 0] - coords[:, 2] / 2
    x1 = coords[:, 0] + coords[:, 2] / 2
    y0 = coords[:, 1] - coords[:, 3] / 2
    y1 = coords[:, 1] + coords[:, 3] / 2
    area = coords[:, 2] * coords[:, 3]
    kept = []
    for i in order:
        ok = True
        for j in kept:
            if per_class and classes[i] != classes[j]:
                continue
            w = max(0.0, min(x1[i], x1[j]) - max(x0[i], x0[j]))
            h = max(0.0, min(y1[i], y1[j]) - max(y0[i], y0[j]))
            inter = w * h
            iou = inter / (area[i] + area[j] - inter)
            assert abs(iou - iou_t) > 1e-6, "IoU on the threshold"
            if iou > iou_t:
                ok = False
                break
        if ok:
            kept.append(i)
    for i in range(len(scores)):
        assert abs(scores[i] - conf_t) > 1e-9, "score on the threshold"
    assert len(set(np.round(scores[order], 12))) == len(order), "equal scores"
    return np.array(kept, dtype=int)


def nms_spec(n_classes, per_class, iou, conf, fixed_rows=None):
    spec = new_spec(ct._MINIMUM_FLEXIBLE_SHAPES_SPEC_VERSION)
    d = spec.description

    def array(features, name, cols, fixed=None):
        f = features.add()
        f.name = name
        t = f.type.multiArrayType
        t.dataType = DOUBLE
        if fixed is not None:
            t.shape.extend([fixed, cols])
        else:
            t.shape.extend([1, cols])
            r0 = t.shapeRange.sizeRanges.add()
            r0.lowerBound, r0.upperBound = 0, -1
            r1 = t.shapeRange.sizeRanges.add()
            r1.lowerBound, r1.upperBound = cols, cols
    array(d.input, "confidence", n_classes)
    array(d.input, "coordinates", 4)
    add_feature(d.input, "iouThreshold", "double")
    add_feature(d.input, "confidenceThreshold", "double")
    array(d.output, "confidence_out", n_classes, fixed_rows)
    array(d.output, "coordinates_out", 4, fixed_rows)
    nms = spec.nonMaximumSuppression
    nms.pickTop.perClass = per_class
    nms.iouThreshold = iou
    nms.confidenceThreshold = conf
    nms.confidenceInputFeatureName = "confidence"
    nms.coordinatesInputFeatureName = "coordinates"
    nms.iouThresholdInputFeatureName = "iouThreshold"
    nms.confidenceThresholdInputFeatureName = "confidenceThreshold"
    nms.confidenceOutputFeatureName = "confidence_out"
    nms.coordinatesOutputFeatureName = "coordinates_out"
    return spec


def nms_cases(writer):
    rng = np.random.default_rng(7701)

    def scene(n, n_classes):
        """Clusters of overlapping boxes, confidences summing to at most 1."""
        centers = rng.uniform(0.2, 0.8, (max(1, n // 3), 2))
        coords = []
        for i in range(n):
            c = centers[i % len(centers)] + rng.normal(0, 0.03, 2)
            wh = rng.uniform(0.1, 0.3, 2)
            coords.append([c[0], c[1], wh[0], wh[1]])
        raw = rng.random((n, n_classes + 1)) ** 2
        conf = raw[:, :n_classes] / raw.sum(axis=1, keepdims=True)
        return np.round(conf, 6), np.round(np.array(coords), 6)

    def make_cases(n_classes, per_class, fixed_rows=None, count=10):
        cases = []
        attempt = 0
        while len(cases) < count:
            attempt += 1
            n = [1, 3, 6, 9, 12, 8, 5, 10, 7, 4, 11, 2][len(cases) % 12]
            conf, coords = scene(n, n_classes)
            iou_t = [0.5, 0.3, 0.7, 1.0, 0.45, 0.0, 0.6, 0.5, 0.35, 0.8][len(cases) % 10]
            conf_t = [0.05, 0.2, 0.0, 0.1, 0.3, 0.15, 0.01, 0.25, 0.12, 0.08][len(cases) % 10]
            try:
                kept = nms_reference(conf, coords, iou_t, conf_t, per_class)
            except AssertionError:
                continue
            out_conf, out_coords = conf[kept], coords[kept]
            if fixed_rows is not None:
                if len(kept) > fixed_rows:
                    continue
                pad = fixed_rows - len(kept)
                out_conf = np.concatenate([out_conf, np.zeros((pad, n_classes))])
                out_coords = np.concatenate([out_coords, np.zeros((pad, 4))])
            cases.append({"inputs": {"confidence": conf, "coordinates": coords,
                                     "iouThreshold": iou_t, "confidenceThreshold": conf_t},
                          "outputs": {"confidence_out": out_conf.reshape(-1, n_classes),
                                      "coordinates_out": out_coords.reshape(-1, 4)}})
        return cases

    for name, n_classes, per_class, fixed, checks in (
            ("nms_per_class", 3, True, None, "NMS PickTop per class, 3 classes, flexible output rows"),
            ("nms_class_agnostic", 3, False, None, "NMS PickTop across classes, 3 classes"),
            ("nms_single_class_padded", 1, False, 6,
             "NMS, 1 class, fixed output shape of 6 rows (zero padding)")):
        spec = nms_spec(n_classes, per_class, 0.5, 0.1, fixed)
        note = NMS_NOTE
        if fixed:
            note += (" The outputs have a fixed shape of %d rows: the kept rows are padded with "
                     "zero rows (confidence and coordinates)." % fixed)
        else:
            note += " An empty result is an array of shape [0, C] (written as [])."
        writer.write(name, spec, NUMPY + " PickTop NMS (written for these fixtures)",
                     make_cases(n_classes, per_class, fixed), checks, note=note)


# ---------------------------------------------------------------------------
# Item similarity recommender
# ---------------------------------------------------------------------------

def item_similarity_reference(sim, shift, observed, exclusion, restriction, k):
    """ItemSimilarityRecommender.proto's rule in NumPy float64: the score of item
    j is sum over observed items i (score s_i) of sim[i, j] * (s_i - shift[j]);
    every item not excluded (default: the observed items) and, when a restriction
    list is given, in it, is ranked by descending score (ties: the earlier item),
    and the first k (default: all) are recommended."""
    n = len(shift)
    scores = np.zeros(n)
    for i, s_i in observed.items():
        scores += sim[i] * (s_i - shift)
    candidates = [j for j in range(n) if j not in exclusion
                  and (restriction is None or j in restriction)]
    ranked = sorted(candidates, key=lambda j: (-scores[j], j))
    if k is not None:
        ranked = ranked[:k]
    return ranked, scores


def item_similarity_spec(ids, sim, shift, string_ids, ratings, extra_inputs):
    spec = new_spec(ct._SPECIFICATION_VERSION_IOS_13)
    d = spec.description
    key = "string" if string_ids else "int64"
    items = d.input.add()
    items.name = "items"
    if ratings:
        if string_ids:
            items.type.dictionaryType.stringKeyType.SetInParent()
        else:
            items.type.dictionaryType.int64KeyType.SetInParent()
    else:
        seq = items.type.sequenceType
        (seq.stringType if string_ids else seq.int64Type).SetInParent()
        seq.sizeRange.lowerBound = 0
        seq.sizeRange.upperBound = -1
    isr = spec.itemSimilarityRecommender
    isr.itemInputFeatureName = "items"
    if extra_inputs:
        k = d.input.add()
        k.name = "k"
        k.type.int64Type.SetInParent()
        k.type.isOptional = True
        isr.numRecommendationsInputFeatureName = "k"
        for name, field in (("restrict", "itemRestrictionInputFeatureName"),
                            ("exclude", "itemExclusionInputFeatureName")):
            f = d.input.add()
            f.name = name
            seq = f.type.sequenceType
            (seq.stringType if string_ids else seq.int64Type).SetInParent()
            seq.sizeRange.lowerBound = 0
            seq.sizeRange.upperBound = -1
            f.type.isOptional = True
            setattr(isr, field, name)
    rec = d.output.add()
    rec.name = "recommendations"
    seq = rec.type.sequenceType
    (seq.stringType if string_ids else seq.int64Type).SetInParent()
    seq.sizeRange.lowerBound = 0
    seq.sizeRange.upperBound = -1
    scores = d.output.add()
    scores.name = "scores"
    if string_ids:
        scores.type.dictionaryType.stringKeyType.SetInParent()
        isr.itemStringIds.vector.extend(ids)
    else:
        scores.type.dictionaryType.int64KeyType.SetInParent()
        isr.itemInt64Ids.vector.extend(ids)
    isr.recommendedItemListOutputFeatureName = "recommendations"
    isr.recommendedItemScoreOutputFeatureName = "scores"
    for i in range(len(ids)):
        entry = isr.itemItemSimilarities.add()
        entry.itemId = i
        entry.itemScoreAdjustment = float(shift[i])
        for j in range(len(ids)):
            if sim[i, j] != 0:
                c = entry.similarItemList.add()
                c.itemId = j
                c.similarityScore = float(sim[i, j])
    return spec


def item_similarity_cases(writer):
    rng = np.random.default_rng(8801)
    note = ("Reference semantics (ItemSimilarityRecommender.proto): itemItemSimilarities[i] lists "
            "sim(i, j) for item index i and similar item index j (unlisted pairs are 0) and "
            "itemScoreAdjustment shift_i; the score of item j is sum over the input items i "
            "(with their rating s_i, 1 for a sequence input) of sim(i, j) * (s_i - shift_j). "
            "Every item that is not excluded (the exclusion input when given, else the input "
            "items) and is in the restriction input when one is given is ranked by descending "
            "score, equal scores in item order; the first k (the numRecommendations input, "
            "else all) are recommended. scores holds the recommended items' scores. Item ids "
            "in inputs that the model does not know are ignored.")
    for name, string_ids, ratings, extra in (("item_similarity_string_ratings", True, True, True),
                                             ("item_similarity_int64_sequence", False, False, False)):
        n = 9
        ids = (["item%d" % i for i in range(n)] if string_ids
               else [1000 + 7 * i for i in range(n)])
        sim = np.round(rng.uniform(0, 1, (n, n)), 3)
        sim[rng.uniform(0, 1, (n, n)) < 0.4] = 0
        np.fill_diagonal(sim, 0)
        shift = np.round(rng.uniform(-0.5, 0.5, n), 3) if ratings else np.zeros(n)
        spec = item_similarity_spec(ids, sim, shift, string_ids, ratings, extra)
        cases = []
        for c in range(14):
            chosen = sorted(rng.choice(n, size=int(rng.integers(0, 4)), replace=False).tolist())
            if ratings:
                observed = {i: float(np.round(rng.uniform(-2, 5), 2)) for i in chosen}
                items = {ids[i]: observed[i] for i in chosen}
                if c == 3:
                    items["unknown-item"] = 4.0
            else:
                observed = {i: 1.0 for i in chosen}
                items = [ids[i] for i in chosen]
                if c == 3:
                    items.append(99999)
            inputs = {"items": items}
            exclusion, restriction, k = set(chosen), None, None
            if extra:
                if c % 3 == 1:
                    k = int(rng.integers(0, n))
                    inputs["k"] = k
                if c % 4 == 2:
                    restriction = set(rng.choice(n, size=5, replace=False).tolist())
                    inputs["restrict"] = [ids[i] for i in sorted(restriction)]
                if c % 5 == 4:
                    exclusion = set(rng.choice(n, size=2, replace=False).tolist())
                    inputs["exclude"] = [ids[i] for i in sorted(exclusion)]
            ranked, scores = item_similarity_reference(sim, shift, observed, exclusion, restriction, k)
            cases.append({"inputs": inputs,
                          "outputs": {"recommendations": [ids[j] for j in ranked],
                                      "scores": {ids[j]: float(scores[j]) for j in ranked}}})
        checks = ("item-item recommender, %s ids, %s input%s"
                  % ("string" if string_ids else "int64",
                     "rating dictionary with score adjustments" if ratings else "sequence",
                     ", numRecommendations/restriction/exclusion inputs" if extra else ""))
        writer.write(name, spec, NUMPY + " (the proto's formula, written for these fixtures)",
                     cases, checks, note=note)


# ---------------------------------------------------------------------------
# Refused kinds: closed Apple models
# ---------------------------------------------------------------------------

REFUSED_DIR = "Refused"


def refused_specs():
    """Tiny, valid specifications of the model kinds whose parameters only Apple's
    frameworks can read. Their parameter bytes are placeholders: modelc must refuse
    the kind at load, before looking at them."""
    def base(version, inputs, outputs):
        spec = new_spec(version)
        for name, kind in inputs:
            add_feature(spec.description.input, name, kind)
        for name, kind in outputs:
            add_feature(spec.description.output, name, kind)
        return spec

    specs = {}
    s = base(3, [("text", "string")], [("label", "string")])
    s.description.predictedFeatureName = "label"
    s.textClassifier.revision = 1
    s.textClassifier.language = "en"
    s.textClassifier.modelParameterData = b"closed"
    s.textClassifier.stringClassLabels.vector.extend(["positive", "negative"])
    specs["textClassifier"] = s

    s = base(3, [("text", "string")], [])
    for name, element in (("tokens", "string"), ("tags", "string"),
                          ("locations", "int64"), ("lengths", "int64")):
        f = s.description.output.add()
        f.name = name
        getattr(f.type.sequenceType, element + "Type").SetInParent()
    w = s.wordTagger
    w.revision = 1
    w.language = "en"
    w.tokensOutputFeatureName = "tokens"
    w.tokenTagsOutputFeatureName = "tags"
    w.tokenLocationsOutputFeatureName = "locations"
    w.tokenLengthsOutputFeatureName = "lengths"
    w.modelParameterData = b"closed"
    w.stringTags.vector.extend(["NOUN", "VERB"])
    specs["wordTagger"] = s

    s = base(3, [], [])
    add_feature(s.description.output, "sceneprint", "array", shape=[2048])
    image = s.description.input.add()
    image.name = "image"
    image.type.imageType.width = 299
    image.type.imageType.height = 299
    image.type.imageType.colorSpace = FeatureTypes_pb2.ImageFeatureType.BGR
    s.visionFeaturePrint.scene.version = 1
    specs["visionFeaturePrint"] = s

    s = base(ct._SPECIFICATION_VERSION_IOS_13, [], [])
    for name, shape in (("audio", [15600]), ("melspectrogram", [1, 96, 64])):
        f = add_feature(s.description.input if name == "audio" else s.description.output,
                        name, "array", shape=shape)
        f.type.multiArrayType.dataType = FeatureTypes_pb2.ArrayFeatureType.FLOAT32
    s.soundAnalysisPreprocessing.vggish.SetInParent()
    specs["soundAnalysisPreprocessing"] = s

    s = base(ct._SPECIFICATION_VERSION_IOS_13, [("text", "string")], [("label", "string")])
    s.description.predictedFeatureName = "label"
    s.gazetteer.revision = 2
    s.gazetteer.language = "en"
    s.gazetteer.modelParameterData = b"closed"
    s.gazetteer.stringClassLabels.vector.extend(["CITY", "RIVER"])
    specs["gazetteer"] = s

    s = base(ct._SPECIFICATION_VERSION_IOS_13, [("word", "string")], [])
    add_feature(s.description.output, "embedding", "array", shape=[300])
    s.wordEmbedding.revision = 2
    s.wordEmbedding.language = "en"
    s.wordEmbedding.modelParameterData = b"closed"
    specs["wordEmbedding"] = s

    s = base(ct.SPECIFICATION_VERSION, [("x", "double")], [("y", "double")])
    s.customModel.className = "MYCustomScorer"
    s.customModel.description = "A model implemented by an app's own class"
    s.customModel.parameters["scale"].doubleValue = 2.0
    specs["customModel"] = s

    s = base(ct._SPECIFICATION_VERSION_IOS_13, [("x", "double")], [("y", "double")])
    s.linkedModel.linkedModelFile.linkedModelFileName.defaultValue = "Scorer.mlmodelc"
    s.linkedModel.linkedModelFile.linkedModelSearchPath.defaultValue = "$BUNDLE_MAIN"
    specs["linkedModel"] = s
    return specs


def write_refused(out_dir):
    """Writes Parity/Refused/KIND.mlmodel for every closed kind."""
    directory = os.path.join(out_dir, SUBDIR, REFUSED_DIR)
    specs = refused_specs()
    for kind, spec in specs.items():
        assert spec.WhichOneof("Type") == kind, kind
        set_metadata(spec, "Refused-kind fixture: %s (closed Apple parameters)" % kind)
        write_bytes(os.path.join(directory, kind + ".mlmodel"), serialize(spec))
    return sorted(specs)


# ---------------------------------------------------------------------------

def write_readme(writer):
    lines = [
        "# Parity fixtures",
        "",
        "Made by `Fixtures/parity.py` (also run by `Fixtures/generate.py`). Each `NAME.json` "
        "names a model `NAME.mlmodel` in this folder, its Core ML model type (`kind`, the "
        "schema's name), the engine that produced the outputs (`reference`) and a "
        "`tolerance`: every number must satisfy |got - want| <= tolerance * max(1, |want|). "
        "`cases` lists inputs and expected outputs under the model's own feature names: a "
        "number for a double or int64 feature, a (nested) array of numbers for a multi-array "
        "(nesting = shape), `null` for NaN (a missing value), a string for a string feature, "
        "an object for a dictionary (int64 keys as decimal strings), a string or integer for "
        "a predicted label. `note`, when present, says where Core ML's rule differs from the "
        "library's and what is compared instead, or which inputs were left out and why. "
        "The outputs always come from the named library (or, for kinds no library has, a "
        "NumPy float64 computation or a dict lookup), never from evaluating the Core ML "
        "specification.",
        "",
    ]
    for name, kind, reference, count, checks in writer.entries:
        lines.append("- `%s.json` (%s, %d cases, %s): %s" % (name, kind, count, reference, checks))
    write_bytes(os.path.join(writer.dir, "README.md"), ("\n".join(lines) + "\n").encode())


def generate(out_dir):
    writer = Writer(out_dir)
    if os.path.isdir(writer.dir):
        for entry in os.listdir(writer.dir):
            if entry.endswith((".json", ".mlmodel")) or entry == "README.md":
                os.remove(os.path.join(writer.dir, entry))
    glm_cases(writer)
    tree_cases(writer)
    xgb_cases(writer)
    svm_cases(writer)
    knn_cases(writer)
    transform_cases(writer)
    pipeline_cases(writer)
    nms_cases(writer)
    item_similarity_cases(writer)
    write_readme(writer)
    write_refused(out_dir)
    total = sum(os.path.getsize(os.path.join(writer.dir, f)) for f in os.listdir(writer.dir)
                if os.path.isfile(os.path.join(writer.dir, f)))
    assert total <= 3 * 1024 * 1024, total
    return writer.entries


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=HERE, help="output folder (default: %(default)s)")
    args = parser.parse_args(argv)
    entries = generate(os.path.abspath(args.out))
    print("wrote %d parity case files to %s" % (len(entries),
                                                os.path.join(os.path.abspath(args.out), SUBDIR)))


if __name__ == "__main__":
    sys.exit(main())
