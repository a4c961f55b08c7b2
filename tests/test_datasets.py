"""Named data sets (``flows.datasets``): the digits loader (shapes, labels, scaling, split,
separability, the missing-extra error) and the synthetic sets against the figures' data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from flows import Dataset
from flows import datasets as D
from flows.data import is_separable, sign_constrained_separable

sklearn = pytest.importorskip("sklearn", reason="the digits loader needs the extra 'data'")

PAIRS = [(0, 1), (3, 8), (4, 9)]
ROOT = Path(__file__).resolve().parent.parent


#: The scripts run in fresh Python processes (from the repository root), by name.
FRESH_PROCESS_CODE = {
    # reading the digits does not import scikit-learn
    "digits": (
        "import sys, flows.datasets as D\n"
        "train, test = D.digits(3, 8)\n"
        "assert train.n + test.n > 300\n"
        "print(any(m == 'sklearn' or m.startswith('sklearn.') for m in sys.modules))\n"
    ),
    # without scikit-learn: the synthetic sets, and digits fails with the install hint
    "no scikit-learn": (
        "import sys; sys.modules['sklearn'] = None\n"
        "import flows.datasets as D\n"
        "assert D.gaussian_blobs().n == 40 and D.teacher_data().n == 12\n"
        "try:\n    D.digits(0, 1)\nexcept ImportError as e:\n    print(e)\n"
    ),
}


@pytest.fixture(scope="module")
def python_output():
    """What a fresh Python process running each of :data:`FRESH_PROCESS_CODE` prints (the
    processes run concurrently; each must exit with status 0): ``{name: stdout}``."""
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for name, code in FRESH_PROCESS_CODE.items()
    }
    outputs = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=600)  # a hang guard, not a pass criterion
        assert proc.returncode == 0, (name, err)
        outputs[name] = out
    return outputs


@pytest.fixture(scope="module")
def bundled():
    """The bundled file read directly, without flows.datasets: (images, targets)."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return np.asarray(bunch.data, dtype=float), np.asarray(bunch.target)


@pytest.mark.parametrize("a, b", PAIRS)
def test_digits_shapes_labels_and_scaling(a, b, bundled):
    """Two Datasets with 64 features in [0, 1], labels +1 (class a) and -1 (class b), the
    test set a quarter of each class, and every image of the two classes used exactly once."""
    X_all, target = bundled
    train, test = D.digits(a, b)
    assert isinstance(train, Dataset) and isinstance(test, Dataset)
    assert train.d == test.d == D.DIGITS_PIXELS == 64
    n_a, n_b = int(np.sum(target == a)), int(np.sum(target == b))
    assert train.n + test.n == n_a + n_b
    assert np.sum(test.y > 0) == round(0.25 * n_a) and np.sum(test.y < 0) == round(0.25 * n_b)
    for data in (train, test):
        assert set(np.unique(data.y)) == {-1.0, 1.0}
        assert data.X.min() >= 0.0 and data.X.max() <= 1.0
    assert train.X.max() == 1.0  # raw 16 exists in every class: scaled by 16, not by the max
    # the rows are the images of the two classes, scaled by 16, labelled by class
    split = D.digit_indices(a, b)
    np.testing.assert_array_equal(train.X, X_all[split.train] / 16.0)
    np.testing.assert_array_equal(test.X, X_all[split.test] / 16.0)
    np.testing.assert_array_equal(train.y, np.where(target[split.train] == a, 1.0, -1.0))
    assert set(target[np.concatenate(split)]) == {a, b}
    assert np.intersect1d(split.train, split.test).size == 0


def test_bundled_file_is_read_as_load_digits_reads_it(
    bundled, python_output, monkeypatch, tmp_path
):
    """The digits are read from scikit-learn's bundled file without importing scikit-learn (a
    fresh process never imports it) and equal ``load_digits()``; where the file is not found
    (another scikit-learn layout) ``load_digits`` itself is used, with the same result."""
    X_all, target = bundled
    X, y = D._digits_arrays()
    np.testing.assert_array_equal(X, X_all)
    np.testing.assert_array_equal(y, target)
    assert python_output["digits"].strip() == "False"
    D._digits_arrays.cache_clear()
    monkeypatch.setattr(D, "_scikit_learn_folder", lambda: tmp_path)  # no file there
    try:
        X2, y2 = D._digits_arrays()
    finally:
        D._digits_arrays.cache_clear()
    np.testing.assert_array_equal(X2, X_all)
    np.testing.assert_array_equal(y2, target)


def test_raw_intensities_are_kept():
    """scaled=False: the integer intensities 0..16, 16 times the scaled features."""
    train, test = D.digits(3, 8)
    raw_train, raw_test = D.digits(3, 8, scaled=False)
    assert raw_train.X.max() == 16.0
    np.testing.assert_array_equal(raw_train.X, np.round(raw_train.X))
    np.testing.assert_array_equal(raw_train.X, 16.0 * train.X)
    np.testing.assert_array_equal(raw_test.y, test.y)


@pytest.mark.parametrize("a, b", PAIRS)
def test_training_set_is_separable_also_in_the_mean_difference_orthant(a, b):
    """The separability the docstring states: through the origin (an independent LP through
    is_separable), and by a beta with the signs of the training class-mean difference."""
    train, _ = D.digits(a, b)
    assert is_separable(train.X, train.y)
    diff = train.X[train.y > 0].mean(axis=0) - train.X[train.y < 0].mean(axis=0)
    signs = np.where(diff >= 0, 1.0, -1.0)
    assert sign_constrained_separable(train, signs)
    assert not sign_constrained_separable(train, np.ones(64))  # beta >= 0 cannot separate


def test_split_is_deterministic_in_the_seed():
    """Same seed, same split; other seeds, other splits (and still stratified)."""
    first, again = D.digit_indices(4, 9, seed=3), D.digit_indices(4, 9, seed=3)
    np.testing.assert_array_equal(first.train, again.train)
    np.testing.assert_array_equal(first.test, again.test)
    t1, _ = D.digits(4, 9, seed=3)
    t2, _ = D.digits(4, 9, seed=3)
    np.testing.assert_array_equal(t1.X, t2.X)
    others = [D.digit_indices(4, 9, seed=s) for s in (0, 1, 2)]
    tests = [tuple(o.test) for o in others + [first]]
    assert len(set(tests)) == len(tests)
    sizes = {len(o.test) for o in others}
    assert len(sizes) == 1  # the class sizes fix the split sizes


def test_test_fraction_sets_the_split_sizes():
    split = D.digit_indices(0, 1, test_fraction=0.5)
    assert abs(len(split.test) - len(split.train)) <= 2


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(a=3, b=3), "different"),
        (dict(a=3, b=10), "b"),
        (dict(a=-1, b=2), "a"),
        (dict(a=1.0, b=2), "a"),
        (dict(a=0, b=1, test_fraction=1.0), "test_fraction"),
        (dict(a=0, b=1, test_fraction=0), "test_fraction"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, word):
    with pytest.raises(ValueError, match=word):
        D.digits(**kwargs)


def test_missing_scikit_learn_names_the_extra(monkeypatch):
    """Without scikit-learn the loader says which extra to install, even with the images
    already read once in this process."""
    D.digits(0, 1)  # fills the cache
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[data\]'"):
        D.digits(0, 1)


def test_module_works_without_scikit_learn_in_a_fresh_process(python_output):
    """Importing flows.datasets and building the synthetic sets needs no scikit-learn; digits
    then fails with the install hint."""
    assert "pip install -e '.[data]'" in python_output["no scikit-learn"]


def test_a_pair_that_is_not_separable_is_named(monkeypatch):
    """If the file gave non-separable classes the error would say which pair and which set."""
    X = np.zeros((8, 64))
    X[:, 0] = 1.0
    target = np.array([0, 1] * 4)
    monkeypatch.setattr(D, "_digits_arrays", lambda: (X, target))
    with pytest.raises(
        ValueError,
        match=r"digits 0 vs 1: the training set .* not linearly "
        r"separable",
    ):
        D.digits(0, 1)


def test_synthetic_sets():
    """The paper's single examples, and the blobs / teacher sets as the figures define them."""
    np.testing.assert_array_equal(D.single_example_mu2().X, [[1.0, 2.0]])
    np.testing.assert_array_equal(D.single_example_mu5().X, [[1.0, 2.0, 3.0, 4.0, 5.0]])
    blobs = D.gaussian_blobs()
    assert blobs.X.shape == (40, 2) and np.all(blobs.y[::2] == 1) and np.all(blobs.y[1::2] == -1)
    # means +-(1, 2), std 0.6: the signed rows y_i x_i scatter around (1, 2)
    np.testing.assert_allclose((blobs.y[:, None] * blobs.X).mean(axis=0), [1.0, 2.0], atol=0.3)
    teacher = D.teacher_data()
    assert teacher.X.shape == (12, 3)
    from analysis.maxmargin import max_margin

    assert np.all(max_margin(teacher, p=1).beta >= -1e-9)  # columns flipped: l1 solution >= 0


def test_synthetic_sets_are_the_figures_data():
    """Figures 6 and 7 draw their data from here (one place), as arrays."""
    maxmargin_angles = pytest.importorskip("figures.maxmargin_angles")
    blobs = pytest.importorskip("figures.blobs")
    X, y = blobs.gaussian_blobs()
    np.testing.assert_array_equal(D.gaussian_blobs().X, X)
    np.testing.assert_array_equal(D.gaussian_blobs().y, y)
    X, y = maxmargin_angles.teacher_data()
    np.testing.assert_array_equal(D.teacher_data().X, X)
    np.testing.assert_array_equal(D.teacher_data().y, y)
