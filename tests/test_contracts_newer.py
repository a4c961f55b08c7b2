"""Input contracts of the newer entry points, by property-based tests (hypothesis), in the
style of ``tests/test_contracts.py`` (whose helpers this file uses).

The properties, for each entry point:

1. **Extreme sizes are refused before they are allocated.** A size argument drawn over many
   orders of magnitude either builds what it asks for (small sizes) or is a ``ValueError``
   naming that parameter and the memory it would need (above :data:`flows.checks.MAX_FLOATS`),
   never a ``MemoryError``.
2. **Invalid inputs are refused by name.** A wrong object, a wrong type, NaN, an index out of
   range: a ``ValueError`` whose message names the parameter, not another exception and not a
   silent result.
3. **Extreme scales keep the answer.** Where the mathematics is covariant under a rescaling of
   the data (interpolators, the saddle-to-saddle limit), the answer at the scales ``10^k`` is the
   rescaled answer, or an honest status; a floating-point warning from the library stays an
   error (the suite's ``filterwarnings``).

Entry points: :class:`flows.networks.TwoLayerCNN`, :func:`flows.networks.banded_data`,
:mod:`flows.datasets` (``sparse_regression``, ``gaussian_blobs``, ``teacher_data``).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_contracts import CONTRACT, assert_rejects

from flows import datasets
from flows.checks import MAX_FLOATS
from flows.networks import TwoLayerCNN, banded_data

#: Sizes at most this many floats are built by the valid-size properties (fast); sizes between
#: it and :data:`MAX_FLOATS` are skipped (they allocate up to 2 GiB).
SMALL = 10**5


def sizes(most: int = 10**15) -> st.SearchStrategy:
    """Positive integers spread over orders of magnitude: ``m 10^k``, up to ``most``."""
    return (
        st.tuples(st.integers(1, 9), st.integers(0, 15))
        .map(lambda p: p[0] * 10 ** p[1])
        .filter(lambda v: v <= most)
    )


def refused_for_memory(call, name: str) -> None:
    """``call()`` is a ValueError naming ``name`` and the memory it would need."""
    try:
        call()
    except ValueError as exc:
        message = str(exc)
    else:
        pytest.fail(f"an allocation beyond {MAX_FLOATS} floats was accepted")
    assert name in message and ("GiB" in message or "TiB" in message), message


# ------------------------------------------------------------------------------ sizes


@CONTRACT
@given(sizes(), sizes(), st.integers(1, 3), st.sampled_from(["circular", "same", "valid"]))
def test_cnn_sizes_are_built_or_refused_by_name(height, width, kernel, padding):
    """``TwoLayerCNN((H, W), k)``: built where its window indices are small, a ValueError naming
    input_shape (with the memory) where they exceed the cap."""
    kernel = min(kernel, height, width)
    positions = (
        (height - kernel + 1) * (width - kernel + 1) if padding == "valid" else height * width
    )
    call = partial(TwoLayerCNN, (height, width), kernel, padding=padding)
    if positions * kernel**2 > MAX_FLOATS:
        refused_for_memory(call, "input_shape")
    elif positions * kernel**2 <= SMALL:
        model = call()
        assert model.indices.shape == (positions, kernel**2)


@CONTRACT
@given(sizes(10**12), st.integers(6, 40))
def test_cnn_channels_are_built_or_refused_by_name(channels, length):
    """``TwoLayerCNN(N, k, channels)``: a ValueError naming channels when the weights exceed
    the cap."""
    call = partial(TwoLayerCNN, length, 3, channels)
    weights = channels * (3 + length)
    if weights > MAX_FLOATS:
        refused_for_memory(call, "channels")
    elif weights <= SMALL:
        assert call().size == weights


@CONTRACT
@given(sizes(), sizes(10**13))
def test_banded_data_sizes_are_built_or_refused_by_name(n, length):
    """``banded_data(n, length)``: X (n, N) built when small, a ValueError naming n or length
    (with the memory) beyond the cap."""
    length = max(length, 20)
    call = partial(banded_data, n=n, length=length)
    if length > MAX_FLOATS:
        refused_for_memory(call, "length")
    elif n * length > MAX_FLOATS:
        refused_for_memory(call, "n")
    elif n * length <= SMALL:
        data = call()
        assert data.X.shape == (n, length) and np.all(np.isfinite(data.X))


@CONTRACT
@given(sizes(10**6), sizes(10**6), sizes(10**6))
def test_sparse_regression_sizes_are_built_or_refused_by_name(n, n_test, d):
    """``sparse_regression(n, n_test, d)``: refused naming n or n_test beyond the cap."""
    call = partial(datasets.sparse_regression, n=n, n_test=n_test, d=d, sparsity=1)
    if n * d > MAX_FLOATS:
        refused_for_memory(call, "n")
    elif (n + n_test) * d > MAX_FLOATS:
        refused_for_memory(call, "n_test")
    elif (n + n_test) * d <= SMALL:
        split = call()
        assert split.train.X.shape == (n, d) and split.test.X.shape == (n_test, d)


@CONTRACT
@given(sizes(10**6), sizes(10**6))
def test_synthetic_classification_sizes_are_refused_by_name(n, d):
    """``gaussian_blobs`` and ``teacher_data``: a ValueError naming n beyond the cap (the small
    sizes have their own tests, tests/test_datasets.py)."""
    if n * d > MAX_FLOATS:
        refused_for_memory(partial(datasets.gaussian_blobs, n=max(n, 2), mean=np.ones(d)), "n")
        refused_for_memory(partial(datasets.teacher_data, n=n, d=d), "n")


def test_size_arguments_of_wrong_type_are_refused_by_name():
    """Sizes that are not integers are ValueErrors naming them."""
    for bad in (None, 2.5, "4", True, [4]):
        assert_rejects(partial(banded_data, n=bad), "n")
        assert_rejects(partial(banded_data, length=bad), "length")
        assert_rejects(partial(datasets.sparse_regression, n=bad), "n")
