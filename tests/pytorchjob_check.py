#!/usr/bin/env python3
"""Checks deploy/k8s/pytorchjob/pytorchjob.yaml, a Kubeflow PyTorchJob.

  pytorchjob_check.py COHORT SCHEMA_DIR MANIFEST

A PyTorchJob is a custom resource, for which the Kubernetes JSON schemas
hold nothing; its pod templates are plain PodTemplateSpecs, so each is
validated as a Pod against the strict core schema (SCHEMA_DIR "-": skipped),
and the core objects beside it (the ConfigMap) against their own. Then what
the training operator and cohort need of it: Master (1 replica) and Worker
only; a container named "pytorch" with a port named "pytorchjob-port" (the
operator takes MASTER_PORT from it); `cohort launch` in args with flags that
`cohort launch` or `cohort worker` knows, and no --coordinator (the
environment says it); --job and --token-file on mounted volumes holding
those keys; the job spec trains one step. Finally each check is shown to
fail on a manifest broken on purpose (mutants). Every failure is one
"FAIL:" line; exit status 1 if there was any.
"""
import copy
import os
import re
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_check as dc  # noqa: E402  (its schema, help and spec helpers)

REPLICA_TYPES = {"Master", "Worker"}
REPLICA_FIELDS = {"replicas", "restartPolicy", "template"}
RESTART_POLICIES = {"Always", "OnFailure", "Never", "ExitCode"}


def pod_of(template):
    """A PodTemplateSpec as the Pod the operator makes of it."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": copy.deepcopy(template.get("metadata") or {}),
            "spec": copy.deepcopy(template.get("spec") or {})}


def check_container(kind, spec, docs, flags_of, runner, problems):
    where = f"PyTorchJob {kind}"
    containers = spec.get("containers") or []
    pytorch = [c for c in containers if c.get("name") == "pytorch"]
    if len(pytorch) != 1:
        problems.append(f"{where}: no container named \"pytorch\" (the "
                        f"operator sets MASTER_PORT from its port)")
        return
    c = pytorch[0]
    ports = {p.get("name"): p.get("containerPort")
             for p in c.get("ports") or []}
    if "pytorchjob-port" not in ports:
        problems.append(f"{where}: container pytorch has no port named "
                        f"\"pytorchjob-port\" (MASTER_PORT would be 23456, "
                        f"which nothing declares)")
    if c.get("command"):
        problems.append(f"{where}: sets command: the image's ENTRYPOINT "
                        f"(tini, cohort) must run, with `launch` in args")
    image = c.get("image", "")
    if image.rsplit("/", 1)[-1].split(":")[0].split("@")[0] != "cohort":
        problems.append(f"{where}: image {image} is not a cohort image")
    if (c.get("securityContext") or {}).get("readOnlyRootFilesystem") \
            is not True:
        problems.append(f"{where}: root file system is writable")
    args = c.get("args") or []
    if not args or args[0] != "launch":
        problems.append(f"{where}: args[0] is {args[:1]}, not launch (which "
                        f"reads MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)")
        return
    known = flags_of("launch") | flags_of("worker")
    flags = {}
    for arg in args[1:]:
        m = re.fullmatch(r"--([a-z0-9-]+)(?:=(.*))?", arg, re.S)
        if not m:
            problems.append(f"{where}: argument {arg!r} is not --flag=value")
            continue
        flags[m.group(1)] = m.group(2)
        if m.group(1) == "coordinator" or m.group(1) not in known:
            problems.append(f"{where}: --{m.group(1)} is not a flag of "
                            f"`cohort launch` (or of the worker it runs)")
    for flag in ("job", "token-file"):
        check_mounted(where, spec, c, docs, flag, flags.get(flag), runner,
                      problems)


def check_mounted(where, spec, c, docs, flag, path, runner, problems):
    if not path:
        problems.append(f"{where}: no --{flag}")
        return
    mounts = [m for m in c.get("volumeMounts") or []
              if path.startswith(m["mountPath"].rstrip("/") + "/")]
    if not mounts:
        problems.append(f"{where}: --{flag}={path} is on no volume")
        return
    key = path[len(mounts[0]["mountPath"].rstrip("/")) + 1:]
    volume = next((v for v in spec.get("volumes") or []
                   if v["name"] == mounts[0]["name"]), {})
    if "configMap" in volume:
        cm = dc.find(docs, "ConfigMap", volume["configMap"]["name"])
        text = ((cm or {}).get("data") or {}).get(key)
        if text is None:
            problems.append(f"{where}: --{flag}={path}: ConfigMap "
                            f"{volume['configMap']['name']} (among the "
                            f"objects) has no key {key!r}")
        elif flag == "job":
            code, err = runner(text)
            if code != 0:
                problems.append(f"{where}: the job spec does not train: "
                                f"exit {code}: {err}")
    elif "secret" not in volume:
        problems.append(f"{where}: --{flag}={path} is on volume "
                        f"{mounts[0]['name']}, not a ConfigMap or Secret")


def check(docs, schemas, flags_of, runner):
    """Every problem of the manifest's objects, as strings."""
    problems = []
    jobs = [d for d in docs if d.get("kind") == "PyTorchJob"]
    if len(jobs) != 1:
        problems.append(f"{len(jobs)} PyTorchJob objects, expected one")
    for doc in docs:
        if doc.get("kind") == "PyTorchJob":
            continue
        for e in (schemas.errors(doc) if schemas else [])[:5]:
            problems.append(f"{dc.ident(doc)}: schema: {e}")
    for job in jobs:
        if job.get("apiVersion") != "kubeflow.org/v1":
            problems.append(f"PyTorchJob apiVersion {job.get('apiVersion')}"
                            f", not kubeflow.org/v1")
        replicas = (job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
        if set(replicas) - REPLICA_TYPES or "Master" not in replicas:
            problems.append(f"pytorchReplicaSpecs has {sorted(replicas)}; "
                            f"want Master (and Worker)")
        if (replicas.get("Master") or {}).get("replicas") != 1:
            problems.append("Master must have exactly 1 replica (launch "
                            "rank 0 runs the coordinator)")
        for kind, r in replicas.items():
            for field in set(r) - REPLICA_FIELDS:
                problems.append(f"PyTorchJob {kind}: unknown field {field}")
            if r.get("restartPolicy", "Never") not in RESTART_POLICIES:
                problems.append(f"PyTorchJob {kind}: restartPolicy "
                                f"{r.get('restartPolicy')}")
            pod = pod_of(r.get("template") or {})
            for e in (schemas.errors(pod) if schemas else [])[:5]:
                problems.append(f"PyTorchJob {kind} template: schema: {e}")
            check_container(kind, pod["spec"], docs, flags_of, runner,
                            problems)
    return problems


def mutants(docs):
    """(name, broken copy of docs) pairs; each must fail the checks."""
    def job(d):
        return next(x for x in d if x.get("kind") == "PyTorchJob")

    def master(d):
        return job(d)["spec"]["pytorchReplicaSpecs"]["Master"]

    def container(d, kind="Master"):
        r = job(d)["spec"]["pytorchReplicaSpecs"][kind]
        return r["template"]["spec"]["containers"][0]

    def edit(name, change):
        d = copy.deepcopy(docs)
        change(d)
        return name, d

    return [
        edit("container renamed", lambda d: container(d).update(name="main")),
        edit("port unnamed", lambda d: container(d)["ports"][0].pop("name")),
        edit("unknown pod field", lambda d: master(d)["template"]["spec"]
             .update(restartPolicyy="Never")),
        edit("bad container field", lambda d: container(d, "Worker")
             .update(ports=[{"containerPort": "29400"}])),
        edit("not launch", lambda d: container(d)["args"].__setitem__(
            0, "worker")),
        edit("--coordinator", lambda d: container(d)["args"].append(
            "--coordinator=cohort-master-0:29400")),
        edit("unknown flag", lambda d: container(d)["args"].append(
            "--nodes=2")),
        edit("job not mounted", lambda d: container(d)["volumeMounts"].pop(0)),
        edit("2 masters", lambda d: master(d).update(replicas=2)),
        edit("spec does not train", lambda d: next(
            x for x in d if x.get("kind") == "ConfigMap")["data"].update(
            {"job.textproto": 'model { zoo: "no-such-model" }\n'})),
        edit("core object broken", lambda d: next(
            x for x in d if x.get("kind") == "ConfigMap").update(
            dataa={})),
    ]


def main(argv):
    if len(argv) != 4:
        print(__doc__)
        return 2
    binary, schema_dir, manifest = argv[1:]
    with open(manifest) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    schemas = dc.SchemaCache(schema_dir) if schema_dir != "-" else None
    helps = dc.HelpCache(os.path.abspath(binary))
    flags_of = lambda command: set(helps(command))  # noqa: E731
    runner = dc.SpecRunner(os.path.abspath(binary))
    problems = check(docs, schemas, flags_of, runner)
    for p in problems:
        dc.fail(f"{os.path.basename(manifest)}: {p}")
    kinds = ", ".join(sorted({d["kind"] for d in docs}))
    print(f"{os.path.basename(manifest)}: {len(docs)} objects ({kinds}): "
          f"{'ok' if not problems else 'FAILED'}"
          f"{'' if schemas else ' (schemas skipped)'}")
    caught = 0
    for name, broken in mutants(docs):
        if name in ("unknown pod field", "bad container field",
                    "core object broken") and schemas is None:
            continue
        found = check(broken, schemas, flags_of, runner)
        if found:
            caught += 1
            print(f"mutant \"{name}\" caught: {found[0][:160]}")
        else:
            dc.fail(f"mutant \"{name}\" passed the checks")
    print(f"pytorchjob mutants: {caught} caught")
    return 1 if dc.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
