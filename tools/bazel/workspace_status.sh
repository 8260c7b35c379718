#!/usr/bin/env bash
# Bazel's workspace status command (.bazelrc): the git commit the tree was
# built from, for `cohort --version` in stamped builds (bazel build --stamp).
# Says "unknown" outside a git checkout or without git.
commit=$(git rev-parse --short=12 HEAD 2>/dev/null) || commit=unknown
if [[ "$commit" != unknown ]] && ! git diff --quiet HEAD 2>/dev/null; then
  commit="$commit+changes"
fi
echo "STABLE_COHORT_GIT_COMMIT ${commit:-unknown}"
