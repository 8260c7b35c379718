"""The environment both sides of a side-by-side benchmark run under.

Threads: torch.set_num_threads does not bound Debian's OpenBLAS, which
PyTorch and LibTorch call for their matrix products, so OPENBLAS_NUM_THREADS
and OMP_NUM_THREADS are set to the thread count for both sides.

OpenBLAS's kernels: Debian's OpenBLAS 0.3.21 picks its kernels by CPU model
when it loads, and on a model newer than it knows (Intel's model 207, for
one) it falls back to its SSE3 ("Prescott") kernels, about a fifth of the
AVX-512 kernels' speed on the transformers' products. A comparison on such a
machine would measure that mistake rather than PyTorch, so where OpenBLAS
fell back to a core without AVX2 on a CPU that has it, OPENBLAS_CORETYPE
names the core that matches the flags, for both sides alike. A choice of
OpenBLAS's own among the AVX2 and AVX-512 cores (Haswell's kernels on AMD's
Zen 4, say) is left alone.
"""
import ctypes
import functools
import os
import sys

# OpenBLAS's cores that use neither AVX2 nor AVX-512.
_PRE_AVX2 = {"prescott", "core2", "penryn", "dunnington", "nehalem",
             "atom", "sandybridge", "barcelona", "bulldozer", "piledriver",
             "steamroller", "excavator", "unknown"}


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def openblas_core():
    """The core OpenBLAS picks here by itself, or None without OpenBLAS."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
    except OSError:
        return None
    lib.openblas_get_corename.restype = ctypes.c_char_p
    return lib.openblas_get_corename().decode()


def core_override(flags=None, core=None):
    """The OPENBLAS_CORETYPE to set, or None where OpenBLAS chose well."""
    flags = _cpu_flags() if flags is None else flags
    core = openblas_core() if core is None else core
    if core is None:
        return None
    want_avx512 = {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags
    want_avx2 = {"avx2", "fma"} <= flags
    if core.lower() not in _PRE_AVX2:
        return None
    if want_avx512:
        return "SkylakeX"
    return "Haswell" if want_avx2 else None


@functools.lru_cache(maxsize=None)
def _override():
    return core_override()


def coretype():
    """The OPENBLAS_CORETYPE both sides run under: the environment's own,
    else the override, else None (OpenBLAS's own choice)."""
    return os.environ.get("OPENBLAS_CORETYPE") or _override()


def apply_core():
    """Sets OPENBLAS_CORETYPE in this process's environment where needed:
    for its children, and for OpenBLAS itself if it has not loaded yet."""
    core = coretype()
    if core is not None:
        os.environ["OPENBLAS_CORETYPE"] = core


def bench_env(threads):
    """os.environ plus the thread bounds and, where needed, the core."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads),
               OMP_NUM_THREADS=str(threads))
    core = coretype()
    if core is not None:
        env["OPENBLAS_CORETYPE"] = core
    return env


def describe():
    """One line for a benchmark's header."""
    core = openblas_core()
    if core is None:
        return "OpenBLAS: not found"
    if "OPENBLAS_CORETYPE" in os.environ:
        return f"OpenBLAS core: {os.environ['OPENBLAS_CORETYPE']} (as set)"
    override = _override()
    if override is None:
        return f"OpenBLAS core: {core}"
    return (f"OpenBLAS core: {override} for both sides "
            f"(on its own it picked {core}, below this CPU's flags)")


if __name__ == "__main__":
    # For shell scripts: prints the core to export, or nothing.
    #   core=$(/usr/bin/python3 bench/blas_env.py) &&
    #     [[ -z "$core" ]] || export OPENBLAS_CORETYPE=$core
    if len(sys.argv) != 1:
        sys.exit("usage: blas_env.py (prints the OPENBLAS_CORETYPE to use)")
    print(coretype() or "")
