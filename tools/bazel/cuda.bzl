"""CUDA code in Bazel 4 without rules_cuda: nvcc through genrules.

cuda_library compiles each .cu file with nvcc (sm_80 and sm_90 machine code
plus compute_90 PTX for newer GPUs) into an object file, and wraps the
objects and any ordinary C++ sources in a cc_library. Under --config=nocuda
(tools/bazel:cuda_off) the library holds only `nocuda_srcs`, so callers can
link a stand-in that reports "built without CUDA".

cuda_test is a cc_test tagged "gpu" that links CUDA where it is built; its
tests must skip with a reason where no device is present.
"""

CUDA_GENCODE = (
    "-gencode arch=compute_80,code=sm_80 " +
    "-gencode arch=compute_90,code=sm_90 " +
    "-gencode arch=compute_90,code=compute_90"
)

def _object_name(name, src):
    return name + "_" + src.replace("/", "_").replace(".cu", "") + "_cu.o"

def cuda_library(
        name,
        cu_srcs = [],
        cu_hdrs = [],
        srcs = [],
        hdrs = [],
        nocuda_srcs = [],
        deps = [],
        cuda_deps = ["@cuda"],
        **kwargs):
    """A cc_library with nvcc-compiled .cu sources.

    Args:
      name: the library.
      cu_srcs: .cu files, one nvcc invocation each.
      cu_hdrs: headers only the .cu files include (nvcc sees these and hdrs).
        CUDA-only .cuh headers go to nvcc alone: cc_library rejects them.
      srcs: C++ sources built by the host compiler, with CUDA.
      hdrs: public headers.
      nocuda_srcs: the sources used instead under --config=nocuda.
      deps: dependencies in both configurations.
      cuda_deps: dependencies only with CUDA (default: the runtime).
      **kwargs: passed to cc_library.
    """
    objects = []
    for src in cu_srcs:
        obj = _object_name(name, src)
        # Under --config=nocuda the rule only writes a placeholder (nothing
        # links it), so that `bazel build //...` needs no toolkit at all.
        native.genrule(
            name = obj.replace(".", "_"),
            srcs = [src] + hdrs + cu_hdrs,
            outs = [obj],
            cmd = select({
                "//tools/bazel:cuda_off": "echo 'built without CUDA' > $@",
                "//conditions:default": (
                    "$(location @cuda//:nvcc) -c -O3 -std=c++17 " +
                    "-Xcompiler -fPIC --expt-relaxed-constexpr -I. " +
                    CUDA_GENCODE + " -o $@ $(location " + src + ")"
                ),
            }),
            tools = select({
                "//tools/bazel:cuda_off": [],
                "//conditions:default": ["@cuda//:nvcc"],
            }),
        )
        objects.append(":" + obj)
    native.cc_library(
        name = name,
        srcs = select({
            "//tools/bazel:cuda_off": nocuda_srcs,
            "//conditions:default": srcs + objects + [
                h
                for h in cu_hdrs
                if not h.endswith(".cuh")
            ],
        }),
        hdrs = hdrs,
        deps = deps + select({
            "//tools/bazel:cuda_off": [],
            "//conditions:default": cuda_deps,
        }),
        **kwargs
    )

def cuda_test(name, srcs, deps = [], nocuda_srcs = None, tags = [], **kwargs):
    """A cc_test tagged "gpu". Under --config=nocuda it builds `nocuda_srcs`
    (default: nothing but gtest_main, so the target passes with no tests)."""
    native.cc_test(
        name = name,
        srcs = select({
            "//tools/bazel:cuda_off": nocuda_srcs or [],
            "//conditions:default": srcs,
        }),
        deps = deps + select({
            "//tools/bazel:cuda_off": [],
            "//conditions:default": ["@cuda"],
        }),
        tags = tags + ["gpu"],
        **kwargs
    )
