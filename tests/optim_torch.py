"""Compares cohort's optimizers (kernels/update_rules through
worker/optim/optim_dump) with PyTorch 1.13 over 20 steps on the same
tensors and gradients: torch.optim.SGD, Adam, AdamW, RMSprop and Adagrad,
and LAMB and LARS written here from their formulas (kernels/update_rules.h), each without
and with weight decay and with biases and norm parameters excluded from it
(torch's param_groups recipe), in float64 and float32.

usage: optim_torch.py DUMP   (DUMP: worker/optim/optim_dump)
Exits 1 if any parameter at any step is off by more than 1e-5.
"""
import subprocess
import sys

try:
    import torch
except ImportError:
    print("SKIP: python3-torch is not installed")
    sys.exit(0)

dump = sys.argv[1]
STEPS = 20
TOL = 1e-5
# (shape, is a bias or norm parameter); 1200 elements cross a 1024-element
# norm piece, so LAMB/LARS norms add several pieces.
TENSORS = [((30, 40), False), ((30,), True), ((7, 5), False), ((5,), True),
           ((300,), False), ((4,), True)]


def lamb(params, groups, lr, b1, b2, eps, state, t):
    for p, wd in zip(params, groups):
        st = state.setdefault(id(p), {"m": torch.zeros_like(p),
                                      "v": torch.zeros_like(p)})
        g = p.grad
        st["m"].mul_(b1).add_(g, alpha=1 - b1)
        st["v"].mul_(b2).addcmul_(g, g, value=1 - b2)
        u = (st["m"] / (1 - b1 ** t)) / ((st["v"] / (1 - b2 ** t)).sqrt() +
                                         eps) + wd * p
        pn, un = p.norm().item(), u.norm().item()
        ratio = pn / un if pn > 0 and un > 0 else 1.0
        p.sub_(lr * ratio * u)


def lars(params, groups, lr, mu, tc, state):
    for p, wd in zip(params, groups):
        g = p.grad
        pn, gn = p.norm().item(), g.norm().item()
        local = tc * pn / (gn + wd * pn) if pn > 0 and gn > 0 else 1.0
        d = local * (g + wd * p)
        if mu:
            buf = state.setdefault(id(p), torch.zeros_like(p))
            buf.mul_(mu).add_(d)
            d = buf
        p.sub_(lr * d)


# (name, cohort OptimizerSpec text, torch optimizer or reference)
def f32(x):
    """x as the spec's float field holds it (cohort's rules read that)."""
    return torch.tensor(x, dtype=torch.float32).item()


def cases(wd):
    lr, mu = f32(0.05), f32(0.9)
    alr, b1, b2, eps = f32(0.01), f32(0.9), f32(0.999), f32(1e-8)
    rms = dict(lr=alr, alpha=f32(0.99), eps=eps)
    return [
        ("SGD", f"kind: SGD lr: 0.05 weight_decay: {wd}",
         lambda g: torch.optim.SGD(g, lr=lr)),
        ("SGD+momentum", f"kind: SGD lr: 0.05 momentum: 0.9 weight_decay: {wd}",
         lambda g: torch.optim.SGD(g, lr=lr, momentum=mu)),
        ("SGD+nesterov",
         f"kind: SGD lr: 0.05 momentum: 0.9 nesterov: true weight_decay: {wd}",
         lambda g: torch.optim.SGD(g, lr=lr, momentum=mu, nesterov=True)),
        ("Adam", f"kind: ADAM lr: 0.01 beta1: 0.9 beta2: 0.999 eps: 1e-8 "
         f"weight_decay: {wd}",
         lambda g: torch.optim.Adam(g, lr=alr, betas=(b1, b2), eps=eps)),
        ("AdamW", f"kind: ADAMW lr: 0.01 beta1: 0.9 beta2: 0.999 eps: 1e-8 "
         f"weight_decay: {wd}",
         lambda g: torch.optim.AdamW(g, lr=alr, betas=(b1, b2), eps=eps)),
        ("RMSprop", f"kind: RMSPROP lr: 0.01 alpha: 0.99 eps: 1e-8 "
         f"weight_decay: {wd}", lambda g: torch.optim.RMSprop(g, **rms)),
        ("RMSprop+momentum", f"kind: RMSPROP lr: 0.01 alpha: 0.99 eps: 1e-8 "
         f"momentum: 0.9 weight_decay: {wd}",
         lambda g: torch.optim.RMSprop(g, momentum=mu, **rms)),
        ("RMSprop+centered", f"kind: RMSPROP lr: 0.01 alpha: 0.9 eps: 1e-8 "
         f"momentum: 0.5 centered: true weight_decay: {wd}",
         lambda g: torch.optim.RMSprop(g, lr=alr, alpha=f32(0.9), eps=eps,
                                       momentum=0.5, centered=True)),
        ("Adagrad", f"kind: ADAGRAD lr: 0.05 eps: 1e-10 weight_decay: {wd}",
         lambda g: torch.optim.Adagrad(g, lr=lr, eps=f32(1e-10))),
        ("Adagrad+decay+initial",
         f"kind: ADAGRAD lr: 0.05 lr_decay: 0.1 initial_accumulator_value: "
         f"0.25 eps: 1e-10 weight_decay: {wd}",
         lambda g: torch.optim.Adagrad(g, lr=lr, lr_decay=f32(0.1),
                                       initial_accumulator_value=0.25,
                                       eps=f32(1e-10))),
        ("LAMB", f"kind: LAMB lr: 0.01 beta1: 0.9 beta2: 0.999 eps: 1e-6 "
         f"weight_decay: {wd}", ("lamb", alr, b1, b2, f32(1e-6))),
        ("LARS", f"kind: LARS lr: 0.5 momentum: 0.9 trust_coefficient: 0.02 "
         f"weight_decay: {wd}", ("lars", 0.5, mu, f32(0.02))),
    ]


torch.manual_seed(4)
init = [torch.randn(s, dtype=torch.float64) * 0.5 for s, _ in TENSORS]
grads = [[torch.randn(s, dtype=torch.float64) * 0.1 for s, _ in TENSORS]
         for _ in range(STEPS)]
worst = {}
failed = 0
for wd, exclude in [(0.0, False), (0.01, False), (0.01, True)]:
    for name, spec, make in cases(wd):
        for dtype, tname, slices in [(torch.float64, "double", 1),
                                     (torch.float32, "float", 3)]:
            params = [torch.nn.Parameter(x.clone().to(dtype)) for x in init]
            decays = [0.0 if exclude and nd else f32(wd) for _, nd in TENSORS]
            text = [str(len(TENSORS))]
            text += [f"{p.numel()} {int(exclude and nd)}"
                     for p, (_, nd) in zip(params, TENSORS)]
            text += [repr(v) for p in params for v in p.detach().flatten().tolist()]
            text.append(str(STEPS))
            for step in grads:
                text += [repr(v) for g in step
                         for v in g.to(dtype).flatten().tolist()]
            out = subprocess.run([dump, tname, spec, str(slices)],
                                 input="\n".join(text), check=True,
                                 capture_output=True, text=True).stdout.split()
            ours = torch.tensor([float(v) for v in out], dtype=torch.float64)
            if callable(make):
                groups = [{"params": [p], "weight_decay": d}
                          for p, d in zip(params, decays)]
                opt = make(groups)
            state = {}
            theirs = []
            for t, step in enumerate(grads, start=1):
                for p, g in zip(params, step):
                    p.grad = g.to(dtype).clone()
                with torch.no_grad():
                    if callable(make):
                        opt.step()
                    elif make[0] == "lamb":
                        lamb(params, decays, *make[1:], state, t)
                    else:
                        lars(params, decays, *make[1:], state)
                theirs += [p.detach().flatten().to(torch.float64).clone()
                           for p in params]
            theirs = torch.cat(theirs)
            diff = ((ours - theirs).abs().max().item()
                    if ours.numel() == theirs.numel() else float("inf"))
            key = f"{name} ({tname})"
            worst[key] = max(worst.get(key, 0.0), diff)
            if diff > TOL:
                failed += 1
                print(f"FAIL: {name} {tname} weight_decay {wd} exclude "
                      f"{exclude}: largest difference {diff:.2e}")
for key, diff in worst.items():
    print(f"{'ok' if diff <= TOL else 'FAIL'}: {key}: largest difference "
          f"over {STEPS} steps {diff:.2e}")
sys.exit(1 if failed else 0)
