"""libFuzzer targets that only build under --config=fuzz (clang, ASan, UBSan).

cohort_fuzz_test(name = "x", ...) makes the fuzzer binary `x_fuzzer` and the
sh_test `x_fuzz_test`, which replays fuzz/corpus/x/ (seeds and every input
that once found a bug) and then fuzzes for a fixed number of runs from a
fixed seed, so that its verdict is the same on every machine. Both are
tagged "manual" (gcc cannot link -fsanitize=fuzzer, so `bazel build //...`
and `bazel test //...` must skip them) and "fuzz"; the test_suite in
fuzz/BUILD names them for `bazel test --config=fuzz //fuzz:fuzz_tests`.
"""

FUZZ_TAGS = ["manual", "fuzz"]

def cohort_fuzz_test(
        name,
        srcs,
        deps,
        runs,
        seed_kind = "-",
        seed_files = [],
        dictionary = None):
    """A libFuzzer binary and the short test that runs it.

    Args:
      name: the target's short name (spec, mnist, ...).
      srcs: sources defining LLVMFuzzerTestOneInput.
      deps: libraries under test.
      runs: libFuzzer executions after the replay (-runs); chosen so that
        the target fuzzes for about 3 s of CPU time, since inputs cost from
        0.05 ms (csv) to 2 ms (mnist) each.
      seed_kind: the TARGET argument of :make_seeds, or "-" for none.
      seed_files: seeds kept elsewhere in the tree (fuzz/corpus/<name>/ is
        always part of the corpus).
      dictionary: a libFuzzer -dict file, or None.
    """
    corpus = native.glob(
        ["corpus/%s/*" % name],
        exclude = ["corpus/%s/.gitkeep" % name],
    )
    if not corpus and not native.glob(["corpus/%s/.gitkeep" % name]):
        fail("fuzz/corpus/%s/ is missing: every fuzz target keeps the " % name +
             "inputs that once found a bug there (an empty one holds .gitkeep)")
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
        # Room for a machine several times slower than an idle one: the
        # run is counted in executions, not seconds.
        size = "medium",
        srcs = ["run_fuzzer.sh"],
        args = [
            "$(rootpath :%s)" % fuzzer,
            "$(rootpath :make_seeds)",
            seed_kind,
            "$(rootpath %s)" % dictionary if dictionary else "-",
            str(runs),
        ] + ["$(rootpaths %s)" % f for f in corpus + seed_files],
        data = [":" + fuzzer, ":make_seeds"] + corpus + seed_files +
               ([dictionary] if dictionary else []),
        tags = FUZZ_TAGS,
    )
