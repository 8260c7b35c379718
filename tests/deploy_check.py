#!/usr/bin/env python3
"""Checks of cohort's container images and Kubernetes manifests (deploy/).

  deploy_check.py image COHORT DOCKERFILE CUDA_DOCKERFILE
      Maps every library `ldd COHORT` resolves to the package that ships it
      and checks that each Dockerfile's runtime stage installs it in its one
      apt-get install line (or that debian:12-slim already has it), and that
      the line installs nothing else. The CUDA libraries come only from the
      GPU plugin beside COHORT (libcohort_gpu.so), which Dockerfile.cuda
      alone must ship.
  deploy_check.py k8s COHORT SCHEMA_DIR NAME=RENDERED.yaml ...
      Validates every rendered object against the strict JSON schemas in
      SCHEMA_DIR ("-": skip that part) and checks that the manifests agree
      with each other and with `cohort COMMAND --help`. NAME "gpu" is held
      to the GPU overlay's rules, every other name to the CPU ones.
  deploy_check.py mutants COHORT SCHEMA_DIR NAME=RENDERED.yaml ...
      Breaks the rendered objects one way at a time and expects the k8s
      checks to report each break: every check can fail.
  deploy_check.py smoke COHORT GEN_SECRET PROBE NAME=RENDERED.yaml
      Makes the Secret with GEN_SECRET (deploy/k8s/gen-secret.sh) and checks
      its keys and certificate names against the manifests, then runs the
      overlay's coordinator, shards and workers as local processes with
      their manifest arguments (addresses moved to loopback, volumes to
      temporary directories, that Secret in the placeholders' place) and
      expects the job to succeed.

Every failure prints one "FAIL:" line; the exit status is 1 if there was
any. Needs python3-yaml and python3-jsonschema (tools/setup).
"""
import copy
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

import yaml

DAEMONS = ("coordinator", "worker", "ps")
LISTEN_FLAGS = ("listen", "health-listen", "metrics-listen")

failures = []


def fail(message):
    failures.append(message)
    print("FAIL: " + message)


def run(cmd, **kwargs):
    return subprocess.run(cmd, capture_output=True, text=True, **kwargs)


# --------------------------------------------------------------------------
# Images: ldd -> packages -> the Dockerfiles' install lines.

# The packages of debian:12-slim, from the image's root file system manifest:
# github.com/debuerreotype/docker-debian-artifacts, bookworm/slim/
# rootfs.manifest (the Debian 12.7 build of late 2024; the list of names is
# the same on every architecture and point release of Debian 12).
SLIM_PACKAGES = set("""
adduser apt base-files base-passwd bash bsdutils coreutils dash debconf
debian-archive-keyring debianutils diffutils dpkg e2fsprogs findutils
gcc-12-base gpgv grep gzip hostname init-system-helpers libacl1
libapt-pkg6.0 libattr1 libaudit-common libaudit1 libblkid1 libbz2-1.0
libc-bin libc6 libcap-ng0 libcap2 libcom-err2 libcrypt1 libdb5.3
libdebconfclient0 libext2fs2 libffi8 libgcc-s1 libgcrypt20 libgmp10
libgnutls30 libgpg-error0 libhogweed6 libidn2-0 liblz4-1 liblzma5 libmd0
libmount1 libnettle8 libp11-kit0 libpam-modules libpam-modules-bin
libpam-runtime libpam0g libpcre2-8-0 libseccomp2 libselinux1
libsemanage-common libsemanage2 libsepol2 libsmartcols1 libss2 libstdc++6
libsystemd0 libtasn1-6 libtinfo6 libudev1 libunistring2 libuuid1
libxxhash0 libzstd1 login logsave mawk mount ncurses-base ncurses-bin
passwd perl-base sed sysvinit-utils tar tzdata usr-is-merged util-linux
util-linux-extra zlib1g
""".split())

# CUDA libraries come from NVIDIA's apt repository in the image, but from
# wherever the toolkit was installed here (often not a package at all), so
# they are mapped by soname to the package Dockerfile.cuda installs.
NVIDIA_PACKAGES = {
    "libcudart.so.13": "cuda-cudart-13-0",
    "libcublas.so.13": "libcublas-13-0",
    "libcublasLt.so.13": "libcublas-13-0",
    "libcudnn.so.9": "libcudnn9-cuda-13",
    "libnccl.so.2": "libnccl2",
}

# Installed for something other than a library of the binary.
NOT_LIBRARIES = {"tini": "PID 1, forwards SIGTERM to cohort"}


def ldd_libraries(binary):
    """[(soname, path)] of every library the loader resolves, or fails."""
    out = run(["ldd", binary])
    if out.returncode != 0:
        fail(f"ldd {binary}: {out.stderr.strip()}")
        return []
    libs = []
    for line in out.stdout.splitlines():
        line = line.strip()
        m = re.match(r"(\S+) => (\S+)", line)
        if m and m.group(2) == "not":
            fail(f"ldd {binary}: {m.group(1)} not found")
        elif m:
            libs.append((m.group(1), m.group(2)))
        elif line.startswith("/"):  # the loader itself
            libs.append((os.path.basename(line.split()[0]), line.split()[0]))
    return libs


def path_variants(path):
    """The names dpkg may know a file by (merged /usr, symlinks)."""
    out = []
    for p in (path, os.path.realpath(path)):
        out.append(p)
        if p.startswith("/usr/lib/"):
            out.append(p[len("/usr"):])
        elif p.startswith("/lib"):
            out.append("/usr" + p)
    return list(dict.fromkeys(out))


def dpkg_owners(paths):
    """{path: package} for the paths some installed package ships."""
    out = run(["dpkg-query", "-S"] + paths)
    owners = {}
    for line in out.stdout.splitlines():
        if line.startswith("diversion "):
            continue
        pkgs, _, path = line.partition(": ")
        owners[path.strip()] = pkgs.split(",")[0].strip().split(":")[0]
    return owners


def map_libraries(binary):
    """[(soname, path, package, source)]; source "debian" or "nvidia"."""
    libs = ldd_libraries(binary)
    variants = {path: path_variants(path) for _, path in libs}
    owners = dpkg_owners(sorted({v for vs in variants.values() for v in vs}))
    mapped = []
    for soname, path in libs:
        pkg = next((owners[v] for v in variants[path] if v in owners), None)
        if soname in NVIDIA_PACKAGES:
            mapped.append((soname, path, NVIDIA_PACKAGES[soname], "nvidia"))
        elif pkg:
            mapped.append((soname, path, pkg, "debian"))
        else:
            fail(f"{soname} ({path}): no Debian package ships it and it is "
                 f"not a known CUDA library (NVIDIA_PACKAGES)")
    return mapped


def dockerfile_instructions(text):
    """[(INSTRUCTION, arguments)] with continuations joined, comments out."""
    out, current = [], ""
    for raw in text.splitlines():
        s = raw.strip()
        if s.startswith("#") or (not s and not current):
            continue
        if s.endswith("\\"):
            current += s[:-1] + " "
            continue
        current += s
        word, _, rest = current.partition(" ")
        out.append((word.upper(), rest.strip()))
        current = ""
    return out


def runtime_stage(path):
    """(base image, [install package lists]) of the Dockerfile's last stage,
    with the stages it is built FROM (deploy/docker/Dockerfile's runtime is
    FROM its runtime-base stage): the RUNs of that chain of stages and the
    image at its bottom."""
    with open(path) as f:
        instructions = dockerfile_instructions(f.read())
    stages = []  # [(name or None, from, [runs])]
    for word, rest in instructions:
        if word == "FROM":
            args = [a for a in rest.split() if not a.startswith("--")]
            name = args[2] if len(args) >= 3 and args[1].upper() == "AS" else None
            stages.append((name, args[0], []))
        elif word == "RUN" and stages:
            stages[-1][2].append(rest)
    if not stages:
        return None, []
    by_name = {name: i for i, (name, _, _) in enumerate(stages) if name}
    index, runs = len(stages) - 1, []
    while True:
        _, stage_from, stage_runs = stages[index]
        runs = stage_runs + runs
        if by_name.get(stage_from, index) >= index:
            break
        index = by_name[stage_from]
    installs = []
    for command in runs:
        for segment in re.split(r"&&|\|\||;|\|", command):
            m = re.match(r"\s*(?:\S+=\S+\s+)*apt-get\s+(?:-\S+\s+)*install\b"
                         r"(.*)", segment)
            if m:
                installs.append([re.split(r"[=:]", t)[0]
                                 for t in m.group(1).split()
                                 if not t.startswith("-")])
    return stage_from, installs


def check_dockerfile(path, mapped, with_cuda, binary_has_cuda):
    """Checks one Dockerfile's runtime stage against the mapped libraries."""
    name = os.path.basename(path)
    base, installs = runtime_stage(path)
    if base != "debian:12-slim":
        fail(f"{name}: the runtime stage is FROM {base}, not debian:12-slim")
    if len(installs) != 1:
        fail(f"{name}: the runtime stage has {len(installs)} apt-get install "
             f"lines; the libraries belong in exactly one")
        return set()
    installed = set(installs[0])
    needed = set()
    for soname, _, pkg, source in mapped:
        if source == "nvidia" and not with_cuda:
            continue
        needed.add(pkg)
        if pkg not in installed and pkg not in SLIM_PACKAGES:
            fail(f"{name}: {soname} comes from {pkg}, which neither the "
                 f"runtime stage's apt-get install line nor debian:12-slim "
                 f"has")
    for pkg in sorted(installed - needed - set(NOT_LIBRARIES)):
        if pkg in NVIDIA_PACKAGES.values() and not binary_has_cuda:
            print(f"note: {name}: {pkg} not checked: this cohort was built "
                  f"without CUDA")
            continue
        fail(f"{name}: the runtime stage installs {pkg}, which no library of "
             f"`ldd cohort` needs (stale? or add it to NOT_LIBRARIES with a "
             f"reason)")
    return installed


PLUGIN = "libcohort_gpu.so"
# Where Dockerfile.cuda must put the plugin: ../lib/cohort/ from the binary
# at /usr/local/bin/cohort, one of the two places cohort looks
# (worker/gpu/gpu_plugin.h).
PLUGIN_IN_IMAGE = "/usr/local/lib/cohort/" + PLUGIN


def check_plugin_copies(dockerfile, cuda_dockerfile):
    """Dockerfile.cuda ships the GPU plugin where cohort finds it; the CPU
    image ships none (and so no CUDA library at all)."""
    for path, wanted in ((dockerfile, False), (cuda_dockerfile, True)):
        with open(path) as f:
            instructions = dockerfile_instructions(f.read())
        copies = [rest for word, rest in instructions
                  if word == "COPY" and PLUGIN in rest]
        name = os.path.basename(path)
        if wanted and not any(c.split()[-1] == PLUGIN_IN_IMAGE
                              for c in copies):
            fail(f"{name}: no COPY of the GPU plugin to {PLUGIN_IN_IMAGE}")
        if not wanted and copies:
            fail(f"{name}: the CPU image copies the GPU plugin ({copies[0]})")


def image_main(binary, dockerfile, cuda_dockerfile):
    mapped = map_libraries(binary)
    if any(source == "nvidia" for *_, source in mapped):
        fail(f"{binary} links CUDA libraries itself; they belong to the GPU "
             f"plugin {PLUGIN} only")
    plugin = os.path.join(os.path.dirname(os.path.realpath(binary)), PLUGIN)
    has_cuda = os.path.exists(plugin)
    if has_cuda:
        known = {soname for soname, *_ in mapped}
        mapped += [m for m in map_libraries(plugin) if m[0] not in known]
    check_plugin_copies(dockerfile, cuda_dockerfile)
    cpu = check_dockerfile(dockerfile, mapped, False, has_cuda)
    gpu = check_dockerfile(cuda_dockerfile, mapped, True, has_cuda)

    def where(pkg, installed):
        if pkg in installed:
            return "install line"
        return "debian:12-slim" if pkg in SLIM_PACKAGES else "MISSING"

    width = max([len(m[0]) for m in mapped] + [7])
    print(f"{'library':{width}} {'package':22} {'Dockerfile':15} "
          f"Dockerfile.cuda")
    for soname, _, pkg, source in mapped:
        cpu_where = "- (CUDA)" if source == "nvidia" else where(pkg, cpu)
        print(f"{soname:{width}} {pkg:22} {cpu_where:15} {where(pkg, gpu)}")
    if not has_cuda:
        print("note: this cohort was built without CUDA (--config=nocuda): "
              "Dockerfile.cuda's CUDA libraries are not checked")


# --------------------------------------------------------------------------
# Kubernetes: the rendered objects of one overlay.


def load_overlays(pairs):
    overlays = {}
    for pair in pairs:
        name, _, path = pair.partition("=")
        with open(path) as f:
            overlays[name] = [d for d in yaml.safe_load_all(f) if d]
    return overlays


def ident(doc):
    return f"{doc['kind']} {doc['metadata'].get('name')}"


def of_kind(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def find(docs, kind, name):
    return next((d for d in of_kind(docs, kind)
                 if d["metadata"].get("name") == name), None)


def selects(selector, labels):
    """Kubernetes label selector semantics; None selects nothing."""
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        ok = {"In": labels.get(key) in values,
              "NotIn": labels.get(key) not in values,
              "Exists": key in labels,
              "DoesNotExist": key not in labels}.get(op, False)
        if not ok:
            return False
    return True


def service_selector(svc):
    """A Service's selector (a plain map) as a label selector."""
    labels = svc["spec"].get("selector")
    return {"matchLabels": labels} if labels else None


def is_empty_selector(selector):
    return not (selector or {}).get("matchLabels") and \
        not (selector or {}).get("matchExpressions")


class Daemon:
    """One cohort container of a workload: its command and parsed flags."""

    def __init__(self, workload, container, help_of):
        self.workload = workload
        self.kind = workload["kind"]
        self.name = workload["metadata"]["name"]
        self.namespace = workload["metadata"].get("namespace", "default")
        self.template = workload["spec"]["template"]
        self.pod = self.template["spec"]
        self.labels = self.template["metadata"].get("labels") or {}
        self.container = container
        self.where = f"{ident(workload)} container {container['name']}"
        self.env = self._env()
        args = container.get("args") or []
        self.command = args[0] if args else None
        self.flags = {}
        self.unresolved = []
        self.bad_args = []
        for arg in args[1:]:
            self._add_flag(arg)
        self.help = help_of(self.command) if self.command in DAEMONS else {}

    def _env(self):
        env = {}
        placeholders = {
            "metadata.namespace": self.namespace,
            "metadata.name": "{pod-name}",
            "metadata.annotations['batch.kubernetes.io/job-completion-index']":
                "{index}",
            "metadata.labels['batch.kubernetes.io/job-completion-index']":
                "{index}",
        }
        for e in self.container.get("env") or []:
            if "value" in e:
                env[e["name"]] = str(e["value"])
            else:
                field = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get(
                    "fieldPath", "")
                env[e["name"]] = placeholders.get(field, "{" + field + "}")
        return env

    def expand(self, text):
        def sub(m):
            if m.group(1) in self.env:
                return self.env[m.group(1)]
            self.unresolved.append(m.group(0))
            return m.group(0)
        return re.sub(r"\$\((\w+)\)", sub, text)

    def _add_flag(self, arg):
        m = re.fullmatch(r"--([a-z0-9][a-z0-9-]*)(=(.*))?", arg, re.S)
        if not m:
            self.bad_args.append(arg)
            return
        name = m.group(1)
        value = self.expand(m.group(3)) if m.group(2) else None
        if name in self.flags:
            self.bad_args.append(f"{arg} (--{name} given twice)")
        self.flags[name] = value

    def port_of(self, flag):
        value = self.flags.get(flag)
        if not value or ":" not in value:
            return None
        try:
            return int(value.rsplit(":", 1)[1])
        except ValueError:
            return None

    def container_port(self, ref):
        """The containerPort `ref` (a number or a port name) denotes."""
        for p in self.container.get("ports") or []:
            if ref == p.get("containerPort") or ref == p.get("name"):
                return p["containerPort"]
        return None

    def volume(self, name):
        for v in self.pod.get("volumes") or []:
            if v["name"] == name:
                return v
        for t in self.workload["spec"].get("volumeClaimTemplates") or []:
            if t["metadata"]["name"] == name:
                return {"name": name, "persistentVolumeClaim": {
                    "claimName": name, "template": True}}
        return None

    def mount_of(self, path):
        """(volumeMount, path inside the volume) holding `path`, or None."""
        best = None
        for m in self.container.get("volumeMounts") or []:
            root = m["mountPath"].rstrip("/")
            if path == root or path.startswith(root + "/"):
                if best is None or len(root) > len(best[0]["mountPath"]):
                    best = (m, path[len(root):].lstrip("/"))
        return best


def daemons_of(docs, help_of):
    out = []
    for w in docs:
        if w.get("kind") in ("Deployment", "StatefulSet", "Job"):
            for c in w["spec"]["template"]["spec"].get("containers") or []:
                out.append(Daemon(w, c, help_of))
    return out


def by_command(daemons, command):
    return [d for d in daemons if d.command == command]


class HelpCache:
    """`cohort COMMAND --help`, parsed: {flag: "TYPE" | "N" | None}."""

    def __init__(self, binary):
        self.binary = binary
        self.cache = {}

    def __call__(self, command):
        if command not in self.cache:
            out = run([self.binary, command, "--help"])
            flags = {}
            for line in out.stdout.splitlines():
                m = re.match(r"\s+--([a-z0-9][a-z0-9-]*)(=(\S+))?(\s|$)", line)
                if m:
                    # `--NAME=TYPE`: INT takes a number, any other TYPE
                    # (FILE, HOST:PORT, ...) some text; a bare --NAME none.
                    kind = m.group(3)
                    flags[m.group(1)] = "N" if kind == "INT" else kind
            if out.returncode != 0 or not flags:
                fail(f"cohort {command} --help: exit {out.returncode}, "
                     f"{len(flags)} flags: {out.stderr.strip()}")
            self.cache[command] = flags
        return self.cache[command]


# -- Schemas -----------------------------------------------------------------


class SchemaCache:
    """Validators of the kubeconform-layout schema directory, by object."""

    def __init__(self, directory):
        import jsonschema  # only here: the other parts work without it
        self.jsonschema = jsonschema
        self.directory = directory
        self.validators = {}

    def file_for(self, doc):
        group, _, version = doc["apiVersion"].rpartition("/")
        name = doc["kind"].lower()
        if group:
            name += "-" + group.split(".")[0]
        return os.path.join(self.directory, f"{name}-{version}.json")

    def errors(self, doc):
        path = self.file_for(doc)
        if path not in self.validators:
            if not os.path.exists(path):
                return [f"no schema {os.path.basename(path)} in "
                        f"{self.directory}"]
            with open(path) as f:
                schema = json.load(f)
            cls = self.jsonschema.validators.validator_for(
                schema, default=self.jsonschema.Draft7Validator)
            self.validators[path] = cls(schema)
        errs = sorted(self.validators[path].iter_errors(doc),
                      key=lambda e: list(e.absolute_path))
        return [f"{'.'.join(str(p) for p in e.absolute_path) or '(top)'}: "
                f"{e.message[:300]}" for e in errs]


def check_schemas(ctx):
    if ctx.schemas is None:
        return
    for doc in ctx.docs:
        for e in ctx.schemas.errors(doc)[:5]:
            ctx.fail(doc, "schema: " + e)


# -- The checks --------------------------------------------------------------


class Context:
    """One overlay's objects, its daemons and the shared caches."""

    def __init__(self, overlay, docs, help_of, schemas, spec_runner):
        self.overlay = overlay
        self.gpu = overlay == "gpu"
        self.docs = docs
        self.help_of = help_of
        self.schemas = schemas
        self.spec_runner = spec_runner
        self.daemons = daemons_of(docs, help_of)
        self.templates = [(d, d.labels) for d in self.daemons]

    def fail(self, doc_or_where, message):
        where = doc_or_where if isinstance(doc_or_where, str) else \
            ident(doc_or_where)
        fail(f"{self.overlay}: {where}: {message}")

    def one(self, command):
        found = by_command(self.daemons, command)
        return found[0] if len(found) == 1 else None

    def selected(self, selector):
        """The daemons whose pod template labels `selector` selects."""
        return [d for d in self.daemons if selects(selector, d.labels)]


def check_namespace(ctx):
    namespaces = of_kind(ctx.docs, "Namespace")
    if len(namespaces) != 1:
        ctx.fail("kustomization", f"{len(namespaces)} Namespace objects, "
                 f"expected one")
        return
    ns = namespaces[0]["metadata"]["name"]
    for doc in ctx.docs:
        if doc["kind"] != "Namespace" and \
                doc["metadata"].get("namespace") != ns:
            ctx.fail(doc, f"in namespace {doc['metadata'].get('namespace')}, "
                     f"not the job's {ns}")


def check_flags(ctx):
    if not ctx.daemons:
        ctx.fail("kustomization", "no workloads")
    for d in ctx.daemons:
        image = d.container.get("image", "")
        if image.rsplit("/", 1)[-1].split(":")[0].split("@")[0] != "cohort":
            ctx.fail(d.where, f"image {image} is not a cohort image")
        if d.container.get("command"):
            ctx.fail(d.where, "sets command: the image's ENTRYPOINT (tini, "
                     "cohort) must run, with the cohort command in args")
        if d.command not in DAEMONS:
            ctx.fail(d.where, f"args[0] is {d.command!r}, not one of "
                     f"{', '.join(DAEMONS)}")
            continue
        for arg in d.bad_args:
            ctx.fail(d.where, f"argument {arg!r} is not --flag or --flag=value")
        for ref in d.unresolved:
            ctx.fail(d.where, f"{ref} names no env variable of the container "
                     f"(kubelet would pass it literally)")
        for name, value in d.flags.items():
            check_flag(ctx, d, name, value)


def check_flag(ctx, d, name, value):
    if name not in d.help:
        ctx.fail(d.where, f"--{name} is not a flag of `cohort {d.command}` "
                 f"(its --help lists {', '.join(sorted(d.help))})")
    elif d.help[name] is None and value is not None:
        ctx.fail(d.where, f"--{name} is a switch and takes no value "
                 f"(given {value!r})")
    elif d.help[name] is not None and not value:
        ctx.fail(d.where, f"--{name} needs ={d.help[name]}")
    elif d.help[name] == "N" and not re.fullmatch(r"-?\d+", value):
        ctx.fail(d.where, f"--{name}={value} is not a number")


def check_ports(ctx):
    for d in ctx.daemons:
        listened = {}
        for flag in LISTEN_FLAGS:
            if flag not in d.flags:
                continue
            host, _, port = (d.flags[flag] or "").rpartition(":")
            if host not in ("0.0.0.0", "[::]"):
                ctx.fail(d.where, f"--{flag}={d.flags[flag]}: a pod must "
                         f"listen on 0.0.0.0 to be reached")
            if not port.isdigit() or int(port) == 0:
                ctx.fail(d.where, f"--{flag}={d.flags[flag]}: a Service and "
                         f"probes need a fixed port")
                continue
            listened[int(port)] = flag
            if d.container_port(int(port)) is None:
                ctx.fail(d.where, f"--{flag} port {port} is no containerPort")
        if d.command in ("coordinator", "ps") and "listen" not in d.flags:
            ctx.fail(d.where, "no --listen: its port must be explicit")
        if "metrics-listen" not in d.flags:
            ctx.fail(d.where, "no --metrics-listen: Prometheus cannot scrape")
        for p in d.container.get("ports") or []:
            if p["containerPort"] not in listened:
                ctx.fail(d.where, f"containerPort {p['containerPort']} "
                         f"({p.get('name')}) is no --listen, --health-listen "
                         f"or --metrics-listen port")
        check_probes(ctx, d)


def check_probes(ctx, d):
    health = d.port_of("health-listen")
    for kind in ("readinessProbe", "livenessProbe", "startupProbe"):
        probe = d.container.get(kind)
        if not probe:
            continue
        if "grpc" in probe:
            if probe["grpc"].get("port") != health or health is None:
                ctx.fail(d.where, f"{kind} is a gRPC probe on port "
                         f"{probe['grpc'].get('port')}, but only the "
                         f"plaintext --health-listen port ({health}) answers "
                         f"kubelet without token or TLS")
        for how in ("tcpSocket", "httpGet"):
            if how in probe and d.container_port(probe[how]["port"]) is None:
                ctx.fail(d.where, f"{kind} {how} port {probe[how]['port']} "
                         f"is no containerPort")
    if d.command == "coordinator":
        for kind in ("readinessProbe", "livenessProbe"):
            if "grpc" not in (d.container.get(kind) or {}):
                ctx.fail(d.where, f"no gRPC {kind} (the coordinator serves "
                         f"grpc.health.v1 on --health-listen)")


def service_targets(ctx, svc):
    """{service port: {daemon where: containerPort or None}}."""
    selected = ctx.selected(service_selector(svc))
    out = {}
    for p in svc["spec"].get("ports") or []:
        target = p.get("targetPort", p["port"])
        out[p["port"]] = {d.where: d.container_port(target) for d in selected}
    return selected, out


def check_services(ctx):
    for svc in of_kind(ctx.docs, "Service"):
        selected, targets = service_targets(ctx, svc)
        if not selected:
            ctx.fail(svc, f"selector {svc['spec'].get('selector')} selects no "
                     f"pod template")
        commands = {d.command for d in selected}
        if len(commands) > 1:
            ctx.fail(svc, f"selects pods of several commands: {commands}")
        for port, per_daemon in targets.items():
            for where, cport in per_daemon.items():
                if cport is None:
                    ctx.fail(svc, f"port {port}: targetPort is no "
                             f"containerPort of {where}")
    for d in ctx.daemons:
        check_stable_names(ctx, d)


def headless_service(ctx, d, name, field):
    svc = find(ctx.docs, "Service", name)
    if svc is None:
        ctx.fail(d.where, f"{field} {name} names no Service")
        return None
    if svc["spec"].get("clusterIP") != "None":
        ctx.fail(svc, f"is {field} of {ident(d.workload)} but not headless "
                 f"(clusterIP: None)")
    if not selects(service_selector(svc), d.labels):
        ctx.fail(svc, f"does not select the pods of {ident(d.workload)}, "
                 f"whose {field} it is")
    if not svc["spec"].get("publishNotReadyAddresses"):
        ctx.fail(svc, "publishNotReadyAddresses is not true: pods resolve "
                 "their own names before they are Ready")
    return svc


def check_stable_names(ctx, d):
    if d.kind == "StatefulSet":
        headless_service(ctx, d, d.workload["spec"].get("serviceName"),
                         "serviceName")
    elif d.kind == "Job" and d.command != "coordinator":
        if d.workload["spec"].get("completionMode") != "Indexed":
            ctx.fail(d.workload, "not an Indexed Job: its pods get no stable "
                     "host names")
        if not d.pod.get("subdomain"):
            ctx.fail(d.workload, "no spec.template.spec.subdomain: its pods "
                     "get no DNS names")
        else:
            headless_service(ctx, d, d.pod["subdomain"], "subdomain")


def check_selectors(ctx):
    for d in ctx.daemons:
        sel = d.workload["spec"].get("selector")
        if d.kind == "Job":
            if sel and not d.workload["spec"].get("manualSelector"):
                ctx.fail(d.workload, "sets spec.selector without "
                         "manualSelector (the API server refuses it)")
        elif not selects(sel, d.labels) or is_empty_selector(sel):
            ctx.fail(d.workload, f"spec.selector {sel} does not select its "
                     f"own pod template (labels {d.labels})")
    for pdb in of_kind(ctx.docs, "PodDisruptionBudget"):
        check_pdb(ctx, pdb)
    for np in of_kind(ctx.docs, "NetworkPolicy"):
        if not ctx.selected(np["spec"].get("podSelector")):
            ctx.fail(np, "podSelector selects no pod template")
        for rule in np["spec"].get("ingress") or []:
            for peer in rule.get("from") or []:
                if "podSelector" in peer and "namespaceSelector" not in peer \
                        and not ctx.selected(peer["podSelector"]):
                    ctx.fail(np, f"from.podSelector {peer['podSelector']} "
                             f"selects no pod template")


def replicas_of(d):
    spec = d.workload["spec"]
    if d.kind == "Job":
        return spec.get("parallelism", 1)
    return spec.get("replicas", 1)


def check_pdb(ctx, pdb):
    selected = ctx.selected(pdb["spec"].get("selector"))
    if not selected or is_empty_selector(pdb["spec"].get("selector")):
        ctx.fail(pdb, "selector selects no pod template")
        return
    spec = pdb["spec"]
    for d in selected:
        if d.kind == "Job" and ("maxUnavailable" in spec or
                                not isinstance(spec.get("minAvailable"), int)):
            ctx.fail(pdb, f"selects Job pods ({d.name}): only an integer "
                     f"minAvailable works for them")
        if isinstance(spec.get("minAvailable"), int) and \
                spec["minAvailable"] > replicas_of(d):
            ctx.fail(pdb, f"minAvailable {spec['minAvailable']} exceeds the "
                     f"{replicas_of(d)} pods of {ident(d.workload)}")


def port_in_rule(rule, port, d):
    ports = rule.get("ports")
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") != "TCP":
            continue
        first = d.container_port(p["port"]) if isinstance(p.get("port"), str) \
            else p.get("port")
        if first is None and "port" not in p:
            return True
        if first is not None and first <= port <= p.get("endPort", first):
            return True
    return False


def ingress_allows(ctx, src, dst, port):
    """True when the policies selecting dst let pod src in on port."""
    policies = [np for np in of_kind(ctx.docs, "NetworkPolicy")
                if selects(np["spec"].get("podSelector"), dst.labels)
                and "Ingress" in (np["spec"].get("policyTypes") or ["Ingress"])]
    if not policies:
        return True
    for np in policies:
        for rule in np["spec"].get("ingress") or []:
            if not port_in_rule(rule, port, dst):
                continue
            peers = rule.get("from")
            if not peers:
                return True
            for peer in peers:
                if "podSelector" in peer and "namespaceSelector" not in peer \
                        and selects(peer["podSelector"], src.labels):
                    return True
    return False


def check_network_policy(ctx):
    policies = of_kind(ctx.docs, "NetworkPolicy")
    for d in ctx.daemons:
        if not any(selects(np["spec"].get("podSelector"), d.labels) and
                   "Ingress" in (np["spec"].get("policyTypes") or [])
                   for np in policies):
            ctx.fail(d.where, "no NetworkPolicy isolates its pods (Ingress)")
    for np in policies:
        check_policy_rules(ctx, np)
    check_required_flows(ctx)


def check_policy_rules(ctx, np):
    targets = ctx.selected(np["spec"].get("podSelector"))
    for rule in np["spec"].get("ingress") or []:
        peers = rule.get("from")
        if not peers:
            ctx.fail(np, "an ingress rule without `from` admits every pod "
                     "of the cluster")
            continue
        for peer in peers:
            if "ipBlock" in peer:
                ctx.fail(np, "ipBlock peers admit pods by address, not by "
                         "label")
            elif "namespaceSelector" in peer:
                metrics = {d.port_of("metrics-listen") for d in targets}
                if not rule.get("ports") or any(
                        p.get("port") not in metrics or "endPort" in p
                        for p in rule["ports"]):
                    ctx.fail(np, "admits other namespaces beyond the metrics "
                             "port")
            elif is_empty_selector(peer.get("podSelector")):
                ctx.fail(np, "from.podSelector {} admits every pod of the "
                         "namespace, not the job's by label")


def check_required_flows(ctx):
    coordinators = by_command(ctx.daemons, "coordinator")
    shards = by_command(ctx.daemons, "ps")
    workers = by_command(ctx.daemons, "worker")
    for src in workers + shards:
        for dst in coordinators:
            port = dst.port_of("listen")
            if port and not ingress_allows(ctx, src, dst, port):
                ctx.fail(src.where, f"NetworkPolicy blocks it from the "
                         f"coordinator port {port}")
    for src in workers:
        for dst in shards:
            port = dst.port_of("listen")
            if port and not ingress_allows(ctx, src, dst, port):
                ctx.fail(src.where, f"NetworkPolicy blocks it from the shard "
                         f"port {port}")
        for dst in workers:
            # Gloo and NCCL listen on ephemeral ports (Linux: 32768-60999
            # by default; anything above 1023 when reconfigured).
            for port in (1024, 32768, 45000, 60999, 65535):
                if not ingress_allows(ctx, src, dst, port):
                    ctx.fail(src.where, f"NetworkPolicy blocks all-reduce "
                             f"traffic between workers (TCP port {port})")
                    break
    for d in ctx.daemons:
        port = d.port_of("metrics-listen")
        if port and not admits_other_namespace(ctx, d, port):
            ctx.fail(d.where, f"no NetworkPolicy admits Prometheus (another "
                     f"namespace) to the metrics port {port}")


def admits_other_namespace(ctx, d, port):
    """True when a policy of d's pods admits a namespaceSelector peer on
    port (Prometheus runs in a namespace of its own)."""
    for np in of_kind(ctx.docs, "NetworkPolicy"):
        if not selects(np["spec"].get("podSelector"), d.labels):
            continue
        for rule in np["spec"].get("ingress") or []:
            if port_in_rule(rule, port, d) and any(
                    "namespaceSelector" in p for p in rule.get("from") or []):
                return True
    return False


def service_names(svc, ns):
    name = svc["metadata"]["name"]
    return {name, f"{name}.{ns}", f"{name}.{ns}.svc",
            f"{name}.{ns}.svc.cluster.local"}


def check_addresses(ctx):
    coordinator = ctx.one("coordinator")
    if coordinator is None:
        ctx.fail("kustomization", "needs exactly one coordinator container")
        return
    for d in by_command(ctx.daemons, "worker") + by_command(ctx.daemons, "ps"):
        check_coordinator_address(ctx, d, coordinator)
        check_host(ctx, d)


def check_coordinator_address(ctx, d, coordinator):
    value = d.flags.get("coordinator") or ""
    host, _, port = value.rpartition(":")
    for svc in of_kind(ctx.docs, "Service"):
        if host not in service_names(svc, d.namespace):
            continue
        if not selects(service_selector(svc), coordinator.labels):
            ctx.fail(d.where, f"--coordinator={value}: Service "
                     f"{svc['metadata']['name']} does not select the "
                     f"coordinator")
            return
        _, targets = service_targets(ctx, svc)
        target = targets.get(int(port) if port.isdigit() else None, {})
        if target.get(coordinator.where) != coordinator.port_of("listen"):
            ctx.fail(d.where, f"--coordinator={value}: port {port} of Service "
                     f"{svc['metadata']['name']} does not lead to the "
                     f"coordinator's --listen port "
                     f"{coordinator.port_of('listen')}")
        return
    ctx.fail(d.where, f"--coordinator={value}: {host!r} is no Service's DNS "
             f"name in namespace {d.namespace}")


def check_host(ctx, d):
    host = d.flags.get("host")
    if d.kind == "StatefulSet":
        stem, domain = "{pod-name}", d.workload["spec"].get("serviceName")
    elif d.kind == "Job":
        stem, domain = f"{d.name}-{{index}}", d.pod.get("subdomain")
    else:
        ctx.fail(d.where, f"a {d.kind} gives its pods no stable DNS names")
        return
    wanted = {f"{stem}.{domain}.{d.namespace}.svc",
              f"{stem}.{domain}.{d.namespace}.svc.cluster.local"}
    if host not in wanted:
        ctx.fail(d.where, f"--host={host}: not the pod's stable DNS name "
                 f"({' or '.join(sorted(wanted))})")


# Flags naming files or directories, and what they need of their volume.
PATH_FLAGS = {"job": "key", "token-file": "key", "tls-cert": "key",
              "tls-key": "key", "tls-ca": "key", "report": "writable",
              "state-dir": "durable", "data-dir": "any"}


def check_mounts(ctx):
    for d in ctx.daemons:
        if d.container.get("securityContext", {}).get(
                "readOnlyRootFilesystem") is not True:
            ctx.fail(d.where, "root file system is writable (set "
                     "readOnlyRootFilesystem: true; cohort writes only to "
                     "its volumes)")
        for flag, need in PATH_FLAGS.items():
            if d.flags.get(flag):
                check_path(ctx, d, f"--{flag}", d.flags[flag], need)


def check_path(ctx, d, what, path, need):
    found = d.mount_of(path)
    if found is None:
        ctx.fail(d.where, f"{what}={path} is on no volume")
        return
    mount, rel = found
    volume = d.volume(mount["name"])
    if volume is None:
        ctx.fail(d.where, f"volumeMount {mount['name']} names no volume")
        return
    if need == "key":
        check_key(ctx, d, what, path, volume, rel)
    elif need in ("writable", "durable"):
        if mount.get("readOnly") or "configMap" in volume or \
                "secret" in volume:
            ctx.fail(d.where, f"{what}={path} is on read-only volume "
                     f"{mount['name']}")
        if need == "durable":
            claim = volume.get("persistentVolumeClaim")
            if claim is None:
                ctx.fail(d.where, f"{what}={path} is on volume "
                         f"{mount['name']}, not a PersistentVolumeClaim: it "
                         f"would not outlive the pod")
            elif not claim.get("template") and not find(
                    ctx.docs, "PersistentVolumeClaim", claim["claimName"]):
                ctx.fail(d.where, f"claim {claim['claimName']} is not among "
                         f"the objects")


def check_key(ctx, d, what, path, volume, rel):
    for kind, source, ref in (("ConfigMap", "configMap", "name"),
                              ("Secret", "secret", "secretName")):
        if source not in volume:
            continue
        name = volume[source][ref]
        items = volume[source].get("items")
        key = next((i["key"] for i in items if i["path"] == rel), None) \
            if items else rel
        obj = find(ctx.docs, kind, name)
        if obj is None:
            ctx.fail(d.where, f"{what}={path}: {kind} {name} is not among "
                     f"the objects")
        elif key not in (obj.get("data") or {}) and \
                key not in (obj.get("stringData") or {}):
            ctx.fail(d.where, f"{what}={path}: {kind} {name} has no key "
                     f"{key!r}")
        return
    ctx.fail(d.where, f"{what}={path} is on volume {volume['name']}, not a "
             f"ConfigMap or Secret")


# -- The job spec in the ConfigMap ---------------------------------------------

TOKEN = re.compile(r'\s*(?:#[^\n]*|("(?:[^"\\]|\\.)*")|([{}\[\]:,;])|'
                   r'([^\s{}\[\]:,;"#]+))')


def textproto(text):
    """A protobuf text-format message as {field: [values]} (values: str or
    dict); enough of the format for job specs."""
    tokens = [m.group(1) or m.group(2) or m.group(3)
              for m in TOKEN.finditer(text) if m.group(1) or m.group(2) or
              m.group(3)]
    pos = 0

    def message(end):
        nonlocal pos
        out = {}
        while pos < len(tokens) and tokens[pos] != end:
            name = tokens[pos]
            pos += 1
            if tokens[pos] == ":":
                pos += 1
            if tokens[pos] == "{":
                pos += 1
                value = message("}")
                pos += 1
                out.setdefault(name, []).append(value)
            elif tokens[pos] == "[":
                pos += 1
                while tokens[pos] != "]":
                    if tokens[pos] != ",":
                        out.setdefault(name, []).append(tokens[pos])
                    pos += 1
                pos += 1
            else:
                out.setdefault(name, []).append(tokens[pos].strip('"'))
                pos += 1
            if pos < len(tokens) and tokens[pos] in (",", ";"):
                pos += 1
        return out

    return message(None)


def field(msg, path, default=None):
    for part in path.split("."):
        values = (msg or {}).get(part)
        if not values:
            return default
        msg = values[-1]
    return msg


class SpecRunner:
    """Runs a job spec through `cohort train` once (1 step), by content."""

    def __init__(self, binary):
        self.binary = binary
        self.results = {}

    def __call__(self, text):
        if text not in self.results:
            with tempfile.TemporaryDirectory() as tmp:
                spec = os.path.join(tmp, "job.textproto")
                with open(spec, "w") as f:
                    f.write(text)
                cmd = [self.binary, "train", f"--job={spec}",
                       "--max-steps=1", "--quiet"]
                if field(textproto(text), "checkpoint"):
                    # Not in the spec's directory, which is the pods'.
                    cmd.append(f"--checkpoint-dir={tmp}/ckpt")
                out = run(cmd, cwd=tmp)
            self.results[text] = (out.returncode, out.stderr.strip())
        return self.results[text]


def check_job_spec(ctx):
    coordinator = ctx.one("coordinator")
    if coordinator is None or not coordinator.flags.get("job"):
        return
    found = coordinator.mount_of(coordinator.flags["job"])
    volume = coordinator.volume(found[0]["name"]) if found else None
    cm = find(ctx.docs, "ConfigMap", (volume or {}).get("configMap", {})
              .get("name")) if volume else None
    text = ((cm or {}).get("data") or {}).get(found[1]) if found else None
    if text is None:
        return  # check_mounts reports it
    code, err = ctx.spec_runner(text)
    if code != 0:
        ctx.fail(cm, f"job spec does not train: exit {code}: {err}")
    spec = textproto(text)
    check_spec_sizes(ctx, spec, coordinator)
    for d in by_command(ctx.daemons, "worker"):
        for name, writable in (("checkpoint.dir", True), ("data.dir", False)):
            path = field(spec, name)
            if path:
                check_path(ctx, d, f"job spec {name}", path,
                           "writable" if writable else "any")


def check_spec_sizes(ctx, spec, coordinator):
    lo = int(field(spec, "cluster.min_workers", "1"))
    hi = int(field(spec, "cluster.max_workers", str(lo)))
    for d in by_command(ctx.daemons, "worker"):
        n = replicas_of(d)
        if not lo <= n <= hi:
            ctx.fail(d.workload, f"runs {n} workers; the job spec wants "
                     f"{lo}..{hi} (cluster.min_workers, max_workers)")
        if d.kind == "Job" and d.workload["spec"].get("completions") != n:
            ctx.fail(d.workload, "completions differs from parallelism")
    ps_mode = field(spec, "mode") == "PS"
    shards = int(field(spec, "ps.shards", "1")) if ps_mode else 0
    for d in by_command(ctx.daemons, "ps"):
        if replicas_of(d) != shards:
            ctx.fail(d.workload, f"runs {replicas_of(d)} shards; the job "
                     f"spec wants {shards} (mode, ps.shards)")
    if ps_mode and not by_command(ctx.daemons, "ps"):
        ctx.fail("kustomization", "a parameter-server job without shards")
    if ps_mode and "state-dir" in coordinator.flags:
        ctx.fail(coordinator.where, "--state-dir with a parameter-server job: "
                 "the coordinator refuses it")
    if not ps_mode and "state-dir" not in coordinator.flags:
        ctx.fail(coordinator.where, "no --state-dir: a rescheduled "
                 "coordinator would lose the job")


# -- Workload shapes -------------------------------------------------------


def check_workloads(ctx):
    c = ctx.one("coordinator")
    if c is not None:
        spec = c.workload["spec"]
        if c.kind != "Deployment" or spec.get("replicas", 1) != 1:
            ctx.fail(c.workload, "the coordinator must be a Deployment of "
                     "exactly 1 replica")
        if (spec.get("strategy") or {}).get("type") != "Recreate":
            ctx.fail(c.workload, "strategy is not Recreate: a rollout would "
                     "run two coordinators on one job")
    for d in by_command(ctx.daemons, "worker"):
        if d.pod.get("terminationGracePeriodSeconds", 30) < 60:
            ctx.fail(d.workload, "terminationGracePeriodSeconds < 60: too "
                     "short for a final checkpoint")
    for d in ctx.daemons:
        ann = d.template["metadata"].get("annotations") or {}
        want = {"prometheus.io/scrape": "true",
                "prometheus.io/port": str(d.port_of("metrics-listen")),
                "prometheus.io/path": "/metrics"}
        for k, v in want.items():
            if ann.get(k) != v:
                ctx.fail(d.where, f"pod annotation {k}={ann.get(k)!r}, "
                         f"expected {v!r}")


def check_devices(ctx):
    for d in ctx.daemons:
        limits = (d.container.get("resources") or {}).get("limits") or {}
        gpus = int(limits.get("nvidia.com/gpu", 0))
        devices = d.flags.get("devices") or ""
        image = d.container.get("image", "")
        if ctx.gpu and d.command == "worker":
            if gpus < 1:
                ctx.fail(d.where, "requests no nvidia.com/gpu")
            if not devices.startswith("gpu:"):
                ctx.fail(d.where, f"--devices={devices}, not gpu:...")
        elif gpus:
            ctx.fail(d.where, f"requests {gpus} nvidia.com/gpu")
        elif d.command == "worker" and not devices.startswith("cpu:"):
            ctx.fail(d.where, f"--devices={devices}, not cpu:N")
        if ctx.gpu != ("cuda" in image):
            ctx.fail(d.where, f"image {image}: the gpu overlay runs the CUDA "
                     f"image, the others the CPU one")


def warn_placeholders(ctx):
    for s in of_kind(ctx.docs, "Secret"):
        values = list((s.get("stringData") or {}).values())
        if any("REPLACE-ME" in str(v) for v in values):
            print(f"note: {ctx.overlay}: {ident(s)} holds the placeholders: "
                  f"replace it before deploying (deploy/k8s/README.md)")


CHECKS = (check_schemas, check_namespace, check_flags, check_ports,
          check_services, check_selectors, check_network_policy,
          check_addresses, check_mounts, check_job_spec, check_workloads,
          check_devices)


def check_overlay(ctx):
    for check in CHECKS:
        check(ctx)


def k8s_main(binary, schema_dir, pairs):
    help_of = HelpCache(binary)
    schemas = SchemaCache(schema_dir) if schema_dir != "-" else None
    runner = SpecRunner(binary)
    for name, docs in load_overlays(pairs).items():
        before = len(failures)
        ctx = Context(name, docs, help_of, schemas, runner)
        check_overlay(ctx)
        warn_placeholders(ctx)
        kinds = sorted({d["kind"] for d in docs})
        print(f"{name}: {len(docs)} objects ({', '.join(kinds)}), "
              f"{len(ctx.daemons)} cohort containers: "
              f"{'ok' if len(failures) == before else 'FAILED'}")


# --------------------------------------------------------------------------
# Mutants: each must make the checks fail with the given words.


def obj(docs, kind, name):
    return find(docs, kind, name)


def cont(docs, kind, name):
    return obj(docs, kind, name)["spec"]["template"]["spec"]["containers"][0]


def set_arg(docs, kind, name, prefix, new):
    c = cont(docs, kind, name)
    args = c["args"]
    i = next(i for i, a in enumerate(args) if a.startswith(prefix))
    if new is None:
        del args[i]
    else:
        args[i] = new


def set_path(root, path, value):
    keys = path.split("/")
    for k in keys[:-1]:
        root = root[int(k)] if isinstance(root, list) else root[k]
    last = keys[-1]
    if isinstance(root, list):
        root[int(last)] = value
    elif value is None:
        del root[last]
    else:
        root[last] = value


def np_rule(docs, name, i):
    return obj(docs, "NetworkPolicy", name)["spec"]["ingress"][i]


def state_on_empty_dir(docs):
    for v in obj(docs, *CO)["spec"]["template"]["spec"]["volumes"]:
        if "persistentVolumeClaim" in v:
            del v["persistentVolumeClaim"]
            v["emptyDir"] = {}


CO, WK, PS = ("Deployment", "cohort-coordinator"), ("Job", "cohort-worker"), \
    ("StatefulSet", "cohort-ps")

MUTANTS = [
    ("an unknown field", "cpu", "schema:",
     lambda d: set_path(obj(d, *CO), "spec/replica", 1)),
    ("a Service in another namespace", "cpu", "not the job's",
     lambda d: set_path(obj(d, "Service", "cohort-coordinator"),
                        "metadata/namespace", "default")),
    ("a misspelt flag", "cpu", "is not a flag of `cohort coordinator`",
     lambda d: set_arg(d, *CO, "--health-listen",
                       "--health-port=0.0.0.0:29401")),
    ("a switch given a value", "cpu", "is a switch",
     lambda d: set_arg(d, *CO, "--tls-client-auth", "--tls-client-auth=yes")),
    ("a flag without its value", "cpu", "--token-file needs =",
     lambda d: set_arg(d, *WK, "--token-file", "--token-file")),
    ("a number flag given text", "cpu", "is not a number",
     lambda d: set_arg(d, *WK, "--connect-timeout", "--connect-timeout=5m")),
    ("an unknown env variable", "cpu", "names no env variable",
     lambda d: set_arg(d, *WK, "--devices", "--devices=$(DEVICES)")),
    ("a command instead of the entrypoint", "cpu", "sets command",
     lambda d: set_path(cont(d, *CO), "command", ["/usr/local/bin/cohort"])),
    ("a daemon listening on loopback", "cpu", "must listen on 0.0.0.0",
     lambda d: set_arg(d, *CO, "--listen", "--listen=127.0.0.1:29400")),
    ("a containerPort that nothing listens on", "cpu", "is no --listen",
     lambda d: set_path(cont(d, *CO), "ports/0/containerPort", 29499)),
    ("no metrics port", "cpu", "no --metrics-listen",
     lambda d: set_arg(d, *PS, "--metrics-listen", None)),
    ("a gRPC probe on the TLS port", "cpu", "only the plaintext",
     lambda d: set_path(cont(d, *CO), "readinessProbe/grpc/port", 29400)),
    ("no liveness probe", "cpu", "no gRPC livenessProbe",
     lambda d: set_path(cont(d, *CO), "livenessProbe", None)),
    ("a tcp probe on a port not served", "cpu", "tcpSocket port",
     lambda d: set_path(cont(d, *PS), "livenessProbe/tcpSocket/port", 29501)),
    ("a Service targetPort naming no port", "cpu", "targetPort is no",
     lambda d: set_path(obj(d, "Service", "cohort-coordinator"),
                        "spec/ports/0/targetPort", "rpc")),
    ("a Service selecting nothing", "cpu", "selects no pod template",
     lambda d: obj(d, "Service", "cohort-coordinator")["spec"][
         "selector"].update({"app.kubernetes.io/component": "coord"})),
    ("a Deployment selector not matching its pods", "cpu",
     "does not select its own pod template",
     lambda d: obj(d, *CO)["spec"]["selector"]["matchLabels"].update(
         {"app.kubernetes.io/component": "x"})),
    ("a PDB selecting nothing", "cpu", "selector selects no pod template",
     lambda d: obj(d, "PodDisruptionBudget", "cohort-worker")["spec"][
         "selector"]["matchLabels"].update({"app.kubernetes.io/component":
                                            "workers"})),
    ("a percentage PDB over Job pods", "cpu", "only an integer minAvailable",
     lambda d: set_path(obj(d, "PodDisruptionBudget", "cohort-worker"),
                        "spec/minAvailable", "50%")),
    ("a NetworkPolicy selecting nothing", "cpu", "podSelector selects no pod",
     lambda d: obj(d, "NetworkPolicy", "cohort-ps")["spec"]["podSelector"][
         "matchLabels"].update({"app.kubernetes.io/component": "shard"})),
    ("workers cut off from each other", "cpu", "blocks all-reduce traffic",
     lambda d: set_path(np_rule(d, "cohort-worker", 0), "ports",
                        [{"protocol": "TCP", "port": 29400}])),
    ("workers cut off from the coordinator", "cpu",
     "blocks it from the coordinator port",
     lambda d: set_path(np_rule(d, "cohort-coordinator", 0), "ports/0/port",
                        29401)),
    ("an ingress rule admitting everybody", "cpu", "without `from`",
     lambda d: set_path(np_rule(d, "cohort-coordinator", 0), "from", None)),
    ("an empty podSelector peer", "cpu", "admits every pod of the namespace",
     lambda d: set_path(np_rule(d, "cohort-coordinator", 0), "from",
                        [{"podSelector": {}}])),
    ("another namespace admitted to the gRPC port", "cpu",
     "beyond the metrics port",
     lambda d: set_path(np_rule(d, "cohort-coordinator", 1), "ports/0/port",
                        29400)),
    ("Prometheus shut out", "cpu", "admits Prometheus",
     lambda d: np_rule(d, "cohort-worker", 1)["ports"][0].update(
         {"port": 9401})),
    ("pods without an isolating policy", "cpu", "no NetworkPolicy isolates",
     lambda d: [set_path(np, "spec/policyTypes", ["Egress"])
                for np in of_kind(d, "NetworkPolicy")]),
    ("a worker dialling a wrong Service port", "cpu", "does not lead to",
     lambda d: set_arg(d, *WK, "--coordinator", "--coordinator=cohort-"
                       "coordinator.$(POD_NAMESPACE).svc:9400")),
    ("a worker dialling no Service", "cpu", "is no Service's DNS name",
     lambda d: set_arg(d, *WK, "--coordinator",
                       "--coordinator=coordinator:29400")),
    ("a worker dialling another namespace", "cpu", "is no Service's DNS name",
     lambda d: set_arg(d, *WK, "--coordinator",
                       "--coordinator=cohort-coordinator.default.svc:29400")),
    ("a worker advertising a wrong host", "cpu", "not the pod's stable DNS",
     lambda d: set_arg(d, *WK, "--host", "--host=cohort-worker-$(JOB_INDEX)"
                       ".cohort-workers.$(POD_NAMESPACE).svc")),
    ("a shard advertising its pod IP", "cpu-ps", "not the pod's stable DNS",
     lambda d: cont(d, *PS)["env"].append({"name": "POD_IP", "valueFrom": {
         "fieldRef": {"fieldPath": "status.podIP"}}})
     or set_arg(d, *PS, "--host", "--host=$(POD_IP)")),
    ("a Job subdomain that is no headless Service", "cpu",
     "names no Service",
     lambda d: set_path(obj(d, *WK), "spec/template/spec/subdomain", "w")),
    ("a headless Service that hides unready pods", "cpu",
     "publishNotReadyAddresses",
     lambda d: set_path(obj(d, "Service", "cohort-ps"),
                        "spec/publishNotReadyAddresses", None)),
    ("a TLS key path the Secret lacks", "cpu", "has no key 'tls.pem'",
     lambda d: set_arg(d, *WK, "--tls-key",
                       "--tls-key=/etc/cohort/security/tls.pem")),
    ("a token file on no volume", "cpu", "is on no volume",
     lambda d: set_arg(d, *PS, "--token-file", "--token-file=/token")),
    ("coordinator state on an emptyDir", "cpu", "not a PersistentVolumeClaim",
     lambda d: state_on_empty_dir(d)),
    ("a writable root file system", "cpu", "root file system is writable",
     lambda d: set_path(cont(d, *WK), "securityContext/"
                        "readOnlyRootFilesystem", False)),
    ("checkpoints on no worker volume", "cpu", "job spec checkpoint.dir",
     lambda d: set_path(cont(d, *WK), "volumeMounts/1/mountPath",
                        "/var/lib/ckpt")),
    ("a spec that does not parse", "cpu", "does not train",
     lambda d: obj(d, "ConfigMap", "cohort-job")["data"].update(
         {"job.textproto": "batch_size: -4\n"})),
    ("fewer workers than the spec wants", "cpu", "the job spec wants 2..2",
     lambda d: set_path(obj(d, *WK), "spec/parallelism", 1)),
    ("shards not matching ps.shards", "cpu-ps", "runs 3 shards",
     lambda d: set_path(obj(d, *PS), "spec/replicas", 3)),
    ("--state-dir with a parameter-server job", "cpu-ps",
     "the coordinator refuses it",
     lambda d: cont(d, *CO)["args"].append("--state-dir=/var/lib/cohort/s")),
    ("a coordinator without --state-dir", "cpu", "no --state-dir",
     lambda d: set_arg(d, *CO, "--state-dir", None)),
    ("two coordinators", "cpu", "exactly 1 replica",
     lambda d: set_path(obj(d, *CO), "spec/replicas", 2)),
    ("a rolling coordinator", "cpu", "strategy is not Recreate",
     lambda d: set_path(obj(d, *CO), "spec/strategy/type", "RollingUpdate")),
    ("no time for a final checkpoint", "cpu", "too short for a final",
     lambda d: set_path(obj(d, *WK), "spec/template/spec/"
                        "terminationGracePeriodSeconds", 30)),
    ("a wrong scrape port", "cpu", "prometheus.io/port",
     lambda d: obj(d, *PS)["spec"]["template"]["metadata"]["annotations"]
     .update({"prometheus.io/port": "29500"})),
    ("GPU workers without GPUs", "gpu", "requests no nvidia.com/gpu",
     lambda d: cont(d, *WK)["resources"]["limits"].pop("nvidia.com/gpu")),
    ("GPU workers on CPU devices", "gpu", "not gpu:",
     lambda d: [e.update({"value": "cpu:2"}) for e in cont(d, *WK)["env"]
                if e["name"] == "COHORT_DEVICES"]),
    ("the CPU image on GPU workers", "gpu", "runs the CUDA",
     lambda d: set_path(cont(d, *WK), "image", "cohort:cpu")),
    ("a CPU worker asking for a GPU", "cpu", "requests 1 nvidia.com/gpu",
     lambda d: cont(d, *WK)["resources"]["limits"].update(
         {"nvidia.com/gpu": 1})),
]


def mutants_main(binary, pairs):
    global failures
    overlays = load_overlays(pairs)
    help_of, runner = HelpCache(binary), SpecRunner(binary)
    # The unmutated overlays must pass (but for flags this binary lacks).
    baseline = {}
    for name, docs in overlays.items():
        baseline[name] = set(quiet_check(name, docs, help_of, None, runner))
    schemas = None
    caught = skipped = 0
    for what, overlay, words, mutate in MUTANTS:
        if overlay not in overlays:
            fail(f"mutant {what!r}: no overlay {overlay}")
            continue
        docs = copy.deepcopy(overlays[overlay])
        mutate(docs)
        if words == "schema:" and schemas is None:
            schemas = SCHEMA_DIR and SchemaCache(SCHEMA_DIR)
            if not schemas:
                print(f"mutant {what!r}: skipped (no schemas)")
                skipped += 1
                continue
        found = quiet_check(overlay, docs, help_of,
                            schemas if words == "schema:" else None, runner)
        new = [f for f in found if f not in baseline[overlay]]
        if any(words in f for f in new):
            caught += 1
            if os.environ.get("DEPLOY_CHECK_VERBOSE"):
                print(f"caught {what!r}: {[f for f in new if words in f][0]}")
        else:
            fail(f"mutant {what!r} ({overlay}) was not caught; new "
                 f"failures: {new or 'none'}")
    print(f"mutants: {caught} of {len(MUTANTS)} caught, {skipped} skipped")


def quiet_check(overlay, docs, help_of, schemas, runner):
    """The failures the checks find in `docs`, printing nothing."""
    global failures
    saved, failures = failures, []
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            check_overlay(Context(overlay, docs, help_of, schemas, runner))
        finally:
            sys.stdout = stdout
    found, failures = failures, saved
    return found


SCHEMA_DIR = None


# --------------------------------------------------------------------------
# Smoke: the overlay's processes, locally.


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Smoke:
    """Runs one overlay's pods as local processes, rewriting what only a
    cluster has: listen addresses (loopback, free ports), Service names (the
    coordinator's local address), pod DNS names (127.0.0.1) and volumes
    (directories under `tmp`); the Secret is gen-secret.sh's."""

    def __init__(self, binary, probe, name, docs, tmp, secret):
        self.binary, self.probe, self.name = binary, probe, name
        self.docs, self.tmp = docs, tmp
        self.help_of = HelpCache(binary)
        self.daemons = daemons_of(docs, self.help_of)
        self.procs = []
        self.secret = secret  # {key: bytes}
        self.ports = {}
        self.claims = {}
        self.checkpoints = None  # the spec's checkpoint.dir, moved here

    def volume_dir(self, d, instance, volume):
        """A directory standing in for one volume of one pod."""
        if "persistentVolumeClaim" in volume:
            key = volume["persistentVolumeClaim"]["claimName"]
            path = self.claims.setdefault(
                key, tempfile.mkdtemp(prefix="pvc-", dir=self.tmp))
            return path
        path = tempfile.mkdtemp(prefix=f"{instance}-{volume['name']}-",
                                dir=self.tmp)
        if "configMap" in volume:
            cm = find(self.docs, "ConfigMap", volume["configMap"]["name"])
            for key, text in (cm.get("data") or {}).items():
                with open(os.path.join(path, key), "w") as f:
                    f.write(text)
        elif "secret" in volume:
            for key, data in self.secret.items():
                with open(os.path.join(path, key), "wb") as f:
                    f.write(data)
        return path

    def mounts(self, d, instance):
        """[(mountPath, local directory)], longest mount path first."""
        out = []
        for m in d.container.get("volumeMounts") or []:
            volume = d.volume(m["name"])
            out.append((m["mountPath"].rstrip("/"),
                        self.volume_dir(d, instance, volume)))
        return sorted(out, key=lambda x: -len(x[0]))

    def local_path(self, mounts, path):
        for root, local in mounts:
            if path == root or path.startswith(root + "/"):
                return local + path[len(root):]
        return path

    def args(self, d, instance, index, mounts):
        out = [d.command]
        for name, value in d.flags.items():
            if name not in d.help:
                print(f"smoke {self.name}: {instance}: leaving out --{name}, "
                      f"which this cohort lacks (reported above)")
                continue
            if value is None:
                out.append(f"--{name}")
                continue
            value = value.replace("{pod-name}", instance).replace(
                "{index}", str(index))
            out.append(f"--{name}={self.local_value(d, name, value, mounts)}")
        return out

    def local_value(self, d, name, value, mounts):
        if name in LISTEN_FLAGS:
            if d.command == "coordinator":
                port = int(value.rsplit(":", 1)[1])
                self.ports.setdefault(port, free_port())
                return f"127.0.0.1:{self.ports[port]}"
            return "127.0.0.1:0"
        if name == "host":
            return "127.0.0.1"
        if name == "coordinator":
            return self.coordinator_address(d, value)
        if value.startswith("/"):
            return self.local_path(mounts, value)
        return value

    def coordinator_address(self, d, value):
        """The local address behind the Service that `value` names."""
        host, _, port = value.rpartition(":")
        coordinator = next(x for x in self.daemons
                           if x.command == "coordinator")
        for svc in of_kind(self.docs, "Service"):
            if host in service_names(svc, d.namespace):
                for p in svc["spec"]["ports"]:
                    if p["port"] == int(port):
                        target = coordinator.container_port(
                            p.get("targetPort", p["port"]))
                        return f"127.0.0.1:{self.ports.get(target, 1)}"
        return "127.0.0.1:1"  # nowhere: the worker fails, and says so

    def start(self, d, instance, index):
        mounts = self.mounts(d, instance)
        args = self.args(d, instance, index, mounts)
        if d.command == "coordinator":
            job = next(a for a in args if a.startswith("--job="))
            self.rewrite_spec(job.split("=", 1)[1])
        log = open(os.path.join(self.tmp, instance + ".log"), "w")
        proc = subprocess.Popen([self.binary] + args, stdout=log,
                                stderr=subprocess.STDOUT, cwd=self.tmp)
        self.procs.append((instance, proc, args))
        return proc, args

    def rewrite_spec(self, spec):
        """Moves the spec's paths on the workers' volumes (checkpoint.dir)
        to local directories: one set for all workers, as the spec is
        shared (only rank 0 writes checkpoints)."""
        worker = next((x for x in self.daemons if x.command == "worker"), None)
        if worker is None:
            return
        with open(spec) as f:
            text = f.read()
        for root, local in self.mounts(worker, "spec"):
            text = text.replace(f'"{root}', f'"{local}')
        with open(spec, "w") as f:
            f.write(text)
        self.checkpoints = field(textproto(text), "checkpoint.dir")

    def health(self, address):
        out = run(["/usr/bin/python3", self.probe, "health", address])
        return out.stdout.strip()

    def tail(self, instance):
        with open(os.path.join(self.tmp, instance + ".log")) as f:
            return " | ".join(f.read().strip().splitlines()[-3:])

    def run(self):
        coordinator = next(d for d in self.daemons
                           if d.command == "coordinator")
        proc, cargs = self.start(coordinator, "coordinator", 0)
        if not self.wait_serving(coordinator, proc):
            return
        started = {"ps": [], "worker": []}
        for d in self.daemons:
            for i in range(replicas_of(d) if d.command in started else 0):
                instance = f"{d.name}-{i}"
                started[d.command].append(
                    (instance, self.start(d, instance, i)[0]))
        # Workers end the job; shards exit when they see it ended, while
        # the coordinator still serves (--serve-after-done).
        self.wait_all(started["worker"], 120)
        self.wait_all(started["ps"], 30)
        self.finish(cargs)
        self.check_checkpoints()

    def check_checkpoints(self):
        """The spec's checkpoint directory, on the workers' volume, got
        checkpoints (the run is longer than checkpoint.every_steps)."""
        if not self.checkpoints:
            return
        found = os.listdir(self.checkpoints) \
            if os.path.isdir(self.checkpoints) else []
        if not found:
            fail(f"smoke {self.name}: no checkpoint in checkpoint.dir")
        else:
            print(f"smoke {self.name}: checkpoint.dir holds {sorted(found)}")

    def wait_serving(self, coordinator, proc):
        """Polls the health port as kubelet's readiness probe would."""
        address = "127.0.0.1:%s" % self.ports.get(
            coordinator.port_of("health-listen"))
        deadline, state = time.time() + 20, ""
        while time.time() < deadline and proc.poll() is None:
            state = self.health(address)
            if state == "SERVING":
                print(f"smoke {self.name}: the readiness probe's port "
                      f"answers SERVING")
                return True
            time.sleep(0.2)
        fail(f"smoke {self.name}: the coordinator's health port (readiness "
             f"probe) answers {state!r}: {self.tail('coordinator')}")
        return False

    def wait_all(self, procs, seconds):
        deadline = time.time() + seconds
        for instance, proc in procs:
            try:
                code = proc.wait(timeout=max(1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                fail(f"smoke {self.name}: {instance} still runs after "
                     f"{seconds} s: {self.tail(instance)}")
                continue
            if code != 0:
                fail(f"smoke {self.name}: {instance} exited {code}: "
                     f"{self.tail(instance)}")
            else:
                print(f"smoke {self.name}: {instance} exited 0")

    def client_flags(self, cargs):
        """The coordinator's address and security flags, as a client's."""
        keep = ("--token-file", "--tls-cert", "--tls-key", "--tls-ca")
        flags = [a for a in cargs if a.startswith(keep)]
        listen = next(a for a in cargs if a.startswith("--listen="))
        return [f"--coordinator={listen.split('=', 1)[1]}"] + flags

    def job_state(self, client):
        out = run([self.binary, "status"] + client + ["--json"])
        try:
            return json.loads(out.stdout).get("state"), out.stderr.strip()
        except ValueError:
            return None, f"exit {out.returncode}: {out.stderr.strip()}"

    def finish(self, cargs):
        """Queries the finished job, stops the coordinator, reads the
        report."""
        client = self.client_flags(cargs)
        state, err = self.job_state(client)
        if state != "SUCCEEDED":
            fail(f"smoke {self.name}: cohort status says {state!r} {err}")
        else:
            print(f"smoke {self.name}: cohort status: SUCCEEDED")
        run([self.binary, "stop"] + client)
        try:
            code = self.procs[0][1].wait(timeout=20)
        except subprocess.TimeoutExpired:
            fail(f"smoke {self.name}: the coordinator ignores cohort stop")
            return
        report = next((a.split("=", 1)[1] for a in cargs
                       if a.startswith("--report=")), None)
        if code != 0:
            fail(f"smoke {self.name}: the coordinator exited {code}: "
                 f"{self.tail('coordinator')}")
        elif report:
            with open(report) as f:
                got = json.load(f)
            print(f"smoke {self.name}: report: state {got.get('state')}, "
                  f"world size {got.get('world_size')}, steps "
                  f"{got.get('steps')}, test accuracy "
                  f"{got.get('test_accuracy')}")

    def kill_all(self):
        for _, proc, _ in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()


def generated_secret(binary, gen_secret, name, docs, tmp):
    """{key: bytes} of the Secret gen-secret.sh makes for the overlay's
    namespace, after checking it against the manifests' Secret and names."""
    import base64
    ns = of_kind(docs, "Namespace")[0]["metadata"]["name"]
    out = run(["bash", gen_secret, ns])
    if out.returncode != 0:
        fail(f"smoke {name}: {gen_secret} {ns}: {out.stderr.strip()}")
        return None
    made = yaml.safe_load(out.stdout)
    data = {k: base64.b64decode(v) for k, v in made["data"].items()}
    placeholder = find(docs, "Secret", made["metadata"]["name"])
    want = set((placeholder or {}).get("stringData") or {}) | set(
        (placeholder or {}).get("data") or {})
    if set(data) != want:
        fail(f"smoke {name}: gen-secret.sh makes keys {sorted(data)}, the "
             f"manifests' Secret has {sorted(want)}")
    cert = os.path.join(tmp, "tls.crt")
    with open(cert, "wb") as f:
        f.write(data.get("tls.crt", b""))
    check_certificate_names(name, cert, daemons_of(docs, HelpCache(binary)))
    return data


def check_certificate_names(name, cert, daemons):
    """Every name a process dials over TLS is in the certificate."""
    out = run(["openssl", "x509", "-in", cert, "-noout", "-ext",
               "subjectAltName"])
    sans = re.findall(r"DNS:([^,\s]+)", out.stdout)
    dialled = set()
    for d in daemons:
        if d.flags.get("coordinator"):
            dialled.add(d.flags["coordinator"].rpartition(":")[0])
        if d.command == "ps" and d.flags.get("host"):
            dialled.add(d.flags["host"].replace("{pod-name}", f"{d.name}-0"))
    for host in sorted(dialled):
        if not any(san == host or (san.startswith("*.") and
                                   host.split(".", 1)[-1] == san[2:])
                   for san in sans):
            fail(f"smoke {name}: gen-secret.sh's certificate does not name "
                 f"{host} (it names {', '.join(sans)})")
        else:
            print(f"smoke {name}: the certificate names {host}")


def smoke_main(binary, gen_secret, probe, pair):
    name, docs = next(iter(load_overlays([pair]).items()))
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
        secret = generated_secret(binary, gen_secret, name, docs, tmp)
        if secret is None:
            return
        smoke = Smoke(binary, probe, name, docs, tmp, secret)
        start = time.time()
        try:
            smoke.run()
        finally:
            smoke.kill_all()
        print(f"smoke {name}: {time.time() - start:.1f} s")


def main(argv):
    global SCHEMA_DIR
    mode = argv[1] if len(argv) > 1 else ""
    if len(argv) > 2:
        argv[2] = os.path.abspath(argv[2])  # the binary; smoke changes cwd
    if mode == "image" and len(argv) == 5:
        image_main(*argv[2:])
    elif mode == "k8s" and len(argv) >= 5:
        k8s_main(argv[2], argv[3], argv[4:])
    elif mode == "mutants" and len(argv) >= 5:
        SCHEMA_DIR = None if argv[3] == "-" else argv[3]
        mutants_main(argv[2], argv[4:])
    elif mode == "smoke" and len(argv) == 6:
        smoke_main(*argv[2:])
    else:
        print(__doc__)
        return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
