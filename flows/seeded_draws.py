"""numpy's minibatch draws of :mod:`flows.minibatch`, compiled: the same numbers, many at a time.

The batch of step ``k`` of a run with root seed ``root`` is
``numpy.random.default_rng([root, k]).choice(n, B, replace=False)``. A loop of runs draws one
generator per run and step (~10 us to build, ~8 us to draw in numpy, more than a small step
takes). :func:`iid_batches` computes the same indices in one compiled call for every run of a
step, by numpy's algorithms:

* ``SeedSequence([root, k])``: the entropy as 32-bit words (each integer little-endian, 0 as
  one word), mixed into a pool of 4 words (``hashmix`` and ``mix``), and ``generate_state(4,
  uint64)`` from the pool;
* ``PCG64``: 128-bit state and increment from those words (``pcg_setseq_128_srandom_r``), each
  64-bit output ``rotr(hi ^ lo, state >> 122)`` of the stepped state (XSL-RR), 32-bit outputs
  the two halves of one 64-bit output (low half first);
* ``Generator.choice(n, B, replace=False)`` for ``n <= 10000``: Floyd's algorithm with Lemire's
  bounded integers (a 32-bit output times ``j + 1``, rejected below ``2^32 mod (j + 1)``) and a
  linear-probing set, then a Fisher-Yates shuffle by the same bounded integers.

numpy does not promise these streams across versions: :func:`matches_numpy` compares a few
draws with numpy's own, and :mod:`flows.many` uses the compiled draws only where they match
(``tests/test_many.py`` compares many). Importing this module imports numba.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: The populations of :func:`iid_batches` (numpy draws larger ones by a tail shuffle instead).
MAX_POPULATION = 10_000

_U32 = np.uint64(0xFFFFFFFF)
_INIT_A, _MULT_A = np.uint64(0x43B0D7E5), np.uint64(0x931E8875)
_INIT_B, _MULT_B = np.uint64(0x8B51F9DD), np.uint64(0x58F38DED)
_MIX_L, _MIX_R = np.uint64(0xCA01F9DD), np.uint64(0x4973F715)
_SHIFT16, _SHIFT32, _SHIFT58, _ONE = np.uint64(16), np.uint64(32), np.uint64(58), np.uint64(1)
_MULT_HI, _MULT_LO = np.uint64(2549297995355413924), np.uint64(4865540595714422341)
_NONE = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True, inline="always")
def hashmix(value, hash_const):
    """SeedSequence's ``hashmix`` of a 32-bit word; advances ``hash_const[0]``."""
    value = (value ^ hash_const[0]) & _U32
    hash_const[0] = (hash_const[0] * _MULT_A) & _U32
    value = (value * hash_const[0]) & _U32
    return value ^ (value >> _SHIFT16)


@njit(cache=True, inline="always")
def mix(x, y):
    """SeedSequence's ``mix`` of two 32-bit words."""
    result = ((_MIX_L * x) - (_MIX_R * y)) & _U32
    return result ^ (result >> _SHIFT16)


@njit(cache=True, inline="always")
def mulhi(a, b):
    """The high 64 bits of the 128-bit product ``a b``."""
    a_lo, a_hi = a & _U32, a >> _SHIFT32
    b_lo, b_hi = b & _U32, b >> _SHIFT32
    low = a_lo * b_lo
    middle1 = a_hi * b_lo + (low >> _SHIFT32)
    middle2 = a_lo * b_hi + (middle1 & _U32)
    return a_hi * b_hi + (middle1 >> _SHIFT32) + (middle2 >> _SHIFT32)


@njit(cache=True, inline="always")
def step(state):
    """``state = state * MULT + inc`` modulo 2^128 (``state`` = hi, lo, inc_hi, inc_lo)."""
    hi, lo, inc_hi, inc_lo = state[0], state[1], state[2], state[3]
    new_lo = lo * _MULT_LO
    new_hi = mulhi(lo, _MULT_LO) + hi * _MULT_LO + lo * _MULT_HI
    total_lo = new_lo + inc_lo
    carry = _ONE if total_lo < new_lo else np.uint64(0)
    state[0] = new_hi + inc_hi + carry
    state[1] = total_lo


@njit(cache=True, inline="always")
def next64(state):
    """PCG64's next 64-bit output: the XSL-RR output of the stepped state."""
    step(state)
    hi, lo = state[0], state[1]
    value = hi ^ lo
    rot = hi >> _SHIFT58
    return (value >> rot) | (value << ((np.uint64(64) - rot) & np.uint64(63)))


@njit(cache=True, inline="always")
def next32(state):
    """A 32-bit output (``state[4]`` flags a kept high half, ``state[5]`` holds it)."""
    if state[4] != 0:
        state[4] = np.uint64(0)
        return state[5]
    value = next64(state)
    state[4] = _ONE
    state[5] = value >> _SHIFT32
    return value & _U32


@njit(cache=True)
def seed_state(root, k, state):
    """``state`` (6 words) of ``PCG64(SeedSequence([root, k]))``."""
    entropy = np.zeros(4, dtype=np.uint64)
    size = 0
    for value in (root, k):
        if value == 0:
            entropy[size] = np.uint64(0)
            size += 1
        while value > 0:
            entropy[size] = np.uint64(value) & _U32
            size += 1
            value = value >> 32
    pool = np.zeros(4, dtype=np.uint64)
    hash_const = np.array([_INIT_A])
    for i in range(4):
        pool[i] = hashmix(entropy[i] if i < size else np.uint64(0), hash_const)
    for i_src in range(4):
        for i_dst in range(4):
            if i_src != i_dst:
                pool[i_dst] = mix(pool[i_dst], hashmix(pool[i_src], hash_const))
    words = np.zeros(8, dtype=np.uint64)
    h = _INIT_B
    for i in range(8):
        value = pool[i % 4] ^ h
        h = (h * _MULT_B) & _U32
        value = (value * h) & _U32
        words[i] = value ^ (value >> _SHIFT16)
    seeds = np.zeros(4, dtype=np.uint64)
    for i in range(4):
        seeds[i] = words[2 * i] | (words[2 * i + 1] << _SHIFT32)
    init_hi, init_lo = seeds[0], seeds[1]
    seq_hi, seq_lo = seeds[2], seeds[3]
    state[0], state[1] = np.uint64(0), np.uint64(0)
    state[2] = (seq_hi << _ONE) | (seq_lo >> np.uint64(63))
    state[3] = (seq_lo << _ONE) | _ONE
    step(state)
    lo = state[1] + init_lo
    carry = _ONE if lo < state[1] else np.uint64(0)
    state[0] = state[0] + init_hi + carry
    state[1] = lo
    step(state)
    state[4], state[5] = np.uint64(0), np.uint64(0)


@njit(cache=True, inline="always")
def bounded(state, rng):
    """An integer in ``[0, rng]`` (Lemire's method on 32-bit outputs, ``rng < 2^32 - 1``)."""
    if rng == 0:
        return np.uint64(0)
    excl = rng + _ONE
    m = next32(state) * excl
    leftover = m & _U32
    if leftover < excl:
        threshold = (_U32 - rng) % excl
        while leftover < threshold:
            m = next32(state) * excl
            leftover = m & _U32
    return m >> _SHIFT32


@njit(cache=True)
def _iid_batches(roots, k, n, size, out):
    """``out[r] = default_rng([roots[r], k]).choice(n, size, replace=False)``."""
    state = np.zeros(6, dtype=np.uint64)
    set_size = int(1.2 * size)
    mask = set_size
    for shift in (1, 2, 4, 8, 16, 32):
        mask |= mask >> shift
    table = np.empty(mask + 1, dtype=np.uint64)
    umask = np.uint64(mask)
    for r in range(roots.size):
        seed_state(roots[r], k, state)
        table[:] = _NONE
        for j in range(n - size, n):
            uj = np.uint64(j)
            val = bounded(state, uj)
            loc = val & umask
            while table[loc] != _NONE and table[loc] != val:
                loc = (loc + _ONE) & umask
            if table[loc] == _NONE:
                table[loc] = val
                out[r, j - n + size] = val
            else:
                loc = uj & umask
                while table[loc] != _NONE:
                    loc = (loc + _ONE) & umask
                table[loc] = uj
                out[r, j - n + size] = j
        for i in range(size - 1, 0, -1):
            j = bounded(state, np.uint64(i))
            out[r, i], out[r, j] = out[r, j], out[r, i]


def iid_batches(roots: np.ndarray, k: int, n: int, size: int) -> np.ndarray:
    """The batches ``default_rng([roots[r], k]).choice(n, size, replace=False)`` of step ``k``
    of every run (runs, size), int64."""
    out = np.empty((roots.size, size), dtype=np.int64)
    _iid_batches(np.asarray(roots, dtype=np.int64), int(k), int(n), int(size), out)
    return out


def matches_numpy(roots: np.ndarray, n: int, size: int, steps: tuple[int, ...] = (0, 1)) -> bool:
    """Whether :func:`iid_batches` draws numpy's batches for ``roots`` at ``steps`` (``n`` at
    most :data:`MAX_POPULATION`)."""
    for k in steps:
        ours = iid_batches(roots, k, n, size)
        for r, root in enumerate(roots):
            theirs = np.random.default_rng([int(root), k]).choice(n, size, replace=False)
            if not np.array_equal(ours[r], theirs):
                return False
    return True
