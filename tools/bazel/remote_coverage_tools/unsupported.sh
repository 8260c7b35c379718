#!/bin/sh
echo "coverage through Bazel is not supported in cohort's offline build" >&2
exit 1
