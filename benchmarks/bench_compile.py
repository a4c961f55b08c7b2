"""What the first compiled call costs: numba's compile of the kernels, cold and cached.

    python benchmarks/bench_compile.py            # the default call
    python benchmarks/bench_compile.py --case linf # an l_inf-SAM run that slides

Each measurement runs in a fresh process with an empty ``NUMBA_CACHE_DIR`` (cold: every kernel
compiled) and then again with that cache (warm: every kernel loaded), and lists the compile
time of each kernel without the kernels it calls (from numba's ``numba:compile`` events).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CASES = {
    "default": 'simulate(single_example([1, 2, 3, 4, 5]), "l2-sam", 2, 0.4, rho=1.0, t_max=5.0)',
    "linf": 'simulate(gaussian_blobs(), "linf-sam", 2, [1.5, 0.8], rho=1.0, t_max=8.0)',
}

PROBE = """
import json, sys, time
start = time.perf_counter()
from numba.core import event
from flows import simulate, single_example
from flows.datasets import gaussian_blobs
rec = event.RecordingListener()
event.register("numba:compile", rec)
imported = time.perf_counter()
{call}
done = time.perf_counter()
stack, own = [], {{}}
for ts, ev in rec.buffer:
    f = ev.data["dispatcher"].py_func
    key = f.__module__.split(".")[-1] + "." + f.__qualname__
    if ev.is_start:
        stack.append([key, ts, 0.0])
    else:
        k, t0, inner = stack.pop()
        own[k] = own.get(k, 0.0) + (ts - t0) - inner
        if stack:
            stack[-1][2] += ts - t0
print(json.dumps({{"import": imported - start, "call": done - imported, "own": own}}))
"""


def measure(call: str, cache: str) -> dict:
    """One fresh process making ``call`` with numba's cache in ``cache``."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(call=call)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", choices=sorted(CASES), default="default")
    p.add_argument("--top", type=int, default=12, help="kernels listed")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        cold = measure(CASES[args.case], cache)
        warm = measure(CASES[args.case], cache)
    own = cold["own"]
    print(f"## First compiled call: {args.case} ({CASES[args.case]})\n")
    print("| | import [s] | first call [s] | kernels compiled | compile [s] |")
    print("|---|---|---|---|---|")
    for name, m in (("cold cache", cold), ("warm cache", warm)):
        n, total = len(m["own"]), sum(m["own"].values())
        print(f"| {name} | {m['import']:.2f} | {m['call']:.2f} | {n} | {total:.2f} |")
    print(f"\nSlowest kernels to compile (own time, without their callees; top {args.top}):\n")
    print("| kernel | compile [s] |")
    print("|---|---|")
    for key, seconds in sorted(own.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"| `{key}` | {seconds:.2f} |")


if __name__ == "__main__":
    main()
