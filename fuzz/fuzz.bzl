"""libFuzzer targets that only build under --config=fuzz (clang, ASan, UBSan).

cohort_fuzz_test(name = "x", ...) makes the fuzzer binary `x_fuzzer` and the
sh_test `x_fuzz_test`, which runs it for 15 s over its seeds. Both are
tagged "manual" (gcc cannot link -fsanitize=fuzzer, so `bazel build //...`
and `bazel test //...` must skip them) and "fuzz"; the test_suite in
fuzz/BUILD names them for `bazel test --config=fuzz //fuzz:fuzz_tests`.
"""

FUZZ_TAGS = ["manual", "fuzz"]

def cohort_fuzz_test(
        name,
        srcs,
        deps,
        seed_kind = "-",
        seed_files = [],
        dictionary = None):
    """A libFuzzer binary and the short test that runs it.

    Args:
      name: the target's short name (spec, mnist, ...).
      srcs: sources defining LLVMFuzzerTestOneInput.
      deps: libraries under test.
      seed_kind: the TARGET argument of :make_seeds, or "-" for none.
      seed_files: text seeds copied into the corpus (fuzz/corpus/<name>/).
      dictionary: a libFuzzer -dict file, or None.
    """
    fuzzer = name + "_fuzzer"
    native.cc_binary(
        name = fuzzer,
        srcs = srcs,
        deps = deps,
        linkopts = ["-fsanitize=fuzzer"],
        tags = FUZZ_TAGS,
    )
    native.sh_test(
        name = name + "_fuzz_test",
        size = "small",
        srcs = ["run_fuzzer.sh"],
        args = [
            "$(rootpath :%s)" % fuzzer,
            "$(rootpath :make_seeds)",
            seed_kind,
            "$(rootpath %s)" % dictionary if dictionary else "-",
        ] + ["$(rootpaths %s)" % f for f in seed_files],
        data = [":" + fuzzer, ":make_seeds"] + seed_files +
               ([dictionary] if dictionary else []),
        tags = FUZZ_TAGS,
    )
