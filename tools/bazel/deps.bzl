"""Link flags for the system libraries cohort uses (Debian 12 packages).

The Abseil archives are wrapped in a link group so that their order does not
matter; the list is what `pkg-config --libs` gives for the components used.
"""

ABSL_LINKOPTS = [
    "-Wl,--start-group",
    "-labsl_statusor",
    "-labsl_status",
    "-labsl_strerror",
    "-labsl_flags_parse",
    "-labsl_flags_usage",
    "-labsl_flags_usage_internal",
    "-labsl_flags_internal",
    "-labsl_flags_marshalling",
    "-labsl_flags_reflection",
    "-labsl_flags_private_handle_accessor",
    "-labsl_flags_commandlineflag",
    "-labsl_flags_commandlineflag_internal",
    "-labsl_flags_config",
    "-labsl_flags_program_name",
    "-labsl_cord",
    "-labsl_cordz_info",
    "-labsl_cord_internal",
    "-labsl_cordz_functions",
    "-labsl_cordz_handle",
    "-labsl_hash",
    "-labsl_city",
    "-labsl_bad_variant_access",
    "-labsl_low_level_hash",
    "-labsl_raw_hash_set",
    "-labsl_hashtablez_sampler",
    "-labsl_exponential_biased",
    "-labsl_synchronization",
    "-labsl_graphcycles_internal",
    "-labsl_stacktrace",
    "-labsl_symbolize",
    "-labsl_debugging_internal",
    "-labsl_demangle_internal",
    "-labsl_malloc_internal",
    "-labsl_str_format_internal",
    "-labsl_time",
    "-labsl_civil_time",
    "-labsl_time_zone",
    "-labsl_random_distributions",
    "-labsl_throw_delegate",
    "-labsl_raw_logging_internal",
    "-labsl_random_seed_sequences",
    "-labsl_random_internal_pool_urbg",
    "-labsl_random_internal_randen",
    "-labsl_random_internal_randen_hwaes",
    "-labsl_random_internal_randen_hwaes_impl",
    "-labsl_random_internal_randen_slow",
    "-labsl_random_internal_platform",
    "-labsl_random_internal_seed_material",
    "-labsl_bad_optional_access",
    "-labsl_strings",
    "-labsl_strings_internal",
    "-labsl_base",
    "-labsl_spinlock_wait",
    "-labsl_int128",
    "-labsl_random_seed_gen_exception",
    "-labsl_log_severity",
    "-Wl,--end-group",
    "-lpthread",
]

BLAS_LINKOPTS = ["-lopenblas"]

DNNL_LINKOPTS = ["-ldnnl"]

GRPC_LINKOPTS = ["-lgrpc++", "-lgrpc", "-lgpr", "-lprotobuf"]

PROTOBUF_LINKOPTS = ["-lprotobuf"]

GTEST_LINKOPTS = ["-lgmock", "-lgtest", "-lpthread"]

ZLIB_LINKOPTS = ["-lz"]

# Debian's libonnx-dev: the ONNX protobuf messages (onnx/onnx-ml.pb.h),
# compiled against the same libprotobuf as cohort's own.
ONNX_LINKOPTS = ["-lonnx_proto", "-lprotobuf"]

JPEG_LINKOPTS = ["-ljpeg"]

PNG_LINKOPTS = ["-lpng16"]
