#!/usr/bin/env bash
# The container images and Kubernetes manifests of deploy/, without a
# container engine or a cluster:
#  1. image: every library `ldd cohort` resolves maps to a package that the
#     runtime stage of deploy/docker/Dockerfile (and Dockerfile.cuda)
#     installs or debian:12-slim has, and nothing else is installed;
#  2. render: `kubectl kustomize` renders overlays cpu, gpu and cpu-ps;
#  3. schemas: every object validates against the strict Kubernetes v1.32
#     JSON schemas in $COHORT_DATA_DIR/k8s-schemas (skipped when absent);
#  4. consistency: flags against `cohort COMMAND --help`, ports, probes,
#     Services, selectors, NetworkPolicy, addresses, volumes, the job spec;
#  5. mutants: each of those checks catches a manifest broken on purpose;
#  6. smoke: deploy/k8s/gen-secret.sh makes the Secret (its certificate
#     must name every address the manifests dial), then the cpu and cpu-ps
#     overlays' coordinator, shards and workers run locally with their
#     manifest arguments and that Secret, and the job succeeds;
#  7. pytorchjob: deploy/k8s/pytorchjob/pytorchjob.yaml, a Kubeflow
#     PyTorchJob (tests/pytorchjob_check.py; its pod templates validated
#     as Pods, since the schemas hold no custom resource).
# Usage: deploy_test.sh COHORT_BINARY (from the repository root or Bazel's
# runfiles). Needs kubectl, python3-yaml and python3-jsonschema (tools/setup).
set -u
cohort="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
export HOME="$tmp"  # kubectl wants a home for its cache
check=("/usr/bin/python3" "$root/tests/deploy_check.py")
failed=()

step() {  # step NAME COMMAND...: runs one part, remembers a failure
  local name="$1"
  shift
  echo "== $name"
  "$@" || failed+=("$name")
}

step image "${check[@]}" image "$cohort" \
  "$root/deploy/docker/Dockerfile" "$root/deploy/docker/Dockerfile.cuda"

# kustomize refuses files that resolve outside the kustomization root, which
# Bazel's runfiles (symlinks) do: render a real copy.
rm -rf "$tmp/k8s"
cp -rL "$root/deploy/k8s" "$tmp/k8s"
rendered=()
echo "== render"
if ! command -v kubectl >/dev/null; then
  echo "FAIL: no kubectl (tools/setup installs Debian's kubernetes-client)"
  failed+=(render)
else
  for overlay in cpu gpu cpu-ps; do
    out="$tmp/$overlay.yaml"
    err="$tmp/kustomize.err"
    if kubectl kustomize "$tmp/k8s/overlays/$overlay" >"$out" 2>"$err"; then
      echo "rendered overlays/$overlay: $(grep -c '^kind:' "$out") objects"
      rendered+=("$overlay=$out")
    else
      # Newer kustomize warns about bases and patchesStrategicMerge.
      echo "FAIL: kubectl kustomize overlays/$overlay: $(grep -v '^# Warning' "$err")"
      failed+=(render)
    fi
  done
fi

data="${COHORT_DATA_DIR:-}"
schemas="$data/k8s-schemas/v1.32.2-standalone-strict"
if [[ -z "$data" || ! -d "$schemas" ]]; then
  echo "SKIPPED: schema validation: no k8s-schemas/v1.32.2-standalone-strict" \
       "under COHORT_DATA_DIR='$data'"
  schemas=-
fi
if [[ ${#rendered[@]} -gt 0 ]]; then
  step k8s "${check[@]}" k8s "$cohort" "$schemas" "${rendered[@]}"
  step mutants "${check[@]}" mutants "$cohort" "$schemas" "${rendered[@]}"
  for pair in "${rendered[@]}"; do
    case "$pair" in
      cpu=* | cpu-ps=*)
        step "smoke ${pair%%=*}" "${check[@]}" smoke "$cohort" \
          "$root/deploy/k8s/gen-secret.sh" "$root/tests/grpc_probe.py" "$pair" ;;
    esac
  done
fi

# 7. The Kubeflow PyTorchJob example (a custom resource): its pod templates
#    against the core Pod schema, its cohort launch arguments, its spec.
step pytorchjob /usr/bin/python3 "$root/tests/pytorchjob_check.py" "$cohort" \
  "$schemas" "$root/deploy/k8s/pytorchjob/pytorchjob.yaml"

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "deploy_test: failed: ${failed[*]}"
  exit 1
fi
echo "deploy_test: all passed"
