"""C++ code generation with the system protoc and grpc_cpp_plugin.

Bazel 4's native proto rules would fetch protobuf's sources; Debian already
ships the compiler and the runtime, so a genrule calls them directly.
"""

load("//tools/bazel:deps.bzl", "GRPC_LINKOPTS", "PROTOBUF_LINKOPTS")

def cohort_cc_proto(name, src, deps = [], grpc = False, visibility = None):
    """Generates `<name>` (a cc_library) from one .proto file.

    Args:
      name: the cc_library's name.
      src: the .proto file, in this package.
      deps: other cohort_cc_proto libraries it imports.
      grpc: also generate gRPC service stubs.
      visibility: as for cc_library.
    """
    base = src[:-len(".proto")]
    pkg = native.package_name()
    outs = [base + ".pb.h", base + ".pb.cc"]
    cmd = "protoc -I. --cpp_out=$(GENDIR) $(location %s)" % src
    tools = []
    if grpc:
        outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
        cmd = ("protoc -I. -I/usr/include --cpp_out=$(GENDIR) " +
               "--grpc_out=$(GENDIR) " +
               "--plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) " +
               "$(location %s)") % src
    native.genrule(
        name = name + "_gen",
        srcs = [src] + [d + "_srcs" for d in deps],
        outs = outs,
        cmd = cmd,
    )
    native.filegroup(
        name = name + "_srcs",
        srcs = [src],
        visibility = visibility,
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps,
        linkopts = GRPC_LINKOPTS if grpc else PROTOBUF_LINKOPTS,
        visibility = visibility,
    )
