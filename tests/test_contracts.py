"""Input contracts of the public entry points, by property-based tests (hypothesis).

For every public entry point this file checks two properties:

1. **Valid inputs keep the contract.** Random valid arguments, each scalar given in one of
   the forms a caller may use (a Python number, a numpy scalar such as ``np.float64(0.5)`` or
   ``np.int64(2)``, or a 0-d array such as ``np.array(0.5)``), make the call return, and the
   result is finite where the docstring says so or honestly flagged (a ``status`` in the
   documented set, a :class:`flows.results.Cause` that agrees with it and a non-empty
   ``message`` when the run did not simply succeed). The checks are invariants of the
   mathematics (bounds, symmetries, shapes, constraints), not values copied from the code.
2. **Invalid inputs are refused by name.** One argument of an otherwise valid call is replaced
   by an invalid value (text, a bool, None, a complex number, a masked array, NaN, +-inf, a
   value out of the documented range, a wrong shape, a list of strings): the call must raise
   a ``ValueError`` whose message names that parameter; any other exception, or a returned
   result, fails the property. Every example checks every parameter, one at a time.

Hyper-parameters and their flags are read from :data:`flows.algorithms.ALGORITHMS`, so a new
algorithm is covered as its table entry declares it. A floating-point warning raised by the
library on valid input stays an error (the suite's ``filterwarnings``). On the command line an
argparse error (``SystemExit(2)``) counts as exit status 2.

Entry points: :func:`flows.simulate`, :func:`flows.iterate`, :class:`flows.Dataset`,
:func:`flows.single_example`, :mod:`flows.schedules` (``parse``, ``constant``, ``cosine``,
``warmup_cosine``), :mod:`flows.closed_form.solutions` (``gd``, ``linf_sam``),
:mod:`analysis.maxmargin` (``max_margin``, ``normalized_margin``, ``angle``),
:mod:`analysis.limits` (``final_direction``, ``predict_linf_limit``), :mod:`analysis.regimes`
(``regime3_boundary``, ``initial_rates_from_field``, ``classify``, ``leader_phase_diagram``),
:mod:`analysis.lesam` (``lesam_radius``, ``stall_point``, ``classify_lesam``,
``lesam_boundary``), :mod:`analysis.sharpness` (``hessian``, ``hessian_trace``,
``top_hessian_eigenvalue``), :mod:`analysis.amplification` (``leaders``,
``leader_sequence``, ``shares``) and the command line :func:`flows.run.main` (bad numeric flags
exit with status 2 and one line on stderr, no traceback).

Everything is small (n, d <= 4, horizons <= 2, at most 20 discrete steps) so that the file runs
in a few seconds once numba's cache is warm.
"""

from __future__ import annotations

import math
import re
import warnings
from functools import lru_cache, partial

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, example, given, settings
from hypothesis import strategies as st

from analysis import amplification, limits, maxmargin, sharpness
from analysis.lesam import boundaries as lesam_boundaries
from analysis.lesam import radius as lesam_radius_module
from analysis.lesam import regimes as lesam_regimes
from analysis.lesam import stall
from analysis.regimes import boundaries as regime_boundaries
from analysis.regimes import classification, leaders
from flows import (
    ALGORITHMS,
    CLOCKS,
    Cause,
    Dataset,
    Trajectory,
    iterate,
    schedules,
    simulate,
    single_example,
)
from flows.algorithms import known_hyperparameters
from flows.closed_form import solutions
from flows.model import LOSSES
from flows.run import main

#: The losses of classification data (the squared loss has its own tests, test_regression.py).
MARGIN_LOSSES = sorted(k for k, v in LOSSES.items() if v.task == "classification")

CONTRACT = settings(
    max_examples=12,
    deadline=None,
    report_multiple_bugs=False,  # one failure per property: the shortest report
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],  # no explain
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
)
#: For the properties that run flows (each example integrates one or a few short flows).
FLOWS = settings(CONTRACT, max_examples=8)

NAN, INF = float("nan"), float("inf")

# ------------------------------------------------------------------------------ helpers


def _names(message: str, names: tuple[str, ...]) -> bool:
    """Whether ``message`` contains one of ``names`` as a whole word (so 'rho' does not match
    inside 'rho_max', nor 'y' inside 'every')."""
    return any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", message) for n in names)


def assert_rejects(call, *names: str) -> None:
    """``call()`` raises a ``ValueError`` whose message names one of ``names``.

    Warnings are silenced so that what is observed is what a caller sees (an error, or an
    accepted input); an exception of another type propagates and fails the property.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = call()
        except ValueError as exc:
            message = str(exc)
        else:
            pytest.fail(
                f"accepted: returned {type(result).__name__} instead of a ValueError naming "
                f"{' or '.join(names)}"
            )
    assert _names(message, names), f"the ValueError does not name {names}: {message!r}"


def quiet(call):
    """``call()`` with the documented advice of ``simulate`` silenced (a RuntimeWarning when the
    initialization keeps a sign pattern that cannot separate the data); any other warning still
    reaches the suite's filters (a floating-point warning from the library is an error)."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="the initialization keeps", category=RuntimeWarning
        )
        return call()


FLOAT_FORMS = (float, np.float64, np.array)  # np.array(x): a 0-d array
INT_FORMS = (int, np.int64, np.array)


def reals(lo: float, hi: float, **kw) -> st.SearchStrategy:
    """A real number in ``[lo, hi]`` as a float, a numpy float or a 0-d array."""
    return st.tuples(st.floats(lo, hi, allow_nan=False, **kw), st.sampled_from(FLOAT_FORMS)).map(
        lambda p: p[1](p[0])
    )


def ints(lo: int, hi: int) -> st.SearchStrategy:
    """An integer in ``[lo, hi]`` as an int, a numpy int or a 0-d array."""
    return st.tuples(st.integers(lo, hi), st.sampled_from(INT_FORMS)).map(lambda p: p[1](p[0]))


def vectors(d: int, lo: float, hi: float) -> st.SearchStrategy:
    """A (d,) float array with entries in ``[lo, hi]``."""
    return st.lists(st.floats(lo, hi), min_size=d, max_size=d).map(np.array)


def increasing(d: int, lo: float = 0.25, hi: float = 4.0) -> st.SearchStrategy:
    """A strictly increasing positive (d,) vector (the paper's ``mu``)."""
    return (
        st.lists(st.floats(lo, hi), min_size=d, max_size=d, unique=True)
        .map(sorted)
        .filter(lambda v: np.all(np.diff(v) > 1e-3 * v[-1]))
        .map(np.array)
    )


# Invalid values, by kind (masked arrays and vectors are built per example).
TEXT = ("abc", "0.5", "")
BOOLS = (True, False, np.True_)
COMPLEX = (1 + 0j, 0.5 + 0.5j, np.complex128(0.5))
STRING_LISTS = (["a", "b"], ["0.5"])
NONFINITE = (NAN, INF, -INF, np.float64(NAN), np.array(INF))


def _is_number(value) -> bool:
    """Whether ``value`` is a real number (Python, numpy or 0-d array; not a bool)."""
    if isinstance(value, (bool, np.bool_)) or isinstance(value, np.ma.MaskedArray):
        return False
    return isinstance(value, (int, float, np.integer, np.floating)) or (
        isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf"
    )


def _masked_scalar():
    return np.ma.masked_array(0.5, mask=True)


def _bad_scalar_shapes():
    return [np.array([0.5]), np.array([0.5, 0.5]), np.ones((2, 2)), [0.5, 0.5], []]


def bad_real(
    *, low: float | None = None, strict: bool = False, none_ok=False, shapes=True, extra=()
):
    """Invalid values of a finite real scalar parameter that must be ``>= low`` (``> low`` if
    ``strict``): text, bools, None (unless documented), complex, masked, non-finite, wrong
    shapes, lists of strings and numbers below the bound (in every numeric form)."""
    fixed = [
        *TEXT,
        *BOOLS,
        *COMPLEX,
        *STRING_LISTS,
        *NONFINITE,
        *extra,
    ]
    if not none_ok:
        fixed.append(None)
    options = [st.sampled_from(fixed), st.builds(_masked_scalar)]
    if shapes:
        options.append(st.sampled_from(range(5)).map(lambda k: _bad_scalar_shapes()[k]))
    if low is not None:
        below = st.floats(max_value=low, exclude_max=not strict, allow_nan=False, min_value=-1e6)
        options.append(st.tuples(below, st.sampled_from(FLOAT_FORMS)).map(lambda p: p[1](p[0])))
    return st.one_of(options)


def bad_int(least: int, most: int | None = None, *, none_ok=False):
    """Invalid values of an integer parameter in ``[least, most]``: text, bools, None, complex,
    masked, non-finite, non-integral numbers, wrong shapes, lists of strings, out of range."""
    fixed = [
        *TEXT,
        *BOOLS,
        *COMPLEX,
        *STRING_LISTS,
        NAN,
        INF,
        least + 0.5,
        np.float64(least + 0.5),
        np.array([least]),
        [least, least],
    ]
    if not none_ok:
        fixed.append(None)
    options = [
        st.sampled_from(fixed),
        st.builds(lambda: np.ma.masked_array(least, mask=True)),
        st.tuples(st.integers(least - 10**6, least - 1), st.sampled_from(INT_FORMS)).map(
            lambda p: p[1](p[0])
        ),
    ]
    if most is not None:
        options.append(st.integers(most + 1, most + 10**6))
    return st.one_of(options)


def bad_name(*valid: str, none_ok: bool = False):
    """Invalid values of a parameter that takes one of the names ``valid`` (or None, the
    default chosen from the data, if ``none_ok``)."""
    bad = ["no-such-name", valid[0].upper() + "x", 1, [valid[0]], True]
    return st.sampled_from(bad if none_ok else [*bad, None])


def bad_vector(d: int, *, positive=False, none_ok=False, ndim=1, extra=()):
    """Invalid values of a finite (d,) real vector (``> 0`` entrywise if ``positive``); with
    ``ndim=1`` a (1, d) array too (not where a (depth, d) array is valid)."""
    good = np.linspace(0.5, 1.5, d)

    def with_entry(value):
        out = good.copy()
        out[-1] = value
        return out

    def masked():
        return np.ma.masked_array(good, mask=[False] * (d - 1) + [True])

    fixed = [
        with_entry(NAN),
        with_entry(INF),
        with_entry(-INF),
        [str(v) for v in good],
        "abc",
        np.ones(d, dtype=bool),
        good + 0.5j,
        np.zeros((d, 1, 1)) + 1.0,
        np.array([]),
        *extra,
    ]
    if ndim == 1:  # (1, d) is a valid shape where a (depth, d) array is (alpha at depth 1)
        fixed.append(np.ones((1, d)))
    if not none_ok:
        fixed.append(None)
    if positive:
        fixed += [with_entry(0.0), with_entry(-1.0)]
    return st.one_of(st.sampled_from(fixed), st.builds(masked))


# ------------------------------------------------------------------------------ data sets


@st.composite
def separable(draw, max_n: int = 4, max_d: int = 4):
    """Separable ``(X, y)``: random ``X``, a random ``beta*`` and ``y = sign(X beta*)`` with
    every margin clear of 0; returns ``(X, y, beta_star)``."""
    n = draw(st.integers(1, max_n))
    d = draw(st.integers(1, max_d))
    X = np.array(draw(st.lists(vectors(d, -3.0, 3.0), min_size=n, max_size=n)))
    beta = draw(vectors(d, -2.0, 2.0))
    margins = X @ beta
    assume(np.all(np.abs(margins) > 1e-2 * max(1.0, np.max(np.abs(X)) * np.max(np.abs(beta)))))
    return X, np.sign(margins), beta


def check_trajectory(traj, algorithm: str, depth: int, d: int, t_max: float, alpha) -> None:
    """The documented contract of a :class:`flows.Trajectory` (starting at ``alpha``)."""
    assert isinstance(traj, Trajectory)
    assert traj.status in (0, 1, -1)
    assert isinstance(traj.cause, Cause)
    assert traj.cause.status == traj.status
    assert isinstance(traj.message, str)
    if traj.status != 0:
        assert traj.message.strip(), "a run that did not succeed must say why"
    assert traj.algorithm == algorithm and traj.depth == depth
    T = traj.t.shape[0]
    assert T >= 1
    assert traj.tau.shape == (T,) and traj.loss.shape == (T,)
    assert np.all(np.isfinite(traj.t)) and np.all(np.isfinite(traj.tau))
    assert np.all(np.diff(traj.t) >= 0) and np.all(np.diff(traj.tau) >= 0)
    assert traj.t[0] == 0.0 and traj.t[-1] <= t_max * (1 + 1e-12)
    if traj.cause is Cause.REACHED_END:
        assert traj.t[-1] == pytest.approx(t_max, rel=1e-9)
    assert traj.log_abs_beta.shape == (T, d) and traj.sign_beta.shape == (T, d)
    assert traj.log_abs_theta.shape == (T, depth, d) and traj.sign_theta.shape == (T, depth, d)
    for arr in (traj.log_abs_beta, traj.log_abs_theta):  # finite, or -inf for an exact 0
        assert not np.any(np.isnan(arr)) and not np.any(np.isposinf(arr))
    for arr in (traj.sign_beta, traj.sign_theta):
        assert np.all(np.isin(arr, (-1, 0, 1)))
    assert np.all(np.isfinite(traj.loss)) and np.all(traj.loss >= 0)
    start = np.broadcast_to(np.asarray(alpha, dtype=float), (depth, d))  # w^(l)(0) = alpha
    theta0 = traj.sign_theta[0] * np.exp(traj.log_abs_theta[0])
    np.testing.assert_allclose(theta0, start, rtol=1e-9)


# ------------------------------------------------------------------------------ flows


def hyperparameter_values(spec) -> st.SearchStrategy:
    """Valid values of one hyper-parameter: True or False for a switch (``spec.flag``), else a
    number >= its minimum in any form, or for a schedulable one a named schedule."""
    if getattr(spec, "flag", False):
        return st.sampled_from([True, False, np.True_, np.False_])
    low = 0.0 if spec.minimum is None else spec.minimum
    numbers = reals(low, low + 1.0)
    if not spec.schedulable:
        return numbers
    named = st.one_of(
        st.floats(0.0, 1.0).map(schedules.constant),
        st.tuples(st.floats(0.0, 1.0), st.floats(0.5, 3.0)).map(lambda p: schedules.cosine(*p)),
    )
    return st.one_of(numbers, named)


@st.composite
def flow_arguments(draw):
    """``(kwargs, depth, d)`` of a valid call of :func:`flows.simulate` (or ``iterate``)."""
    d = draw(st.integers(1, 3))
    mu = draw(vectors(d, 0.25, 2.0))
    algorithm = draw(st.sampled_from(sorted(ALGORITHMS)))
    depth = draw(st.integers(1, 3))
    alpha = draw(
        st.one_of(
            reals(0.2, 1.5),
            vectors(d, 0.2, 1.5),
            vectors(d * depth, 0.2, 1.5).map(lambda v: v.reshape(depth, d)),
        )
    )
    kwargs = dict(
        data=single_example(mu),
        algorithm=algorithm,
        depth=draw(st.sampled_from(INT_FORMS))(depth),
        alpha=alpha,
    )
    for spec in ALGORITHMS[algorithm].hyperparameters:
        if spec.default is None or draw(st.booleans()):
            kwargs[spec.name] = draw(hyperparameter_values(spec))
    return kwargs, depth, d


def _official_lesam(**hyperparameters) -> dict:
    """The arguments of a valid ``le-sam-official`` run at L = 2 on ``mu = (1, 2)``."""
    return dict(
        data=single_example([1.0, 2.0]),
        algorithm="le-sam-official",
        depth=2,
        alpha=1.0,
        **hyperparameters,
    )


SIMULATE_OPTIONS = {
    "clock": st.sampled_from(sorted(CLOCKS)),
    "n_points": ints(2, 12),
    "loss": st.sampled_from(MARGIN_LOSSES),
    "rtol": reals(1e-9, 1e-4),
    "atol": reals(1e-100, 1e-12),
    "chart": st.sampled_from(["auto", "asinh"]),
    "chart_scale": reals(0.5, 2.0),
    "original_time": st.booleans(),
    "loss_floor": st.one_of(st.none(), reals(1e-3, 0.5)),
    "method": st.sampled_from(["DOP853", "RK45"]),
}


@FLOWS
@given(
    flow_arguments(),
    reals(0.1, 2.0),
    ints(2_000, 20_000),
    st.fixed_dictionaries({"backend": st.just("numpy")}, optional=SIMULATE_OPTIONS),
)
@example(  # official LE-SAM at the edge of its declared ranges: eps tiny and no cap
    arguments=(_official_lesam(eps=1e-300, rho_max=0.0), 2, 2),
    t_max=1.0,
    max_nfev=20_000,
    options={},
)
@example(  # official LE-SAM with a scheduled cap
    arguments=(_official_lesam(rho_max=schedules.constant(0.1)), 2, 2),
    t_max=1.0,
    max_nfev=20_000,
    options={},
)
def test_simulate_valid_inputs_keep_the_contract(arguments, t_max, max_nfev, options):
    """Valid arguments of ``simulate`` return a Trajectory that is finite or flagged.

    Every documented keyword appears in some examples; scalars come as Python numbers, numpy
    scalars and 0-d arrays. The budget ``max_nfev`` is always given (bounded run time); a run
    that spends it must say so (status -1).
    """
    kwargs, depth, d = arguments
    traj = quiet(lambda: simulate(**kwargs, t_max=t_max, max_nfev=max_nfev, **options))
    check_trajectory(traj, kwargs["algorithm"], depth, d, float(t_max), kwargs["alpha"])
    assert traj.t.shape[0] <= int(options.get("n_points", 201))


def simulate_bad_values(algorithm: str, depth: int, d: int) -> dict[str, st.SearchStrategy]:
    """Invalid values of every parameter of ``simulate`` (``algorithm``, ``depth``, ``d``: the
    valid call; a hyper-parameter is checked as the algorithm declares it where it reads it)."""
    bad_alpha = st.one_of(
        bad_vector(d, positive=True, ndim=2),
        bad_real(low=0.0, strict=True).filter(lambda v: not isinstance(v, (list, np.ndarray))),
        st.just(np.ones((depth + 1, d))),
        st.just(np.ones(d + 1)),
    )
    table = {
        "data": st.sampled_from(
            [None, "data", np.ones((1, 2)), [[1.0, 2.0]], {"X": [[1.0]], "y": [1.0]}]
        ),
        "algorithm": bad_name("l2-sam"),
        "depth": bad_int(1, 100_000),
        "alpha": bad_alpha,
        "t_max": bad_real(low=0.0, strict=True),
        "rtol": bad_real(low=0.0, strict=True, extra=(0.5, 1.0)),
        "atol": bad_real(low=0.0, strict=True),
        "chart_scale": bad_real(low=0.0, strict=True, none_ok=True),
        "n_points": bad_int(2, 100_000),
        "max_nfev": bad_int(1),
        "loss_floor": bad_real(low=0.0, strict=True, none_ok=True),
        "clock": bad_name("rescaled", none_ok=True),
        "loss": bad_name("logistic", none_ok=True),
        "method": bad_name("DOP853"),
        "chart": bad_name("auto"),
        "backend": bad_name("auto"),
        "original_time": st.sampled_from(["yes", "True", None, 1.5, [True]]),
        "reduced": st.sampled_from(["yes", "False", 1.5, [True]]),
    }
    own = {spec.name: spec for spec in ALGORITHMS[algorithm].hyperparameters}
    for name, known in known_hyperparameters().items():
        spec = own.get(name, known)  # the algorithm's own declaration where it reads it
        if getattr(spec, "flag", False):  # a switch: True or False
            table[name] = st.one_of(
                st.sampled_from(["yes", "True", 0.5, 2, NAN, 1 + 0j, [True], np.array([1, 0])]),
                st.builds(lambda: np.ma.masked_array(1, mask=True)),
            )
            continue
        extra = () if spec.schedulable else (lambda t: 1.0,)
        table[name] = bad_real(low=spec.minimum, none_ok=True, extra=extra)
    return table


@FLOWS
@given(flow_arguments(), st.data())
def test_simulate_invalid_inputs_are_refused_by_name(arguments, data):
    """One invalid argument of an otherwise valid ``simulate`` call is a ValueError naming it
    (also a hyper-parameter the algorithm does not read: its value is checked all the same)."""
    kwargs, depth, d = arguments
    table = simulate_bad_values(kwargs["algorithm"], depth, d)
    for name in sorted(table):  # every parameter, one at a time
        bad = data.draw(table[name], label=name)
        call = {**kwargs, "t_max": 0.5, "n_points": 3, name: bad}
        if name == "depth":  # a scalar alpha: a (depth, d) one would be refused for its shape
            call["alpha"] = 1.0
        assert_rejects(partial(simulate, **call), name)


@CONTRACT
@given(flow_arguments(), st.sampled_from(["lr", "momentum", "Rho", "rho2", "eta"]))
def test_simulate_unknown_hyperparameter_is_refused_by_name(arguments, keyword):
    """A keyword that no algorithm reads is a ValueError naming it."""
    kwargs, _, _ = arguments
    assert_rejects(lambda: simulate(**kwargs, t_max=0.5, **{keyword: 0.1}), keyword)


@FLOWS
@given(
    st.sampled_from(
        [
            (a, s.name)
            for a in sorted(ALGORITHMS)
            for s in ALGORITHMS[a].hyperparameters
            if s.schedulable
        ]
    ),
    st.sampled_from([-1.0, NAN, INF, "x", None, 1j, (0.5, 0.5), True]),
)
def test_simulate_bad_schedule_values_are_refused_by_name(pair, returned):
    """A schedule (a callable of the time) that returns an invalid value is a ValueError
    naming the hyper-parameter, not another exception and not a silent run."""
    algorithm, name = pair
    kwargs = {
        s.name: False if getattr(s, "flag", False) else 0.5
        for s in ALGORITHMS[algorithm].hyperparameters
    }
    kwargs[name] = lambda t: returned
    data = single_example([1.0, 2.0])
    assert_rejects(lambda: simulate(data, algorithm, 2, 0.5, t_max=0.5, n_points=3, **kwargs), name)


@CONTRACT
@given(flow_arguments(), reals(1e-3, 0.5), ints(1, 20), ints(1, 5), st.data())
def test_iterate_valid_inputs_keep_the_contract(arguments, eta, steps, record_every, data):
    """Valid arguments of ``iterate`` return a DiscreteRun whose values are finite (or that
    stops with status -1, ``Cause.OVERFLOW`` and a message)."""
    kwargs, depth, d = arguments
    loss = data.draw(st.sampled_from(MARGIN_LOSSES), label="loss")
    run = quiet(
        lambda: iterate(**kwargs, eta=eta, steps=steps, record_every=record_every, loss=loss)
    )
    assert run.status in (0, -1)
    assert isinstance(run.cause, Cause) and run.cause.status == run.status
    assert isinstance(run.message, str) and run.message.strip()
    K = run.steps.shape[0]
    assert K >= 1 and run.steps[0] == 0 and np.all(np.diff(run.steps) > 0)
    assert run.theta.shape == (K, depth, d) and run.beta.shape == (K, d)
    assert run.loss.shape == (K,)
    assert np.all(np.isfinite(run.theta)) and np.all(np.isfinite(run.beta))
    assert np.all(np.isfinite(run.loss)) and np.all(run.loss >= 0)
    assert run.eta == float(eta)
    np.testing.assert_allclose(run.t, run.steps * float(eta))
    if run.status == 0:
        assert run.steps[-1] == int(steps)
        assert run.cause is Cause.REACHED_END


@CONTRACT
@given(flow_arguments(), st.data())
def test_iterate_invalid_inputs_are_refused_by_name(arguments, data):
    """One invalid argument of an otherwise valid ``iterate`` call is a ValueError naming it."""
    kwargs, depth, d = arguments
    sim = simulate_bad_values(kwargs["algorithm"], depth, d)
    table = {
        **{k: sim[k] for k in ("data", "algorithm", "depth", "alpha", "loss")},
        **{spec.name: sim[spec.name] for spec in known_hyperparameters().values()},
        "eta": bad_real(low=0.0, strict=True),
        "steps": st.one_of(bad_int(1), st.just(10**8 + 1)),
        "record_every": bad_int(1),
    }
    for name in sorted(table):  # every parameter, one at a time
        bad = data.draw(table[name], label=name)
        call = {**kwargs, "eta": 0.1, "steps": 3, name: bad}
        if name == "depth":  # a scalar alpha: a (depth, d) one would be refused for its shape
            call["alpha"] = 1.0
        assert_rejects(partial(iterate, **call), name)


# ------------------------------------------------------------------------------ data


@CONTRACT
@given(separable(), st.sampled_from(["array", "list"]))
def test_dataset_valid_inputs_keep_the_contract(sample, form):
    """Separable data with +-1 labels make a read-only Dataset holding exactly that data."""
    X, y, _ = sample
    data = Dataset(X.tolist(), y.tolist()) if form == "list" else Dataset(X, y)
    assert (data.n, data.d) == X.shape
    np.testing.assert_array_equal(data.X, X)
    np.testing.assert_array_equal(data.y, y)
    np.testing.assert_array_equal(data.signed_features, y[:, None] * X)
    assert not data.X.flags.writeable and not data.y.flags.writeable


@CONTRACT
@given(separable(), st.data())
def test_dataset_invalid_inputs_are_refused_by_name(sample, data):
    """Bad features, bad labels or non-separable data are a ValueError naming X or y."""
    X, y, _ = sample
    n, d = X.shape
    bad_X = st.one_of(
        st.sampled_from(
            [
                np.where(np.arange(n * d).reshape(n, d) == 0, NAN, X),
                np.where(np.arange(n * d).reshape(n, d) == 0, INF, X),
                X.astype(bool),
                X + 1j,
                X.astype(str),
                np.ma.masked_array(X, mask=np.arange(n * d).reshape(n, d) == 0),
                X[..., None],
                X[0],
                np.ones((0, d)),
                None,
            ]
        ),
    )
    bad_y = st.sampled_from(
        [
            np.append(y, 1.0),
            y[:-1] if n > 1 else np.ones(0),
            np.where(np.arange(n) == 0, 0.0, y),
            np.where(np.arange(n) == 0, 2.0, y),
            np.where(np.arange(n) == 0, 0.5, y),
            np.where(np.arange(n) == 0, NAN, y),
            y > 0,
            y + 0j,
            y.astype(str),
            np.ma.masked_array(y, mask=np.arange(n) == 0),
            y[:, None],
            None,
        ]
    )
    assert_rejects(partial(Dataset, data.draw(bad_X, label="X"), y), "X")
    assert_rejects(partial(Dataset, X, data.draw(bad_y, label="y")), "y")
    # a row and its mirror image with the same label: no beta separates them
    assert_rejects(partial(Dataset, np.vstack([X, -X[:1]]), np.append(y, y[0])), "X", "y")


@CONTRACT
@given(st.integers(1, 4).flatmap(lambda d: vectors(d, -3.0, 3.0)).filter(lambda v: np.any(v)))
def test_single_example_valid_inputs_keep_the_contract(mu):
    """Any finite non-zero ``mu`` gives the one-example data set ``{(mu, +1)}``."""
    data = single_example(mu)
    assert (data.n, data.d) == (1, mu.size)
    np.testing.assert_array_equal(data.X[0], mu)
    np.testing.assert_array_equal(data.y, [1.0])


@CONTRACT
@given(st.integers(1, 4).flatmap(lambda d: st.one_of(bad_vector(d), st.just(np.zeros(d)))))
def test_single_example_invalid_inputs_are_refused_by_name(mu):
    """A ``mu`` that is not a finite non-zero vector is a ValueError naming mu."""
    assert_rejects(lambda: single_example(mu), "mu")


# ------------------------------------------------------------------------------ schedules


@st.composite
def schedule_arguments(draw):
    """``(kind, args)`` of a valid named schedule: a value >= 0 and ordered times, end > 0."""
    kind = draw(st.sampled_from(["constant", "cosine", "warmup_cosine"]))
    value = draw(st.floats(0.0, 5.0))
    arity = {"constant": 0, "cosine": 1, "warmup_cosine": 3}[kind]
    times = sorted(draw(st.lists(st.floats(0.0, 10.0), min_size=arity, max_size=arity)))
    if times:
        assume(times[-1] > 0)
    return kind, [value, *times]


def check_schedule(sched, kind: str, args: list[float]) -> None:
    """A named schedule: its name and arguments, and values in ``[0, value]`` at any time."""
    assert isinstance(sched, schedules.Schedule)
    assert sched.name == kind
    np.testing.assert_allclose(sched.args, args)
    assert sched.maximum == pytest.approx(args[0])
    times = np.linspace(0.0, 12.0, 25)
    values = np.asarray(sched(times), dtype=float)
    assert values.shape == times.shape and np.all(np.isfinite(values))
    assert np.all(values >= 0) and np.all(values <= args[0] * (1 + 1e-12))
    for t, value in zip(times, values, strict=True):  # one time: the same value
        assert sched(float(t)) == pytest.approx(float(value), abs=1e-12)


@CONTRACT
@given(
    st.one_of(
        schedule_arguments(),
        st.floats(-1e6, 1e6).map(lambda v: ("number", [v])),
    ),
    st.sampled_from(["rho", "sigma", "my_value"]),
    st.booleans(),
)
@example(spec=("warmup_cosine", [0.5, 0.0, 1.0, 1.0]), name="rho", spaces=False)  # no decay
@example(spec=("cosine", [0.5, 5e-324]), name="rho", spaces=False)  # a subnormal decay time
def test_parse_valid_inputs_keep_the_contract(spec, name, spaces):
    """A number, or ``name:arg,...`` of a known schedule with valid arguments, is parsed to
    that number or that schedule."""
    kind, args = spec
    sep = ", " if spaces else ","
    text = repr(args[0]) if kind == "number" else f"{kind}:" + sep.join(map(repr, args))
    parsed = schedules.parse(text, name)
    if kind == "number":
        assert parsed == args[0]
    else:
        check_schedule(parsed, kind, args)


#: Text that is neither a finite number nor a valid schedule.
BAD_SCHEDULE_TEXT = [
    "",
    "abc",
    "1,2",
    "nan",
    "inf",
    "-inf",
    "cosine",
    "cosine:",
    "cosine:1",
    "cosine:1,2,3",
    "cosine:-1,2",
    "cosine:nan,2",
    "cosine:1,inf",
    "cosine:1,0",
    "cosine:1,-2",
    "cosine:1,",
    "constant:x",
    "constant:inf",
    "constant:-0.5",
    "warmup_cosine:1,3,2,4",
    "warmup_cosine:1,0,0,0",
    "foo:1",
    None,
    True,
    1j,
    ["a"],
]


@CONTRACT
@given(st.sampled_from(["rho", "sigma", "my_value"]))
def test_parse_invalid_inputs_are_refused_by_name(name):
    """Text that is not a finite number or a valid schedule is a ValueError naming ``name``."""
    for text in BAD_SCHEDULE_TEXT:
        assert_rejects(partial(schedules.parse, text, name), name)


SCHEDULE_PARAMETERS = {
    "constant": ("value",),
    "cosine": ("value", "t_end"),
    "warmup_cosine": ("value", "t_warmup", "t_hold", "t_end"),
}


@CONTRACT
@given(schedule_arguments(), st.data())
def test_schedule_constructors_valid_inputs_keep_the_contract(spec, data):
    """``constant``, ``cosine`` and ``warmup_cosine`` take valid numbers in any numeric form."""
    kind, args = spec
    forms = [data.draw(st.sampled_from(FLOAT_FORMS), label="form")(a) for a in args]
    check_schedule(getattr(schedules, kind)(*forms), kind, args)


@CONTRACT
@given(schedule_arguments(), st.data())
def test_schedule_constructors_invalid_inputs_are_refused_by_name(spec, data):
    """An invalid argument of a schedule constructor is a ValueError naming it (for times out
    of order, one of the two times involved)."""
    kind, args = spec
    names = SCHEDULE_PARAMETERS[kind]
    for k, name in enumerate(names):  # every argument, one at a time
        call = list(args)
        call[k] = data.draw(bad_real(low=0.0), label=name)
        assert_rejects(partial(getattr(schedules, kind), *call), name)
    if kind == "warmup_cosine":  # t_hold before t_warmup
        out_of_order = [args[0], 2.0, 1.0, 3.0]
        assert_rejects(lambda: schedules.warmup_cosine(*out_of_order), "t_warmup", "t_hold")


# ------------------------------------------------------------------------------ closed forms


@st.composite
def closed_form_arguments(draw):
    """``(mu, alpha, rho, depth, tau)`` of a valid call (tau sorted)."""
    d = draw(st.integers(1, 4))
    mu = draw(vectors(d, 0.1, 3.0))
    alpha = draw(st.one_of(reals(0.1, 2.0), vectors(d, 0.1, 2.0)))
    rho = draw(reals(0.0, 2.0))
    depth = draw(ints(1, 4))
    tau = draw(
        st.one_of(
            reals(0.0, 2.0),
            st.lists(st.floats(0.0, 2.0), min_size=1, max_size=6).map(sorted).map(np.array),
        )
    )
    return mu, alpha, rho, depth, tau


@CONTRACT
@given(closed_form_arguments(), st.sampled_from(["gd", "linf_sam"]))
def test_closed_forms_valid_inputs_keep_the_contract(arguments, which):
    """``gd`` and ``linf_sam`` return (T, d) solutions that start at ``alpha`` and are finite
    (or -inf for an exact zero) before each coordinate's blow-up time."""
    mu, alpha, rho, depth, tau = arguments
    sol = (
        solutions.gd(mu, alpha, depth, tau)
        if which == "gd"
        else solutions.linf_sam(mu, alpha, rho, depth, tau)
    )
    times = np.atleast_1d(np.asarray(tau, dtype=float))
    d = mu.size
    assert sol.log_abs_a.shape == (times.size, d) and sol.sign_a.shape == (times.size, d)
    assert sol.hit_time.shape == (d,) and sol.blowup_time.shape == (d,)
    assert sol.depth == int(depth)
    np.testing.assert_array_equal(sol.tau, times)
    assert np.all(np.isin(sol.sign_a, (-1, 0, 1)))
    before = times[:, None] < sol.blowup_time[None, :]
    assert not np.any(np.isnan(sol.log_abs_a[before]))
    assert not np.any(np.isposinf(sol.log_abs_a[before]))
    a0 = np.broadcast_to(np.asarray(alpha, dtype=float), (d,))
    start = times == 0
    np.testing.assert_allclose(sol.log_abs_a[start], np.broadcast_to(np.log(a0), (start.sum(), d)))
    if which == "gd":
        assert np.all(np.isnan(sol.hit_time))
        assert np.all(sol.sign_a == 1)
    assert np.all(sol.blowup_time > 0)


@CONTRACT
@given(closed_form_arguments(), st.sampled_from(["gd", "linf_sam"]), st.data())
def test_closed_forms_invalid_inputs_are_refused_by_name(arguments, which, data):
    """An invalid ``mu``, ``alpha``, ``rho``, ``depth`` or ``tau`` is a ValueError naming it."""
    mu, alpha, rho, depth, tau = arguments
    d = mu.size
    table = {
        "mu": st.one_of(bad_vector(d, positive=True), st.just(2.0)),
        "alpha": st.one_of(
            bad_vector(d, positive=True, extra=(np.ones(d + 1),)),
            st.sampled_from([0.0, -1.0, NAN, "1", None, True, 1j]),
        ),
        "depth": bad_int(1),
        "tau": st.one_of(
            bad_vector(3, extra=(np.array([0.5, -1.0]), -0.5)).filter(
                lambda v: not (isinstance(v, np.ndarray) and v.ndim == 1 and v.size == 0)
            ),
            st.sampled_from([NAN, INF, -1.0, None, "1", True, 1j, np.ones((2, 2))]),
        ),
    }
    if which == "linf_sam":
        table["rho"] = bad_real(low=0.0)
    for name in sorted(table):  # every parameter, one at a time
        bad = data.draw(table[name], label=name)
        call = {"mu": mu, "alpha": alpha, "rho": rho, "depth": depth, "tau": tau, name: bad}
        if which == "gd":
            call.pop("rho")
            assert_rejects(partial(solutions.gd, **call), name)
        else:
            assert_rejects(partial(solutions.linf_sam, **call), name)


# ------------------------------------------------------------------------------ max margin

P_FORMS = st.tuples(st.sampled_from([1, 2]), st.sampled_from(INT_FORMS + (float,))).map(
    lambda p: p[1](p[0])
)
BAD_P = st.sampled_from(
    [0, 3, -1, 1.5, np.float64(1.5), "2", True, None, NAN, INF, 2 + 0j, [2], np.array([2])]
)


@CONTRACT
@given(separable(), P_FORMS, st.booleans())
@example(  # columns 313 decades apart (a subnormal entry)
    sample=(np.array([[1.0, 2.2250738585e-313]]), np.ones(1), np.array([1.0, 0.0])),
    p=1,
    as_dataset=False,
)
@example(  # columns 170 decades apart: the squares of the l2 weights underflow
    sample=(np.array([[1.0, 1e-170]]), np.ones(1), np.array([1.0, 0.0])), p=2, as_dataset=False
)
@example(  # three scales of column: 1, 1e-28, 1e-189
    sample=(np.array([[1e-28, 1e-189, 1.0]]), np.ones(1), np.array([0.0, 0.0, 1.0])),
    p=2,
    as_dataset=False,
)
@example(sample=(np.eye(2), np.ones(2), np.ones(2)), p=np.array(1), as_dataset=True)
def test_max_margin_valid_inputs_keep_the_contract(sample, p, as_dataset):
    """The max-margin solution of separable data meets every margin constraint, has a unit
    direction, a status in {0, 1} with a message, and no other separator has a larger
    normalized margin."""
    X, y, beta_star = sample
    mm = maxmargin.max_margin(Dataset(X, y), p=p) if as_dataset else maxmargin.max_margin(X, y, p)
    assert mm.p == int(p)
    assert mm.status in (0, 1) and isinstance(mm.message, str) and mm.message
    assert np.all(np.isfinite(mm.beta)) and np.all(np.isfinite(mm.direction))
    assert np.linalg.norm(mm.direction) == pytest.approx(1.0)
    assert math.isfinite(mm.margin) and mm.margin > 0
    if mm.status == 0:
        assert np.all(y * (X @ mm.beta) >= 1 - 1e-6)
        other = maxmargin.normalized_margin(beta_star, X, y, p)
        assert other <= mm.margin * (1 + 1e-6) + 1e-12


@CONTRACT
@given(separable(), st.data())
def test_max_margin_invalid_inputs_are_refused_by_name(sample, data):
    """A ``p`` other than 1 or 2, bad ``X`` or ``y``, or non-separable data are a ValueError
    naming the parameter."""
    X, y, _ = sample
    n, d = X.shape
    bad_p = data.draw(BAD_P, label="p")
    assert_rejects(partial(maxmargin.max_margin, X, y, bad_p), "p")
    assert_rejects(partial(maxmargin.max_margin, Dataset(X, y), p=bad_p), "p")
    bad_X = data.draw(
        st.sampled_from([X.astype(str), X + 1j, X.astype(bool), X[0], None, "X"])
        | st.just(np.where(np.arange(n * d).reshape(n, d) == 0, NAN, X))
        | st.just(np.ma.masked_array(X, mask=np.arange(n * d).reshape(n, d) == 0)),
        label="X",
    )
    assert_rejects(partial(maxmargin.max_margin, bad_X, y, 2), "X")
    bad_y = data.draw(
        st.sampled_from([np.append(y, 1.0), 0 * y, y > 0, y.astype(str), None, y + 0j]),
        label="y",
    )
    assert_rejects(partial(maxmargin.max_margin, X, bad_y, 2), "y")
    mirrored = (np.vstack([X, -X[:1]]), np.append(y, y[0]))  # not separable
    assert_rejects(partial(maxmargin.max_margin, *mirrored, 1), "X", "y")


@CONTRACT
@given(separable(), P_FORMS, st.data())
def test_normalized_margin_valid_inputs_keep_the_contract(sample, p, data):
    """The normalized margin of any finite non-zero ``beta`` is finite, at most the max margin,
    and invariant under positive scalings of ``beta``."""
    X, y, _ = sample
    d = X.shape[1]
    beta = data.draw(
        vectors(d, -3.0, 3.0).filter(lambda b: np.max(np.abs(b)) >= 1e-3), label="beta"
    )
    scale = data.draw(st.sampled_from([1e-200, 1e-3, 1.0, 1e5, 1e200]), label="scale")
    value = maxmargin.normalized_margin(beta, X, y, p)
    assert math.isfinite(value)
    best = maxmargin.max_margin(X, y, p)
    if best.status == 0:
        assert value <= best.margin * (1 + 1e-6) + 1e-12
    assert maxmargin.normalized_margin(scale * beta, X, y, p) == pytest.approx(value, rel=1e-9)
    assert math.isnan(maxmargin.normalized_margin(np.zeros(d), X, y, p))


@CONTRACT
@given(separable(), st.data())
def test_normalized_margin_invalid_inputs_are_refused_by_name(sample, data):
    """An invalid ``beta`` or ``p`` is a ValueError naming it."""
    X, y, _ = sample
    d = X.shape[1]
    bad_beta = data.draw(bad_vector(d, extra=(np.ones(d + 1),)), label="beta")
    assert_rejects(partial(maxmargin.normalized_margin, bad_beta, X, y, 2), "beta")
    bad_p = data.draw(BAD_P, label="p")
    assert_rejects(partial(maxmargin.normalized_margin, np.ones(d), X, y, bad_p), "p")


@CONTRACT
@given(
    st.integers(1, 4)
    .flatmap(lambda d: st.tuples(vectors(d, -3.0, 3.0), vectors(d, -3.0, 3.0)))
    .filter(lambda uv: min(np.max(np.abs(uv[0])), np.max(np.abs(uv[1]))) >= 1e-3),
    st.sampled_from([1e-250, 1e-3, 1.0, 1e3, 1e250]),
)
def test_angle_valid_inputs_keep_the_contract(uv, scale):
    """The angle of two non-zero vectors is in [0, pi], symmetric, scale-invariant, 0 to
    itself and pi to its opposite."""
    u, v = uv
    a = maxmargin.angle(u, v)
    assert 0.0 <= a <= math.pi
    assert maxmargin.angle(v, u) == pytest.approx(a, abs=1e-12)
    assert maxmargin.angle(scale * u, v) == pytest.approx(a, abs=1e-9)
    assert maxmargin.angle(u.tolist(), u) == pytest.approx(0.0, abs=1e-7)
    assert maxmargin.angle(u, -u) == pytest.approx(math.pi, abs=1e-7)


@CONTRACT
@given(st.integers(1, 4), st.data())
def test_angle_invalid_inputs_are_refused_by_name(d, data):
    """Non-numeric, empty or differently sized vectors are a ValueError naming u or v."""
    good = np.linspace(1.0, 2.0, d)
    bad = data.draw(
        st.sampled_from(
            [
                "abc",
                None,
                [str(x) for x in good],
                good + 1j,
                good > 0,
                np.array([]),
                np.ones(d + 1),
            ]
        )
        | st.just(np.ma.masked_array(good, mask=np.arange(d) == 0)),
        label="bad vector",
    )
    assert_rejects(partial(maxmargin.angle, bad, good), "u")
    assert_rejects(partial(maxmargin.angle, good, bad), "v")


# ------------------------------------------------------------------------------ limits


@lru_cache(maxsize=1)
def sample_trajectories() -> tuple[Trajectory, ...]:
    """A few short runs: growth (status 0), a finite-time blow-up (status 1) and a collapse."""
    data = single_example([1.0, 2.0])
    return (
        simulate(data, "gd", 2, 0.5, t_max=1.0, n_points=9),
        simulate(data, "l2-sam", 3, 1.0, rho=0.1, t_max=2.0, n_points=9),
        simulate(data, "linf-sam", 2, 0.3, rho=0.5, t_max=2.0, n_points=9),
        simulate(data, "l2-sam", 2, 0.2, rho=1.0, t_max=2.0, n_points=9),
    )


@CONTRACT
@given(st.integers(0, 3), reals(1e-3, 1.0), reals(0.0, 1.0))
def test_final_direction_valid_inputs_keep_the_contract(k, window, growth_tol):
    """``final_direction`` of a trajectory gives a unit (or zero, if collapsed) direction,
    an angle of movement in [0, pi] and the trajectory's status (a blow-up diverges)."""
    traj = sample_trajectories()[k]
    est = limits.final_direction(traj, window=window, growth_tol=growth_tol)
    d = traj.log_abs_beta.shape[1]
    assert est.direction.shape == (d,)
    norm = np.linalg.norm(est.direction)
    assert norm == pytest.approx(1.0) or (norm == 0 and est.collapsed)
    assert math.isnan(est.movement) or 0.0 <= est.movement <= math.pi
    assert est.status == traj.status and est.t_end == traj.t[-1]
    assert isinstance(est.collapsed, bool) and isinstance(est.diverged, bool)
    if traj.status == 1:
        assert est.diverged


@CONTRACT
@given(st.integers(0, 3), st.data())
def test_final_direction_invalid_inputs_are_refused_by_name(k, data):
    """A ``traj`` that is not a Trajectory, a ``window`` outside (0, 1] or a ``growth_tol``
    that is not a finite number >= 0 is a ValueError naming it."""
    traj = sample_trajectories()[k]
    table = {
        "traj": st.sampled_from([None, "traj", {"t": [0.0]}, np.zeros((2, 2)), 1.0]),
        "window": bad_real(low=0.0, strict=True, extra=(1.5, 2.0, np.float64(1.0 + 1e-9))),
        "growth_tol": bad_real(low=0.0),
    }
    for name in sorted(table):  # every parameter, one at a time
        bad = data.draw(table[name], label=name)
        call = {"traj": traj, "window": 0.2, "growth_tol": 0.05, name: bad}
        assert_rejects(partial(limits.final_direction, **call), name)


@CONTRACT
@given(
    st.integers(1, 4).flatmap(
        lambda d: st.tuples(vectors(d, 0.1, 3.0), st.one_of(reals(0.1, 2.0), vectors(d, 0.1, 2.0)))
    ),
    reals(0.0, 2.0),
    ints(2, 6),
    reals(0.0, 0.5),
)
def test_predict_linf_limit_valid_inputs_keep_the_contract(point, rho, depth, rtol):
    """Cor 3.5's prediction is a coordinate with ``alpha_j > rho``, or None when there is
    none."""
    mu, alpha = point
    j = limits.predict_linf_limit(mu, alpha, rho, depth, rtol)
    a = np.broadcast_to(np.asarray(alpha, dtype=float), mu.shape)
    if np.any(a > float(rho)):
        assert isinstance(j, int) and 0 <= j < mu.size and a[j] > float(rho)
    else:
        assert j is None


@CONTRACT
@given(st.integers(1, 4), st.data())
def test_predict_linf_limit_invalid_inputs_are_refused_by_name(d, data):
    """An invalid ``mu``, ``alpha``, ``rho``, ``depth`` (also L = 1) or ``rtol`` is a
    ValueError naming it."""
    table = {
        "mu": bad_vector(d, positive=True),
        "alpha": st.one_of(
            bad_vector(d, positive=True, extra=(np.ones(d + 1), np.ones((2, d)))),
            st.sampled_from([0.0, -1.0, NAN, None, "1", True, 1j]),
        ),
        "rho": bad_real(low=0.0),
        "depth": st.one_of(bad_int(2), st.just(1)),
        "rtol": bad_real(low=0.0, extra=(1.0, 2.0)),
    }
    for name in sorted(table):  # every parameter, one at a time
        bad = data.draw(table[name], label=name)
        call = {"mu": np.arange(1.0, d + 1), "alpha": 1.0, "rho": 0.5, "depth": 2, "rtol": 1e-12}
        call[name] = bad
        assert_rejects(partial(limits.predict_linf_limit, **call), name)


# ------------------------------------------------------------------------------ regimes

REGIME_MU = st.integers(2, 4).flatmap(increasing)
#: For the functions that run flows: ``mu_d / mu_1 <= 4`` (a wider spread, e.g. ``mu = (1, 4,
#: 15.4)``, makes an l2-SAM collapse spend the whole default budget of field evaluations: slow).
FLOW_MU = st.integers(2, 3).flatmap(lambda d: increasing(d, 1.0, 4.0))


@CONTRACT
@given(REGIME_MU, reals(1e-3, 1e3), reals(0.1, 2.0))
def test_regime_boundaries_valid_inputs_keep_the_contract(mu, rho, alpha):
    """The regime-3 boundary is finite, positive, linear in ``rho`` and above the collapse
    certificate; the initial rates from the field are finite and, at ``rho = 0``, equal to
    GD's ``mu`` (``d log a_j / dtau = mu_j`` at L = 2)."""
    b3 = regime_boundaries.regime3_boundary(mu, rho)
    bc = regime_boundaries.collapse_certificate_boundary(mu, rho)
    assert math.isfinite(b3) and 0 < bc < b3
    assert b3 == pytest.approx(float(rho) * regime_boundaries.regime3_boundary(mu, 1.0))
    rates = regime_boundaries.initial_rates_from_field(mu, alpha, min(float(rho), 2.0))
    assert rates.shape == mu.shape and np.all(np.isfinite(rates))
    np.testing.assert_allclose(
        regime_boundaries.initial_rates_from_field(mu, alpha, 0.0), mu, rtol=1e-9
    )


def regime_mu_bad():
    """Invalid ``mu`` of the regime analysis (positive, strictly increasing, d >= 2)."""
    return st.one_of(
        bad_vector(3, positive=True),
        st.sampled_from([np.array([2.0, 1.0]), np.array([1.0, 1.0]), np.array([1.0]), 1.0]),
    )


@CONTRACT
@given(REGIME_MU, st.data())
def test_regime_boundaries_invalid_inputs_are_refused_by_name(mu, data):
    """An invalid ``mu``, ``alpha`` or ``rho`` is a ValueError naming it."""
    table = {
        "mu": regime_mu_bad(),
        "alpha": bad_real(low=0.0, strict=True),
        "rho": bad_real(low=0.0, strict=True),
    }
    for name in sorted(table):  # every parameter, one at a time
        bad = data.draw(table[name], label=name)
        call = {"mu": mu, "alpha": 0.5, "rho": 1.0, name: bad}
        if name != "alpha":
            assert_rejects(
                partial(regime_boundaries.regime3_boundary, call["mu"], call["rho"]), name
            )
        rho_zero = name == "rho" and _is_number(bad) and float(bad) == 0.0
        if not rho_zero:  # initial_rates_from_field takes rho >= 0
            assert_rejects(partial(regime_boundaries.initial_rates_from_field, **call), name)


@FLOWS
@given(FLOW_MU, reals(0.05, 3.0), reals(0.5, 2.0), reals(0.5, 2.0), ints(2, 20), ints(0, 1))
def test_classify_valid_inputs_keep_the_contract(mu, alpha, rho, t_max, n_points, extensions):
    """``classify`` returns a regime in {1, 2, 3} or None with its certificate in words."""
    res = classification.classify(mu, alpha, rho, t_max, n_points, extensions)
    assert res.regime in (None, 1, 2, 3)
    assert res.ratio == pytest.approx(float(alpha) / float(rho))
    assert isinstance(res.certificate, str) and res.certificate
    assert all(-1 <= c < mu.size for c in res.leaders.coordinates)
    assert isinstance(res.monotone, bool)
    if res.regime == 1:
        assert res.collapse_time is None or res.collapse_time >= 0


@CONTRACT
@given(FLOW_MU, st.data())
def test_classify_invalid_inputs_are_refused_by_name(mu, data):
    """An invalid argument of ``classify`` is a ValueError naming it, before any run."""
    table = {
        "mu": regime_mu_bad(),
        "alpha": bad_real(low=0.0, strict=True),
        "rho": bad_real(low=0.0, strict=True),
        "t_max": bad_real(low=0.0, strict=True, none_ok=True),
        "n_points": bad_int(2),
        "max_extensions": bad_int(0, 60),
    }
    for name in sorted(table):  # every parameter, one at a time
        bad = data.draw(table[name], label=name)
        call = {
            "mu": mu,
            "alpha": 0.5,
            "rho": 1.0,
            "t_max": 0.5,
            "n_points": 3,
            "max_extensions": 0,
        }
        call[name] = bad
        assert_rejects(partial(classification.classify, **call), name)


@FLOWS
@given(
    FLOW_MU,
    st.lists(st.floats(0.05, 3.0), min_size=1, max_size=2).map(np.array),
    reals(0.2, 2.0),
    ints(2, 10),
)
def test_leader_phase_diagram_valid_inputs_keep_the_contract(mu, ratios, tau_max, n_tau):
    """The phase diagram has one row of leaders per ratio, each a coordinate, -1 (collapsed)
    or -2 (not reached)."""
    tau, lead = leaders.leader_phase_diagram(mu, ratios, tau_max, n_tau)
    assert tau.shape == (int(n_tau),) and lead.shape == (ratios.size, int(n_tau))
    assert np.all(np.isfinite(tau)) and tau[-1] == pytest.approx(float(tau_max))
    assert np.all((lead >= -2) & (lead < mu.size))


@CONTRACT
@given(FLOW_MU, st.data())
def test_leader_phase_diagram_invalid_inputs_are_refused_by_name(mu, data):
    """An invalid argument of ``leader_phase_diagram`` is a ValueError naming it."""
    table = {
        "mu": regime_mu_bad(),
        "ratios": st.one_of(bad_vector(2, positive=True), st.sampled_from([0.5, np.ones((2, 2))])),
        "tau_max": bad_real(low=0.0, strict=True),
        "n_tau": bad_int(2),
    }
    for name in sorted(table):  # every parameter, one at a time
        bad = data.draw(table[name], label=name)
        call = {"mu": mu, "ratios": [0.5], "tau_max": 0.5, "n_tau": 3, name: bad}
        assert_rejects(partial(leaders.leader_phase_diagram, **call), name)


# ------------------------------------------------------------------------------ LE-SAM


@CONTRACT
@given(
    st.integers(1, 4).flatmap(
        lambda k: st.tuples(
            st.lists(
                st.one_of(st.floats(-50.0, 50.0), st.sampled_from([-INF, INF])),
                min_size=k,
                max_size=k,
            ).map(np.array),
            st.one_of(reals(0.0, 2.0), vectors(k, 0.0, 2.0)),
            st.one_of(reals(0.0, 2.0), vectors(k, 0.0, 2.0)),
        )
    ),
    reals(0.0, 1e-3),
)
def test_lesam_radius_valid_inputs_keep_the_contract(args, varrho):
    """The LE-SAM radius is in ``[0, rho_max]`` and spends at most the budget ``sigma``."""
    lg, sigma, rho_max = args
    r = lesam_radius_module.lesam_radius(lg, sigma, rho_max, varrho)
    assert r.shape == lg.shape
    assert np.all(np.isfinite(r)) and np.all(r >= 0)
    assert np.all(r <= np.asarray(rho_max, dtype=float) + 0.0)
    with np.errstate(over="ignore", invalid="ignore"):  # 0 * inf: not checked
        spent = r * (np.exp(lg) + float(varrho))
    ok = np.isfinite(spent)
    assert np.all(spent[ok] <= np.broadcast_to(sigma, lg.shape)[ok] * (1 + 1e-12) + 1e-300)


@CONTRACT
@given(st.integers(2, 4), st.data())
def test_lesam_radius_invalid_inputs_are_refused_by_name(k, data):
    """An invalid ``log_grad_norm`` (NaN, not numeric), ``sigma``, ``rho_max`` (negative, not
    finite, not numeric, not broadcastable against ``log_grad_norm``) or ``varrho`` is a
    ValueError naming it."""
    table = {
        "log_grad_norm": st.sampled_from(
            [np.full(k, NAN), "abc", None, ["a"] * k, np.zeros(k) + 1j, np.zeros(k, dtype=bool)]
        )
        | st.just(np.ma.masked_array(np.zeros(k), mask=np.arange(k) == 0)),
        "sigma": st.one_of(bad_real(low=0.0, shapes=False), st.just(np.ones(k + 1))),
        "rho_max": st.one_of(bad_real(low=0.0, shapes=False), st.just(np.ones(k + 1))),
        "varrho": bad_real(low=0.0),
    }
    for name in sorted(table):  # every parameter, one at a time
        bad = data.draw(table[name], label=name)
        call = {"log_grad_norm": np.zeros(k), "sigma": 0.1, "rho_max": 1.0, "varrho": 1e-12}
        call[name] = bad
        assert_rejects(partial(lesam_radius_module.lesam_radius, **call), name)


@CONTRACT
@given(
    REGIME_MU,
    st.one_of(st.just(0.0), reals(1e-3, 0.6)),
    st.one_of(reals(0.1, 10.0), st.just(INF)),
    reals(0.0, 1e-3),
)
@example(mu=np.array([1.0, 2.0]), sigma=0.00390625, rho_max=INF, varrho=0.001)  # exp overflow
def test_stall_point_valid_inputs_keep_the_contract(mu, sigma, rho_max, varrho):
    """A stall point, when there is one, solves its defining equation
    ``2 m / (1 + e^m) + varrho sqrt(2 m / mu_1) = sigma`` beyond ``M_PEAK``, with a finite
    positive weight and a loss in (0, log 2); a zero budget has none."""
    sp = stall.stall_point(mu, sigma, rho_max, varrho)
    if float(sigma) == 0:
        assert sp is None
    if sp is None:
        return
    m = sp.margin
    assert math.isfinite(m) and m > stall.M_PEAK
    lhs = 2 * m * math.exp(-m) / (1 + math.exp(-m)) + float(varrho) * math.sqrt(2 * m / mu[0])
    assert lhs == pytest.approx(float(sigma), rel=1e-8, abs=1e-12)
    assert sp.weight > 0 and sp.beta1 == pytest.approx(m / mu[0])
    assert 0 < sp.loss < math.log(2)
    assert sp.admissible == (sp.radius < float(rho_max))


@CONTRACT
@given(REGIME_MU, st.data())
def test_stall_point_invalid_inputs_are_refused_by_name(mu, data):
    """An invalid ``mu``, ``sigma``, ``rho_max`` (``inf`` is allowed) or ``varrho`` is a
    ValueError naming it."""
    table = {
        "mu": regime_mu_bad(),
        "sigma": bad_real(low=0.0),
        "rho_max": bad_real(low=0.0, strict=True).filter(  # inf is allowed here
            lambda v: not (_is_number(v) and float(v) == INF)
        ),
        "varrho": bad_real(low=0.0),
    }
    for name in sorted(table):  # every parameter, one at a time
        bad = data.draw(table[name], label=name)
        call = {"mu": mu, "sigma": 0.3, "rho_max": 1.0, "varrho": 1e-12, name: bad}
        assert_rejects(partial(stall.stall_point, **call), name)


@FLOWS
@given(
    FLOW_MU,
    reals(0.1, 2.0),
    reals(0.0, 1.0),
    reals(0.1, 2.0),
    reals(0.5, 2.0),
    ints(3, 20),
    ints(0, 1),
    reals(1e-10, 1e-5),
)
def test_classify_lesam_valid_inputs_keep_the_contract(
    mu, alpha, sigma, rho_max, t_max, n_points, extensions, rtol
):
    """``classify_lesam`` returns a regime of LESAM_REGIMES or None, a certificate in words and
    a finite horizon and loss."""
    res = lesam_regimes.classify_lesam(
        mu,
        alpha,
        sigma,
        rho_max,
        t_max=t_max,
        n_points=n_points,
        max_extensions=extensions,
        rtol=rtol,
    )
    assert res.regime is None or res.regime in lesam_regimes.LESAM_REGIMES
    assert isinstance(res.certificate, str) and res.certificate
    assert math.isfinite(res.tau_end) and res.tau_end > 0
    assert math.isfinite(res.final_loss) and res.final_loss >= 0
    assert all(-1 <= c < mu.size for c in res.leaders.coordinates)


@CONTRACT
@given(FLOW_MU, st.data())
def test_classify_lesam_invalid_inputs_are_refused_by_name(mu, data):
    """An invalid argument of ``classify_lesam`` (a scheduled ``sigma`` too) is a ValueError
    naming it, before any run."""
    table = {
        "mu": regime_mu_bad(),
        "alpha": bad_real(low=0.0, strict=True),
        "sigma": st.one_of(bad_real(low=0.0), st.just(schedules.constant(0.1))),
        "rho_max": bad_real(low=0.0, strict=True),
        "varrho": bad_real(low=0.0),
        "t_max": bad_real(low=0.0, strict=True, none_ok=True),
        "n_points": bad_int(3),
        "max_extensions": bad_int(0, 10),
        "rtol": bad_real(low=1e-13, extra=(1e-2, 1.0)),
    }
    for name in sorted(table):  # every parameter, one at a time
        bad = data.draw(table[name], label=name)
        call = {
            "mu": mu,
            "alpha": 0.5,
            "sigma": 0.1,
            "rho_max": 1.0,
            "varrho": 1e-12,
            "t_max": 0.5,
            "n_points": 3,
            "max_extensions": 0,
            "rtol": 1e-8,
            name: bad,
        }
        assert_rejects(partial(lesam_regimes.classify_lesam, **call), name)


#: Away from collapse: LE-SAM's approach to theta = 0 is integrated step by step (slow).
LESAM_FIXED = {"alpha": 1.0, "sigma": 0.2, "rho_max": 1.0}
LESAM_RUN = {"t_max": 0.5, "n_points": 5, "max_extensions": 0}


@FLOWS
@given(
    FLOW_MU,
    st.sampled_from(sorted(LESAM_FIXED)),
    reals(0.3, 1.0),
    reals(1.5, 4.0),
    reals(0.2, 0.9),
    ints(1, 4),
)
def test_lesam_boundary_valid_inputs_keep_the_contract(mu, parameter, lo, ratio, rtol, max_iter):
    """``lesam_boundary`` returns a bracket ``0 < lower <= upper`` within the one it was given,
    with a note, and says whether it converged."""
    upper = float(lo) * float(ratio)
    res = lesam_boundaries.lesam_boundary(
        mu, parameter, lo, upper, **LESAM_FIXED, rtol=rtol, max_iter=max_iter, **LESAM_RUN
    )
    assert res.parameter == parameter
    assert float(lo) <= res.lower <= res.upper <= upper * (1 + 1e-12)
    assert res.lower <= res.value <= res.upper
    assert isinstance(res.converged, bool) and isinstance(res.note, str) and res.note
    assert res.iterations >= 2
    if res.converged:
        assert res.upper / res.lower - 1 <= float(rtol) * (1 + 1e-12)


@CONTRACT
@given(FLOW_MU, st.sampled_from(sorted(LESAM_FIXED)), st.data())
def test_lesam_boundary_invalid_inputs_are_refused_by_name(mu, parameter, data):
    """An invalid ``parameter``, ``lower``, ``upper``, ``rtol``, ``max_iter`` or a missing
    fixed parameter is a ValueError naming it."""
    table = {
        "parameter": bad_name("alpha"),
        "lower": bad_real(low=0.0, strict=True, extra=(3.0,)),  # 3.0: not below upper
        "upper": bad_real(low=0.0, strict=True, extra=(0.3,)),  # 0.3: not above lower
        "rtol": bad_real(low=1e-12, extra=(1.0, 2.0)),
        "max_iter": bad_int(1, 200),
    }
    good = {"mu": mu, "parameter": parameter, "lower": 0.5, "upper": 2.0}
    good.update(LESAM_FIXED, rtol=0.5, max_iter=2, **LESAM_RUN)
    for name in sorted(table):  # every parameter, one at a time
        call = {**good, name: data.draw(table[name], label=name)}
        assert_rejects(partial(lesam_boundaries.lesam_boundary, **call), name)
    missing = next(k for k in sorted(LESAM_FIXED) if k != parameter)
    call = {**good, missing: None}
    assert_rejects(partial(lesam_boundaries.lesam_boundary, **call), missing)


# ------------------------------------------------------------------------------ sharpness


@st.composite
def sharpness_arguments(draw):
    """``(data, theta, loss)``: a small separable data set and (L, d) parameters."""
    X, y, _ = draw(separable(max_n=3, max_d=3))
    L = draw(st.integers(1, 3))
    theta = draw(vectors(L * X.shape[1], -2.0, 2.0)).reshape(L, X.shape[1])
    return Dataset(X, y), theta, draw(st.sampled_from(MARGIN_LOSSES))


@CONTRACT
@given(sharpness_arguments(), st.booleans())
def test_sharpness_valid_inputs_keep_the_contract(args, as_list):
    """The Hessian is finite and symmetric, its trace is ``tr H >= 0`` and its top eigenvalue
    bounds every diagonal entry (a Rayleigh quotient)."""
    data, theta, loss = args
    given_theta = theta.tolist() if as_list else theta
    H = sharpness.hessian(data, given_theta, loss)
    p = theta.size
    assert H.shape == (p, p) and np.all(np.isfinite(H))
    np.testing.assert_allclose(H, H.T, rtol=1e-12, atol=1e-300)
    trace = sharpness.hessian_trace(data, given_theta, loss)
    assert trace >= 0 and trace == pytest.approx(np.trace(H), rel=1e-9, abs=1e-300)
    top = sharpness.top_hessian_eigenvalue(data, given_theta, loss)
    assert math.isfinite(top)
    assert top >= np.max(np.diag(H)) - 1e-9 * max(1.0, np.max(np.abs(H)))


@CONTRACT
@given(
    sharpness_arguments(),
    st.sampled_from(["hessian", "hessian_trace", "top_hessian_eigenvalue"]),
    st.data(),
)
def test_sharpness_invalid_inputs_are_refused_by_name(args, function, data):
    """An invalid ``data``, ``theta`` (not finite, not numeric, wrong shape) or ``loss`` is a
    ValueError naming it."""
    dataset, theta, loss = args
    L, d = theta.shape
    table = {
        "data": st.sampled_from([None, "data", np.ones((1, d)), (dataset.X, dataset.y)]),
        "theta": st.sampled_from(
            [
                np.where(np.arange(L * d).reshape(L, d) == 0, NAN, theta),
                np.where(np.arange(L * d).reshape(L, d) == 0, INF, theta),
                theta.astype(str),
                theta + 1j,
                theta > 0,
                theta[0],
                theta[None],
                np.ones((L, d + 1)),
                None,
                "theta",
            ]
        )
        | st.just(np.ma.masked_array(theta, mask=np.arange(L * d).reshape(L, d) == 0)),
        "loss": bad_name("logistic", none_ok=True),
    }
    for name in sorted(table):  # every parameter, one at a time
        bad = data.draw(table[name], label=name)
        call = {"data": dataset, "theta": theta, "loss": loss, name: bad}
        assert_rejects(partial(getattr(sharpness, function), **call), name)


# ------------------------------------------------------------------------------ amplification

LOG_ABS_BETA = st.tuples(st.integers(1, 6), st.integers(1, 4)).flatmap(
    lambda td: st.lists(
        st.one_of(st.floats(-50.0, 50.0), st.sampled_from([-INF])),
        min_size=td[0] * td[1],
        max_size=td[0] * td[1],
    ).map(lambda v: np.array(v).reshape(td))
)


@CONTRACT
@given(LOG_ABS_BETA, st.data())
def test_amplification_valid_inputs_keep_the_contract(lb, data):
    """Leaders are coordinates (or -1 for ``beta = 0``) that hold the largest ``|beta_j|``,
    shares are a distribution over the coordinates, and a leader sequence switches at
    sampled times in order."""
    T, d = lb.shape
    lead = amplification.leaders(lb)
    assert lead.shape == (T,)
    for k in range(T):
        if np.all(np.isneginf(lb[k])):
            assert lead[k] == -1
        else:
            assert 0 <= lead[k] < d and lb[k, lead[k]] == np.max(lb[k])
    sh = amplification.shares(lb)
    assert sh.shape == (T, d) and np.all(np.isfinite(sh))
    assert np.all(sh >= 0) and np.all(sh <= 1)
    alive = ~np.all(np.isneginf(lb), axis=1)
    np.testing.assert_allclose(sh[alive].sum(axis=1), 1.0)
    assert np.all(sh[~alive] == 0)
    t = np.cumsum(data.draw(vectors(T, 0.0, 1.0), label="dt"))
    seq = amplification.leader_sequence(t, lb)
    assert len(seq.coordinates) == len(seq.switch_times)
    assert all(-1 <= c < d for c in seq.coordinates)
    assert all(s in t for s in seq.switch_times)
    assert list(seq.switch_times) == sorted(seq.switch_times)


@CONTRACT
@given(LOG_ABS_BETA, st.data())
def test_amplification_invalid_inputs_are_refused_by_name(lb, data):
    """An invalid ``log_abs_beta`` (NaN for ``leaders``, not numeric, wrong rank, no column)
    or ``t`` (not finite, decreasing, wrong length) is a ValueError naming it."""
    T, d = lb.shape
    t = np.arange(float(T))
    not_numeric = st.sampled_from(
        [None, "abc", lb.astype(str), lb + 1j, lb > 0, lb[0], lb[None], np.ones((T, 0))]
    ) | st.just(np.ma.masked_array(lb, mask=np.arange(T * d).reshape(T, d) == 0))
    with_nan = np.where(np.arange(T * d).reshape(T, d) == 0, NAN, lb)  # NaN: no leader
    bad = data.draw(not_numeric | st.just(with_nan), label="log_abs_beta (leaders)")
    assert_rejects(partial(amplification.leaders, bad), "log_abs_beta")
    assert_rejects(partial(amplification.leader_sequence, t, bad), "log_abs_beta")
    bad = data.draw(not_numeric, label="log_abs_beta (shares)")  # NaN is propagated there
    assert_rejects(partial(amplification.shares, bad), "log_abs_beta")
    bad_t = data.draw(
        st.sampled_from(
            [
                np.append(t, T),
                np.where(np.arange(T) == T - 1, NAN, t),
                np.where(np.arange(T) == T - 1, INF, t),
                t.astype(str),
                None,
                t[None],
                t + 1j,
            ]
            + ([t[::-1]] if T > 1 else [])
        )
        | st.just(np.ma.masked_array(t, mask=np.arange(T) == 0)),
        label="t",
    )
    assert_rejects(partial(amplification.leader_sequence, bad_t, lb), "t")


# ------------------------------------------------------------------------------ command line


def run_cli(argv: list[str]) -> int:
    """``flows.run.main(argv)``'s exit status (also when argparse exits with SystemExit)."""
    try:
        return main(argv)
    except SystemExit as exc:  # argparse reports a bad flag by exiting
        return exc.code if isinstance(exc.code, int) else 1


CLI_ALGORITHMS = {
    "gd": [],
    "l2-sam": ["--rho", "0.5"],
    "linf-sam": ["--rho", "0.5"],
    "usam": ["--rho", "0.5"],
    "le-sam": ["--sigma", "0.2", "--rho-max", "1"],
}


@CONTRACT
@given(
    st.sampled_from(sorted(CLI_ALGORITHMS)),
    st.integers(1, 3),
    st.floats(0.2, 1.5),
    st.floats(0.1, 1.0),
    st.integers(2, 9),
)
def test_cli_valid_flags_run(capsys, algorithm, depth, alpha, t_max, n_points):
    """Valid flags run the flow, print a summary and exit 0 (or 1 for a failed run)."""
    argv = [
        "--mu=1,2",
        f"--algorithm={algorithm}",
        f"--depth={depth}",
        f"--alpha={alpha!r}",
        f"--t-max={t_max!r}",
        f"--n-points={n_points}",
        *CLI_ALGORITHMS[algorithm],
    ]
    capsys.readouterr()
    code = quiet(lambda: run_cli(argv))
    out, err = capsys.readouterr()
    assert code in (0, 1)
    assert "status" in out and "Traceback" not in err


def cli_bad_values() -> dict[str, list[str]]:
    """Bad values of every numeric flag of ``python -m flows.run`` (the hyper-parameters' flags
    from the algorithm table; a switch takes no value at all)."""
    table = {
        "--mu": ["abc", "1,nan", "1,inf", "0,0", "", "1,,2", "1+2j", "True"],
        "--depth": ["0", "-1", "2.5", "abc", "", "nan", "True", "100001"],
        "--alpha": ["0", "-1", "nan", "inf", "abc", "", "1,2,3", "1+2j"],
        "--t-max": ["0", "-1", "nan", "inf", "abc", "", "1e999", "1+2j"],
        "--n-points": ["0", "1", "-5", "2.5", "abc", "", "nan", "100001"],
    }
    for spec in known_hyperparameters().values():
        flag = "--" + spec.name.replace("_", "-")
        if getattr(spec, "flag", False):
            table[flag] = ["yes", "1"]
            continue
        bad = ["nan", "inf", "-inf", "abc", "", "1e999", "1+2j"]
        bad += ["-1"] if spec.minimum is not None else []
        bad += ["cosine:1", "cosine:-1,2"] if spec.schedulable else ["constant:1"]
        table[flag] = bad
    return table


CLI_BAD = cli_bad_values()


@CONTRACT
@given(st.fixed_dictionaries({flag: st.sampled_from(values) for flag, values in CLI_BAD.items()}))
def test_cli_bad_numeric_flags_exit_2_with_one_line(capsys, bad_values):
    """Each bad numeric flag exits with status 2 and one line on stderr naming the flag (as
    ``--t-max`` or ``t_max``), without a traceback."""
    for flag, value in sorted(bad_values.items()):
        argv = ["--mu=1,2", "--t-max=0.5", "--n-points=3", f"{flag}={value}"]
        capsys.readouterr()
        code = quiet(partial(run_cli, argv))
        out, err = capsys.readouterr()
        assert code == 2, f"exit status {code} for {flag}={value!r}; stdout {out!r}"
        assert "Traceback" not in err
        lines = err.strip().splitlines()
        assert len(lines) == 1, f"stderr is not one line: {err!r}"
        plain = flag.lstrip("-")
        assert _names(lines[0], (flag, plain, plain.replace("-", "_"))), lines[0]
