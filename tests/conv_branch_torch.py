"""Checks cohort's grouped, depthwise and dilated convolutions and branch
blocks (CONCAT, SUM and MUL, nested; squeeze-and-excitation) against
PyTorch 1.13 in float64: the
forward output, the input gradient and every parameter gradient of one
training-mode step on random inputs, parameters and output gradients.

usage: conv_branch_torch.py DUMP   (DUMP: tests/conv_branch_dump)
Exits 1 on any value off by more than 1e-5 relative to the largest
magnitude of that tensor.
"""
import subprocess
import sys

try:
    import torch
    from torch import nn
except ImportError:
    print("SKIP: python3-torch is not installed")
    sys.exit(0)

torch.set_default_dtype(torch.float64)
torch.manual_seed(20)


class Branch(nn.Module):
    """A branch block as worker/layers/branch.h computes it."""

    def __init__(self, paths, combine):
        super().__init__()
        self.paths = nn.ModuleList(nn.Sequential(*p) for p in paths)
        self.combine = combine

    def forward(self, x):
        outs = [p(x) for p in self.paths]
        if self.combine == "sum":
            return sum(outs[1:], outs[0])
        if self.combine == "mul":
            # torch broadcasts a [N, C, 1, 1] gate over [N, C, H, W].
            y = outs[0]
            for o in outs[1:]:
                y = y * o
            return y
        return torch.cat(outs, dim=1)


def inverted_residual(c, expand):
    """MobileNetV2's block (stride 1): expand, depthwise 3x3, project."""
    e = c * expand
    spec = ("branch { combine: SUM paths { layers { conv2d { out_channels: %d "
            "kernel: 1 no_bias: true } } layers { batchnorm2d {} } layers { "
            "relu {} } layers { conv2d { out_channels: %d kernel: 3 padding: 1 "
            "groups: %d no_bias: true } } layers { batchnorm2d {} } layers { "
            "relu {} } layers { conv2d { out_channels: %d kernel: 1 no_bias: "
            "true } } layers { batchnorm2d {} } } paths {} }" % (e, e, e, c))
    module = Branch([[nn.Conv2d(c, e, 1, bias=False), nn.BatchNorm2d(e),
                      nn.ReLU(), nn.Conv2d(e, e, 3, padding=1, groups=e,
                                           bias=False),
                      nn.BatchNorm2d(e), nn.ReLU(),
                      nn.Conv2d(e, c, 1, bias=False), nn.BatchNorm2d(c)],
                     []], "sum")
    return spec, module


def conv(dims, spec, cin, cout, k, stride=1, padding=0, groups=1, dilation=1):
    text = "conv%dd { out_channels: %d kernel: %d %s }" % (
        dims, cout, k, spec)
    cls = nn.Conv1d if dims == 1 else nn.Conv2d
    return text, cls(cin, cout, k, stride, padding, dilation, groups)


inv_spec, inv_module = inverted_residual(3, 4)
nested_inner = ("branch { combine: CONCAT paths { layers { conv2d { "
                "out_channels: 2 kernel: 1 } } } paths { layers { conv2d { "
                "out_channels: 4 kernel: 3 padding: 2 dilation: 2 groups: 2 "
                "} } layers { relu {} } } paths {} }")
nested_spec = ("branch { combine: SUM paths { layers { %s } layers { conv2d { "
               "out_channels: 5 kernel: 1 } } } paths { layers { conv2d { "
               "out_channels: 5 kernel: 3 padding: 1 groups: 1 } } } }" %
               nested_inner)
nested_module = Branch([
    [Branch([[nn.Conv2d(4, 2, 1)],
             [nn.Conv2d(4, 4, 3, padding=2, dilation=2, groups=2), nn.ReLU()],
             []], "concat"),
     nn.Conv2d(10, 5, 1)],
    [nn.Conv2d(4, 5, 3, padding=1)]], "sum")



def se_gate(c, hw, squeeze):
    """Squeeze-and-excitation's gate: [C, H, W] -> [C, 1, 1] in (0, 1)."""
    spec = ("paths { layers { avgpool2d { kernel: %d } } layers { conv2d { "
            "out_channels: %d kernel: 1 } } layers { relu {} } layers { "
            "conv2d { out_channels: %d kernel: 1 } } layers { sigmoid {} } }"
            % (hw, squeeze, c))
    return spec, [nn.AvgPool2d(hw), nn.Conv2d(c, squeeze, 1), nn.ReLU(),
                  nn.Conv2d(squeeze, c, 1), nn.Sigmoid()]


se_spec, se_path = se_gate(8, 6, 2)
gate_spec, gate_path = se_gate(4, 5, 1)

# (name, layer spec, per-sample input shape, batch, torch module)
CASES = [
    ("depthwise 3x3", *conv(2, "padding: 1 groups: 8", 8, 8, 3, 1, 1, 8),
     (8, 9, 9), 3),
    ("depthwise x2 stride 2", *conv(2, "stride: 2 padding: 1 groups: 4",
                                    4, 8, 3, 2, 1, 4), (4, 10, 9), 2),
    ("depthwise 5x5 dilated", *conv(2, "padding: 4 groups: 3 dilation: 2",
                                    3, 3, 5, 1, 4, 3, 2), (3, 12, 12), 2),
    ("grouped 3 groups", *conv(2, "padding: 1 groups: 3", 6, 9, 3, 1, 1, 3),
     (6, 7, 8), 2),
    ("grouped stride 2 dilated", *conv(2, "stride: 2 padding: 2 groups: 2 "
                                       "dilation: 2", 4, 6, 3, 2, 2, 2, 2),
     (4, 11, 11), 2),
    ("dilated", *conv(2, "padding: 3 dilation: 3", 3, 5, 3, 1, 3, 1, 3),
     (3, 10, 10), 2),
    ("conv1d depthwise", *conv(1, "padding: 1 groups: 6", 6, 6, 3, 1, 1, 6),
     (6, 20), 3),
    ("conv1d grouped dilated", *conv(1, "padding: 2 groups: 2 dilation: 2",
                                     4, 6, 3, 1, 2, 2, 2), (4, 17), 2),
    ("inverted residual (sum)", inv_spec, inv_module, (3, 6, 6), 4),
    ("inception (concat)",
     "branch { paths { layers { conv2d { out_channels: 3 kernel: 1 } } } "
     "paths { layers { conv2d { out_channels: 2 kernel: 3 padding: 1 } } "
     "layers { relu {} } } paths {} }",
     Branch([[nn.Conv2d(4, 3, 1)], [nn.Conv2d(4, 2, 3, padding=1), nn.ReLU()],
             []], "concat"), (4, 5, 5), 2),
    ("nested sum of concat", nested_spec, nested_module, (4, 6, 5), 2),
    ("squeeze-and-excitation (mul)",
     "branch { combine: MUL paths {} %s }" % se_spec,
     Branch([[], se_path], "mul"), (8, 6, 6), 3),
    ("mul gate first, conv, identity",
     "branch { combine: MUL %s paths { layers { conv2d { out_channels: 4 "
     "kernel: 3 padding: 1 } } } paths {} }" % gate_spec,
     Branch([gate_path, [nn.Conv2d(4, 4, 3, padding=1)], []], "mul"),
     (4, 5, 5), 2),
    ("mul of equal shapes",
     "branch { combine: MUL paths { layers { conv2d { out_channels: 3 "
     "kernel: 3 padding: 1 } } } paths { layers { conv2d { out_channels: 3 "
     "kernel: 1 } } layers { sigmoid {} } } }",
     Branch([[nn.Conv2d(3, 3, 3, padding=1)],
             [nn.Conv2d(3, 3, 1), nn.Sigmoid()]], "mul"), (3, 5, 4), 2),
    ("dense mul",
     "branch { combine: MUL paths { layers { linear { out_features: 5 } } } "
     "paths {} }",
     Branch([[nn.Linear(5, 5)], []], "mul"), (5,), 4),
    ("dense concat",
     "branch { paths { layers { linear { out_features: 3 } } } paths { "
     "layers { linear { out_features: 2 } } layers { relu {} } } paths {} }",
     Branch([[nn.Linear(5, 3)], [nn.Linear(5, 2), nn.ReLU()], []], "concat"),
     (5,), 4),
]


def flat(t):
    return " ".join(repr(v) for v in t.detach().flatten().tolist())


worst = [0.0]  # the largest relative difference of the current case


def compare(what, ours, theirs):
    theirs = theirs.detach().flatten()
    if ours.numel() != theirs.numel():
        return "%s: %d values, PyTorch %d" % (what, ours.numel(),
                                              theirs.numel())
    scale = max(theirs.abs().max().item(), 1e-12)
    err = (ours - theirs).abs().max().item() / scale
    worst[0] = max(worst[0], err)
    return None if err <= 1e-5 else "%s off by %.2e relative" % (what, err)


def main():
    dump = sys.argv[1]
    failed = 0
    for name, spec, module, shape, batch in CASES:
        module.train()
        params = dict(module.named_parameters())
        with torch.no_grad():
            for p in params.values():
                p.copy_(torch.randn(p.shape) * 0.5)
        x = torch.randn(batch, *shape, requires_grad=True)
        y = module(x)
        dy = torch.randn(y.shape)
        y.backward(dy)
        proc = subprocess.Popen(
            [dump, spec, ",".join(map(str, shape)), str(batch)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        names = []
        while True:
            line = proc.stdout.readline().split()
            if not line or line[0] == "end":
                break
            names.append(line[0])
        problems = []
        worst[0] = 0.0
        if sorted(names) != sorted(params):
            problems.append("parameters %s, PyTorch %s" % (names,
                                                           sorted(params)))
            proc.kill()
        else:
            numbers = [flat(params[n]) for n in names] + [flat(x), flat(dy)]
            out, _ = proc.communicate(" ".join(numbers) + "\n")
            lines = out.splitlines()
            if proc.returncode != 0 or len(lines) != 2 + len(names):
                problems.append("dump failed (%d)" % proc.returncode)
            else:
                vals = [torch.tensor([float(v) for v in l.split()])
                        for l in lines]
                checks = [("output", vals[0], y), ("input gradient", vals[1],
                                                   x.grad)]
                checks += [(n + " gradient", v, params[n].grad)
                           for n, v in zip(names, vals[2:])]
                problems += [p for p in (compare(*c) for c in checks) if p]
        failed += bool(problems)
        print("%s: %s, input %s x %d, %d parameter tensors, worst %.2e "
              "relative%s" % ("FAIL" if problems else "ok", name, shape,
                              batch, len(names), worst[0],
                              "".join("; " + p for p in problems)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
