"""Compares cohort's compressed gradient buckets (worker/comm/powersgd_codec,
worker/comm/half_codec) with PyTorch 1.13's DDP communication hooks
powerSGD_hook, fp16_compress_hook and bf16_compress_hook, run by DDP on a
one-process Gloo group (whose all-reduce is the identity, as cohort's
one-rank world in compression_dump).

usage: compression_torch.py DUMP   (DUMP: worker/comm/compression_dump)

The model's parameters have the gradients given for each step (loss =
sum(param * G)). Both sides start PowerSGD from the same Q per tensor
(PyTorch's state.q_memory_dict filled before the first compressed step, so
the hook only orthogonalizes it, as cohort's SetQs). Compared per tensor and
step: param.grad after backward with cohort's buffer, and PowerSGD's
state.error_dict with cohort's error(). PowerSGD's compressed steps pass
within 1e-5 relative: the largest difference of a tensor's decompressed
gradient or error, divided by the largest magnitude of what was compressed
(that tensor's gradient plus the error carried in; absolute where it is
all zeros). PyTorch orthogonalizes with Householder QR at ranks above 2
and cohort with Gram-Schmidt: column signs may differ, products and errors
only by rounding. Every other value (warm-up steps, the error before the
first compressed step, FP16 and BF16: one rounding of the same floats on
both sides) must be equal bit for bit. Gloo in PyTorch 1.13 cannot sum
bfloat16, so bf16_compress_hook runs with its all-reduce replaced by the
one-rank identity (OneRankAllReduce). Exits 1 on any mismatch; skips
without torch or its Gloo backend.
"""
import os
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("SKIP: python3-torch is not installed")
    sys.exit(0)

import numpy as np
import torch.distributed as dist

if not dist.is_available() or not dist.is_gloo_available():
    print("SKIP: this torch has no Gloo backend for torch.distributed")
    sys.exit(0)

from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
from torch.nn.parallel import DistributedDataParallel

TOLERANCE = 1e-5
# Model order, which is also cohort's flat-buffer order: conv-like 4-D
# weights, linear weights, biases, a 3 x 5 matrix never worth compressing,
# and two 32 x 64 weights with other shapes between them, so that grouping
# by shape reorders the factors. The last number scales the gradient (a
# tensor of 1e-5 reaches FP16's subnormals).
PARAMS = [("conv1.weight", (8, 3, 3, 3), 1.0),
          ("conv1.bias", (8,), 0.5),
          ("fc1.weight", (32, 64), 0.02),
          ("fc1.bias", (32,), 1e-5),
          ("conv2.weight", (16, 8, 3, 3), 3.0),
          ("small.weight", (3, 5), 1.0),
          ("tall.weight", (40, 6), 0.1),
          ("fc2.weight", (32, 64), 0.05),
          ("fc2.bias", (32,), 100.0)]
NUMELS = [int(np.prod(shape)) for _, shape, _ in PARAMS]
OFFSETS = [int(v) for v in np.cumsum([0] + NUMELS)[:-1]]
TOTAL = sum(NUMELS)
# (kind, rank, warm-up steps, min_compression_rate, steps, cohort's
# bucket elements: 0 = one bucket). Rank 4 takes PyTorch's QR path, rank 1
# and 2 its Gram-Schmidt; at rank 2 and rate 4 conv1.weight stays whole.
CASES = [("powersgd", 1, 2, 2.0, 6, 0),
         ("powersgd", 4, 3, 1.2, 7, 0),
         ("powersgd", 2, 2, 4.0, 5, 0),
         ("powersgd", 1, 2, 2.0, 5, 1500),  # cohort in 3 buckets
         ("fp16", 1, 0, 0.0, 3, 0),
         ("bf16", 1, 0, 0.0, 3, 0)]


def make_grads(steps):
    """Per step, per parameter: a slowly turning rank-2 part (so that the
    warm-started power iteration has something to find) plus noise."""
    gen = torch.Generator().manual_seed(34)
    grads = []
    bases = []
    for _, shape, _ in PARAMS:
        n, m = shape[0], int(np.prod(shape)) // shape[0]
        bases.append((torch.randn(n, 2, generator=gen),
                      torch.randn(m, 2, generator=gen)))
    for step in range(steps):
        row = []
        for (_, shape, scale), (u, v) in zip(PARAMS, bases):
            weights = torch.tensor([3.0 + step, 1.5 - 0.2 * step])
            low = (u * weights) @ v.t()
            noise = torch.randn(low.shape, generator=gen)
            row.append(((low + noise) * scale).reshape(shape))
        grads.append(row)
    return grads


def compressed(rank, rate):
    """Per parameter: (rows, cols, r) if PyTorch's hook compresses it."""
    out = []
    for _, shape, _ in PARAMS:
        n = shape[0]
        m = int(np.prod(shape)) // n
        r = min(n, m, rank)
        out.append((n, m, r) if psgd._should_compress(n, m, r, rate)[0]
                   else None)
    return out


def grouped_qs(order, mats, q0):
    """The Qs of the parameters in `order`, grouped by shape in order of
    first appearance (both PyTorch's and cohort's layout)."""
    groups = {}
    for i in order:
        if mats[i] is not None:
            groups.setdefault(mats[i][:2], []).append(i)
    return [q0[i].flatten() for ids in groups.values() for i in ids]


def cohort_buckets(bucket_elems):
    """Parameter indices per bucket as compression_dump cuts them (a
    BucketReducer with a boundary per tensor), bucket 0 first."""
    if bucket_elems == 0:
        return [list(range(len(PARAMS)))]
    buckets, end = [], len(PARAMS)
    for i in range(len(PARAMS) - 1, 0, -1):
        if OFFSETS[end - 1] + NUMELS[end - 1] - OFFSETS[i] >= bucket_elems:
            buckets.append(list(range(i, end)))
            end = i
    return buckets + [list(range(0, end))]


class OneRankAllReduce:
    """torch.distributed as default_hooks sees it, but with an all-reduce
    that returns its input: Gloo in PyTorch 1.13 has no bfloat16 sum
    ("Invalid scalar type"), and over one rank the sum is the identity, so
    the rest of bf16_compress_hook runs as it is."""

    class _Work:
        def __init__(self, tensor):
            self._future = torch.futures.Future()
            self._future.set_result([tensor])

        def get_future(self):
            return self._future

    def __getattr__(self, name):
        return getattr(dist, name)

    def all_reduce(self, tensor, group=None, async_op=False):
        assert group is None or group.size() == 1
        return self._Work(tensor)


class GradModule(torch.nn.Module):
    """Parameters whose gradient is the tensor passed in: sum(p * g)."""

    def __init__(self):
        super().__init__()
        self.params = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.zeros(shape)) for _, shape, _ in PARAMS])

    def forward(self, grads):
        return sum((p * g).sum() for p, g in zip(self.params, grads))


def run_torch(case, grads, q0, mats):
    """Per step: the parameters' gradients and (PowerSGD) errors after DDP's
    backward through the real hook, both in model order."""
    kind, rank, warmup, rate, steps, _ = case
    module = GradModule()
    ddp = DistributedDataParallel(module, bucket_cap_mb=64)
    index_of = {p.data_ptr(): i for i, p in enumerate(module.params)}
    seen = []  # per hook call: (bucket index, parameter indices)
    if kind == "powersgd":
        state = psgd.PowerSGDState(
            process_group=None, matrix_approximation_rank=rank,
            start_powerSGD_iter=warmup, min_compression_rate=rate,
            use_error_feedback=True, warm_start=True)
        inner = psgd.powerSGD_hook
    else:
        state = None
        inner = {"fp16": default_hooks.fp16_compress_hook,
                 "bf16": default_hooks.bf16_compress_hook}[kind]

    def hook(hook_state, bucket):
        seen.append((bucket.index(),
                     [index_of[p.data_ptr()] for p in bucket.parameters()]))
        return inner(hook_state, bucket)

    ddp.register_comm_hook(state, hook)
    default_hooks.dist = OneRankAllReduce() if kind == "bf16" else dist
    results = []
    for step in range(steps):
        if kind == "powersgd" and step == warmup:
            assert state.iter == warmup and 0 not in state.p_memory_dict
            layout = seen[-1][1]  # stable since DDP's rebuild after step 0
            qs = grouped_qs(layout, mats, q0)
            state.q_memory_dict[0] = torch.cat(qs).contiguous()
            state.p_memory_dict[0] = torch.zeros(
                sum(m[0] * m[2] for m in mats if m is not None))
        module.zero_grad(set_to_none=True)
        ddp(grads[step]).backward()
        assert len(seen) == step + 1 and seen[-1][0] == 0, \
            "PyTorch used more than one bucket"
        assert kind != "powersgd" or step < warmup or seen[-1][1] == layout
        errors = None
        if kind == "powersgd" and step >= warmup:
            flat = state.error_dict[0]
            order, errors, at = seen[-1][1], [None] * len(PARAMS), 0
            for i in order:
                errors[i] = flat[at:at + NUMELS[i]].reshape(PARAMS[i][1])
                at += NUMELS[i]
        results.append(([p.grad.clone() for p in module.params], errors))
    default_hooks.dist = dist
    return results


def run_cohort(dump, case, grads, q0, mats, workdir):
    """Per step: cohort's buffer and (PowerSGD) error, both in model order."""
    kind, rank, warmup, rate, steps, bucket_elems = case
    with open(os.path.join(workdir, "shapes.txt"), "w") as f:
        f.write("".join(" ".join(map(str, s)) + "\n" for _, s, _ in PARAMS))
    flat = torch.cat([g.flatten() for row in grads for g in row])
    flat.numpy().astype("<f4").tofile(os.path.join(workdir, "grads.f32"))
    q0_path = os.path.join(workdir, "q0.f32")
    if os.path.exists(q0_path):
        os.remove(q0_path)
    if kind == "powersgd":
        qs = [q for bucket in cohort_buckets(bucket_elems)
              for q in grouped_qs(bucket, mats, q0)]
        torch.cat(qs).numpy().astype("<f4").tofile(q0_path)
    flags = [f"--kind={kind}", f"--steps={steps}",
             f"--bucket-elems={bucket_elems}"]
    if kind == "powersgd":
        flags += [f"--rank={rank}", f"--warmup={warmup}", f"--min-rate={rate}"]
    subprocess.run([dump] + flags + [workdir], check=True)
    out = torch.from_numpy(
        np.fromfile(os.path.join(workdir, "out.f32"), dtype="<f4"))
    per_step = TOTAL * (2 if kind == "powersgd" else 1)
    assert out.numel() == steps * per_step, "out.f32 has the wrong length"

    def split(values):
        return [values[o:o + n].reshape(s)
                for o, n, (_, s, _) in zip(OFFSETS, NUMELS, PARAMS)]
    return [(split(out[k * per_step:k * per_step + TOTAL]),
             split(out[k * per_step + TOTAL:(k + 1) * per_step])
             if kind == "powersgd" else None) for k in range(steps)]


def difference(ours, theirs, scale):
    """Largest difference relative to `scale` (absolute where it is 0)."""
    worst = (ours - theirs).abs().max().item()
    return worst / scale if scale > 0 else worst


def scales(kind, warmup, theirs, grads):
    """Per step and parameter, what differences are measured against: the
    largest magnitude of what PowerSGD compressed (the gradient plus the
    error carried in), or of PyTorch's result for the other kinds. The
    error is that input less its approximation, so its rounding follows
    the input's magnitude, not its own (which is smaller)."""
    out = []
    for step, (their_g, _) in enumerate(theirs):
        if kind != "powersgd" or step < warmup:
            out.append([g.abs().max().item() for g in their_g])
            continue
        carried = theirs[step - 1][1] if step > warmup else None
        out.append([(g + carried[i] if carried else g).abs().max().item()
                    for i, g in enumerate(grads[step])])
    return out


def compare(case, ours, theirs, grads, mats):
    """Failures of one case, printed; returns their number and the largest
    difference."""
    kind, _, warmup, _, _, _ = case
    failed, worst = 0, 0.0
    zeros = [torch.zeros(s) for _, s, _ in PARAMS]
    per_step = scales(kind, warmup, theirs, grads)
    for step, ((our_g, our_e), (their_g, their_e)) in enumerate(
            zip(ours, theirs)):
        scale = per_step[step]
        pairs = [(f"grad {PARAMS[i][0]}", our_g[i], their_g[i], scale[i])
                 for i in range(len(PARAMS))]
        if kind == "powersgd":
            pairs += [(f"error {PARAMS[i][0]}", our_e[i],
                       their_e[i] if their_e else zeros[i], scale[i])
                      for i in range(len(PARAMS))]
        for what, a, b, s in pairs:
            d = difference(a, b, s)
            worst = max(worst, d)
            exact = kind != "powersgd" or step < warmup
            if (d != 0) if exact else not d <= TOLERANCE:
                failed += 1
                print(f"FAIL: {kind} step {step} {what}: off by {d:.2e} "
                      f"(allowed {0 if exact else TOLERANCE})")
        # Compression must change what it compresses, or a codec passing
        # gradients through would pass too.
        for i, g in enumerate(grads[step]):
            lossy = kind != "powersgd" or (step >= warmup and mats[i])
            if lossy and difference(g, their_g[i], scale[i]) <= TOLERANCE:
                failed += 1
                print(f"FAIL: {kind} step {step} {PARAMS[i][0]}: PyTorch's "
                      "hook left it (nearly) unchanged; the case tests "
                      "nothing")
    return failed, worst


def check_bad_input(dump, workdir):
    """Bad flags and files: exit 2 with one line naming them."""
    failed = 0
    with open(os.path.join(workdir, "q0.f32"), "wb") as f:
        f.write(b"\0" * 12)
    for args, name in [(["--kind=zip"], "--kind"),
                       (["--kind=powersgd", "--rank=0"], "--rank"),
                       (["--kind=fp16", "--steps=99"], "grads.f32"),
                       (["--kind=powersgd", "--warmup=0"], "q0.f32")]:
        run = subprocess.run([dump] + args + [workdir], capture_output=True,
                             text=True)
        lines = run.stderr.strip().splitlines()
        ok = run.returncode == 2 and len(lines) == 1 and name in lines[0]
        failed += not ok
        print(f"{'ok' if ok else 'FAIL'}: {' '.join(args)}: exit "
              f"{run.returncode}, {run.stderr.strip()!r}")
    return failed


def main():
    dump = sys.argv[1]
    failed = 0
    with tempfile.TemporaryDirectory() as workdir:
        dist.init_process_group(
            "gloo", init_method=f"file://{workdir}/store", world_size=1,
            rank=0)
        gen = torch.Generator().manual_seed(1)
        for case in CASES:
            kind, rank, warmup, rate, steps, bucket_elems = case
            grads = make_grads(steps)
            mats = compressed(rank, rate)
            q0 = [torch.randn(m[1], m[2], generator=gen) if m else None
                  for m in mats]
            theirs = run_torch(case, grads, q0, mats)
            ours = run_cohort(dump, case, grads, q0, mats, workdir)
            bad, worst = compare(case, ours, theirs, grads, mats)
            failed += bad
            whole = [PARAMS[i][0] for i, m in enumerate(mats)
                     if m is None and len(PARAMS[i][1]) > 1]
            what = (f"rank {rank}, warm-up {warmup}, rate {rate}, "
                    f"{len(cohort_buckets(bucket_elems))} cohort bucket(s), "
                    f"whole: {', '.join(whole)}"
                    if kind == "powersgd" else "one bucket" +
                    (", the hook's all-reduce the one-rank identity"
                     if kind == "bf16" else ""))
            print(f"{'ok' if not bad else 'FAIL'}: {kind} ({what}), {steps} "
                  f"steps: largest relative difference {worst:.1e}")
        failed += check_bad_input(dump, workdir)
        dist.destroy_process_group()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
