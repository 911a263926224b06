#!/usr/bin/env python3
"""Golden data for flock's tests, computed by PyTorch.

Run from the repository root:

    /usr/bin/python3 testdata/golden/gen_golden.py

Each case group becomes one .safetensors file beside this script. A case is
computed twice, in float32 and in float64, from the same inputs (drawn in
float64 and rounded to float32, so both runs see equal values); its tensors
are named "<case>.<f32|f64>.<name>". Upstream gradients: for an output y the
script draws g like y and backpropagates sum(y * g), storing g and the
gradients of the inputs. The header's "__metadata__" holds, for each case,
"case.<case>" -> a JSON object of the op's parameters, and "torch" -> the
PyTorch version.

The files are written by safetensors_io.py, a small writer that follows the
safetensors specification (the Python safetensors package is not needed):
an 8-byte little-endian header length, a compact JSON header padded with
spaces to a multiple of 8 bytes, then the data, laid out by decreasing
dtype alignment and then by name as the reference implementation does.
dtypes.safetensors holds one tensor of each dtype for the format tests.
"""

import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import write_safetensors  # noqa: E402

OUT = os.path.dirname(os.path.abspath(__file__))



def save(name, tensors, metadata):
    """Write tensors (a dict of name -> torch.Tensor) as a safetensors file."""
    write_safetensors(os.path.join(OUT, name), tensors, metadata)


def randn(*shape, scale=1.0, shift=0.0):
    """Standard normal draws rounded to float32, returned in float64."""
    return (torch.randn(tuple(shape), dtype=torch.float64) * scale + shift).float().double()


class Group:
    """Collects the tensors and parameters of one file."""

    def __init__(self, name):
        self.name = name
        self.tensors = {}
        self.meta = {"torch": torch.__version__}

    def case(self, case, params):
        self.meta["case." + case] = json.dumps(params, separators=(",", ":"))

    def put(self, case, dt, **ts):
        tag = {torch.float32: "f32", torch.float64: "f64"}[dt]
        for k, v in ts.items():
            if v is None:
                continue
            v = v.detach()
            if v.is_floating_point():
                v = v.to(dt)
            key = f"{case}.{tag}.{k}"
            assert key not in self.tensors, key
            self.tensors[key] = v.clone()

    def save(self):
        save(self.name, self.tensors, self.meta)


def leaf(t, dt):
    return t.to(dt).clone().requires_grad_(True)


def backward(y, dt):
    """Draws g like y, backpropagates sum(y*g) and returns g."""
    g = randn(*y.shape).to(dt)
    (y * g).sum().backward()
    return g


FLOATS = (torch.float32, torch.float64)


def conv2d():
    G = Group("conv2d.safetensors")
    cases = [
        # name, x shape, w shape, stride, padding, dilation, groups, bias
        ("stride2", (2, 3, 7, 7), (4, 3, 3, 3), (2, 2), (0, 0), (1, 1), 1, False),
        ("pad1_bias", (2, 3, 6, 5), (5, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1, True),
        ("dilation2", (1, 2, 9, 8), (3, 2, 3, 3), (1, 1), (2, 2), (2, 2), 1, True),
        ("groups2", (2, 4, 6, 6), (6, 2, 3, 3), (1, 1), (1, 1), (1, 1), 2, False),
        ("depthwise", (2, 4, 7, 7), (4, 1, 3, 3), (2, 2), (1, 1), (1, 1), 4, True),
        ("depthwise_mult2", (1, 3, 5, 5), (6, 1, 3, 3), (1, 1), (1, 1), (1, 1), 3, False),
        ("asymmetric", (1, 3, 8, 6), (2, 3, 3, 2), (2, 1), (1, 0), (1, 2), 1, True),
        ("pointwise", (2, 5, 4, 4), (3, 5, 1, 1), (1, 1), (0, 0), (1, 1), 1, False),
    ]
    for name, xs, ws, stride, pad, dil, groups, has_bias in cases:
        G.case(name, {"stride": stride, "padding": pad, "dilation": dil, "groups": groups, "bias": has_bias})
        x0, w0 = randn(*xs), randn(*ws, scale=0.5)
        b0 = randn(ws[0]) if has_bias else None
        for dt in FLOATS:
            x, w = leaf(x0, dt), leaf(w0, dt)
            b = leaf(b0, dt) if has_bias else None
            y = F.conv2d(x, w, b, stride=stride, padding=pad, dilation=dil, groups=groups)
            g = backward(y, dt)
            G.put(name, dt, x=x, w=w, b=b, y=y, g=g, dx=x.grad, dw=w.grad,
                  db=b.grad if has_bias else None)
    G.save()


def pool2d():
    G = Group("pool2d.safetensors")
    # max pooling: name, x shape, kernel, stride (None: PyTorch's default,
    # the kernel), padding, dilation, ceil_mode
    maxcases = [
        ("max_k2", (2, 3, 6, 6), (2, 2), None, (0, 0), (1, 1), False),
        ("max_k3s2p1", (2, 2, 7, 7), (3, 3), (2, 2), (1, 1), (1, 1), False),
        ("max_ceil", (1, 2, 8, 8), (3, 3), (2, 2), (0, 0), (1, 1), True),
        ("max_ceil_pad", (1, 2, 6, 6), (3, 3), (2, 2), (1, 1), (1, 1), True),
        ("max_dilation2", (1, 2, 9, 9), (3, 3), (2, 2), (1, 1), (2, 2), False),
        ("max_asymmetric", (2, 2, 7, 5), (3, 2), (2, 1), (1, 0), (1, 1), False),
    ]
    for name, xs, k, s, p, d, ceil in maxcases:
        G.case(name, {"kernel": k, "stride": s, "padding": p, "dilation": d, "ceil_mode": ceil})
        x0 = randn(*xs)
        for dt in FLOATS:
            x = leaf(x0, dt)
            y, idx = F.max_pool2d(x, k, stride=s, padding=p, dilation=d, ceil_mode=ceil, return_indices=True)
            g = backward(y, dt)
            G.put(name, dt, x=x, y=y, indices=idx, g=g, dx=x.grad)
    # average pooling: name, x shape, kernel, stride, padding, ceil_mode,
    # count_include_pad
    avgcases = [
        ("avg_k2", (2, 3, 6, 6), (2, 2), None, (0, 0), False, True),
        ("avg_k3s2p1_incl", (2, 2, 7, 7), (3, 3), (2, 2), (1, 1), False, True),
        ("avg_k3s2p1_excl", (2, 2, 7, 7), (3, 3), (2, 2), (1, 1), False, False),
        ("avg_ceil_incl", (1, 2, 6, 6), (3, 3), (2, 2), (1, 1), True, True),
        ("avg_ceil_excl", (1, 2, 6, 6), (3, 3), (2, 2), (1, 1), True, False),
        ("avg_ceil_nopad", (1, 2, 8, 8), (3, 3), (2, 2), (0, 0), True, True),
        ("avg_asymmetric", (2, 2, 7, 5), (3, 2), (2, 1), (1, 1), False, False),
    ]
    for name, xs, k, s, p, ceil, incl in avgcases:
        G.case(name, {"kernel": k, "stride": s, "padding": p, "dilation": (1, 1),
                      "ceil_mode": ceil, "count_include_pad": incl})
        x0 = randn(*xs)
        for dt in FLOATS:
            x = leaf(x0, dt)
            y = F.avg_pool2d(x, k, stride=s, padding=p, ceil_mode=ceil, count_include_pad=incl)
            g = backward(y, dt)
            G.put(name, dt, x=x, y=y, g=g, dx=x.grad)
    G.save()


def norm():
    G = Group("norm.safetensors")
    # batch normalisation: name, x shape, affine, running statistics,
    # training, eps. Running statistics are updated with momentum 0.1 in
    # training (unbiased batch variance); rm/rv are before, rm_after/rv_after
    # after the call.
    bncases = [
        ("bn_train_4d", (4, 3, 3, 3), True, True, True, 1e-5),
        ("bn_train_2d_noaffine", (8, 4), False, True, True, 1e-5),
        ("bn_train_3d_norunning", (3, 2, 5), True, False, True, 1e-3),
        ("bn_eval_4d", (4, 3, 3, 3), True, True, False, 1e-5),
        ("bn_eval_2d_noaffine", (6, 4), False, True, False, 1e-3),
    ]
    for name, xs, affine, running, training, eps in bncases:
        G.case(name, {"affine": affine, "running": running, "training": training, "momentum": 0.1, "eps": eps})
        c = xs[1]
        x0 = randn(*xs, scale=2.0, shift=0.5)
        w0 = randn(c, scale=0.2, shift=1.0) if affine else None
        b0 = randn(c, scale=0.2) if affine else None
        rm0 = randn(c, scale=0.3) if running else None
        rv0 = (randn(c, scale=0.3).abs() + 0.5).float().double() if running else None
        for dt in FLOATS:
            x = leaf(x0, dt)
            w = leaf(w0, dt) if affine else None
            b = leaf(b0, dt) if affine else None
            rm = rm0.to(dt).clone() if running else None
            rv = rv0.to(dt).clone() if running else None
            y = F.batch_norm(x, rm, rv, w, b, training=training, momentum=0.1, eps=eps)
            g = backward(y, dt)
            G.put(name, dt, x=x, weight=w, bias=b, rm=rm0, rv=rv0, rm_after=rm, rv_after=rv,
                  y=y, g=g, dx=x.grad, dweight=w.grad if affine else None, dbias=b.grad if affine else None)
    # layer normalisation over the trailing normalized_shape: name, x shape,
    # normalized_shape, affine, eps
    lncases = [
        ("ln_last", (3, 4, 6), (6,), True, 1e-5),
        ("ln_last2", (2, 3, 4, 5), (4, 5), True, 1e-5),
        ("ln_noaffine", (5, 7), (7,), False, 1e-3),
    ]
    for name, xs, ns, affine, eps in lncases:
        G.case(name, {"normalized_shape": ns, "affine": affine, "eps": eps})
        x0 = randn(*xs, scale=1.5, shift=0.3)
        w0 = randn(*ns, scale=0.2, shift=1.0) if affine else None
        b0 = randn(*ns, scale=0.2) if affine else None
        for dt in FLOATS:
            x = leaf(x0, dt)
            w = leaf(w0, dt) if affine else None
            b = leaf(b0, dt) if affine else None
            y = F.layer_norm(x, ns, w, b, eps=eps)
            g = backward(y, dt)
            G.put(name, dt, x=x, weight=w, bias=b, y=y, g=g, dx=x.grad,
                  dweight=w.grad if affine else None, dbias=b.grad if affine else None)
    G.save()


def softmax():
    G = Group("softmax.safetensors")
    # name, x shape, axis, scale of x (large values test the max shift)
    cases = [
        ("last", (3, 4, 5), -1, 1.0),
        ("middle", (3, 4, 5), 1, 1.0),
        ("first", (4, 3), 0, 1.0),
        ("large", (2, 6), -1, 30.0),
    ]
    for name, xs, axis, scale in cases:
        G.case(name, {"axis": axis})
        x0 = randn(*xs, scale=scale)
        for dt in FLOATS:
            x = leaf(x0, dt)
            y = torch.softmax(x, axis)
            g = backward(y, dt)
            G.put(name, dt, x=x, y=y, g=g, dx=x.grad)
            x = leaf(x0, dt)
            y = torch.log_softmax(x, axis)
            g = backward(y, dt)
            G.put(name, dt, log_y=y, log_g=g, log_dx=x.grad)
    G.save()


def cross_entropy():
    G = Group("cross_entropy.safetensors")
    # name, N, C, label_smoothing, ignore_index, rows given ignore_index.
    # loss is F.cross_entropy(..., reduction="mean"): the sum of the per-row
    # losses (rows, reduction="none") over the non-ignored rows divided by
    # their count; dlogits is the gradient of g·loss for a drawn scalar g.
    cases = [
        ("smooth_ignore", 6, 5, 0.1, -100, (1, 4)),
        ("plain", 4, 7, 0.0, -100, ()),
        ("ignore2_smooth", 5, 3, 0.2, 2, ()),
    ]
    for name, n, c, eps, ignore, ignored in cases:
        G.case(name, {"label_smoothing": eps, "ignore_index": ignore, "reduction": "mean"})
        logits0 = randn(n, c, scale=2.0)
        target = torch.randint(0, c, (n,), dtype=torch.int64)
        for r in ignored:
            target[r] = ignore
        keep = target != ignore
        for dt in FLOATS:
            logits = leaf(logits0, dt)
            rows = F.cross_entropy(logits, target, ignore_index=ignore, label_smoothing=eps, reduction="none")
            loss = F.cross_entropy(logits, target, ignore_index=ignore, label_smoothing=eps)
            assert math.isclose(loss.item(), (rows.sum() / keep.sum()).item(), rel_tol=1e-6), name
            g = randn().to(dt)
            (loss * g).backward()
            G.put(name, dt, logits=logits, target=target, rows=rows, loss=loss, g=g, dlogits=logits.grad)
    G.save()


def gelu():
    G = Group("gelu.safetensors")
    G.case("gelu", {"approximate": ["none", "tanh"]})
    x0 = torch.cat([torch.linspace(-6, 6, 49, dtype=torch.float64).float().double(), randn(31, scale=2.0)])
    for dt in FLOATS:
        for approx, tag in (("none", "erf"), ("tanh", "tanh")):
            x = leaf(x0, dt)
            y = F.gelu(x, approximate=approx)
            g = backward(y, dt)
            if tag == "erf":
                G.put("gelu", dt, x=x)
            G.put("gelu", dt, **{tag + "_y": y, tag + "_g": g, tag + "_dx": x.grad})
    G.save()


# The attention block, rebuilt from flock ops by autograd/golden_test.go.
# x is [B, T, D] = [2, 5, 8]; H = 2 heads of size dh = D/H = 4. Each of the
# two layers l = 0, 1 (parameters "layers.<l>.<name>") computes
#
#     h = LayerNorm(x; ln1.weight, ln1.bias, eps 1e-5)        # over D
#     qkv = h · qkv.weightᵀ + qkv.bias                         # [B, T, 3D]; weight [3D, D]
#     q, k, v = qkv[..., 0:D], qkv[..., D:2D], qkv[..., 2D:3D]
#     q, k, v each reshaped [B, T, H, dh] and transposed to [B, H, T, dh]
#     a = softmax(q · kᵀ / √dh, over the last axis)            # [B, H, T, T], no mask
#     o = (a · v) transposed to [B, T, H, dh], reshaped [B, T, D]
#     x = x + o · proj.weightᵀ + proj.bias                     # weight [D, D]
#     h = LayerNorm(x; ln2.weight, ln2.bias, eps 1e-5)
#     m = GELU(h · fc1.weightᵀ + fc1.bias)                     # erf form; weight [4D, D]
#     x = x + m · fc2.weightᵀ + fc2.bias                       # weight [D, 4D]
#
# then out = x and loss = mean((out − target)²) over all B·T·D elements.
# Stored: "x", "target", every parameter under its name, "out", "loss", and
# "grad.x" and "grad.<parameter>" from loss.backward().
B, T, D, H, LAYERS = 2, 5, 8, 2, 2
PARAM_SHAPES = [("ln1.weight", (D,)), ("ln1.bias", (D,)),
                ("qkv.weight", (3 * D, D)), ("qkv.bias", (3 * D,)),
                ("proj.weight", (D, D)), ("proj.bias", (D,)),
                ("ln2.weight", (D,)), ("ln2.bias", (D,)),
                ("fc1.weight", (4 * D, D)), ("fc1.bias", (4 * D,)),
                ("fc2.weight", (D, 4 * D)), ("fc2.bias", (D,))]


def attention_forward(x, p):
    dh = D // H
    for l in range(LAYERS):
        P = lambda n: p[f"layers.{l}.{n}"]
        h = F.layer_norm(x, (D,), P("ln1.weight"), P("ln1.bias"), eps=1e-5)
        qkv = F.linear(h, P("qkv.weight"), P("qkv.bias"))
        q, k, v = qkv.split(D, dim=-1)
        q, k, v = (t.reshape(B, T, H, dh).transpose(1, 2) for t in (q, k, v))
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        o = (a @ v).transpose(1, 2).reshape(B, T, D)
        x = x + F.linear(o, P("proj.weight"), P("proj.bias"))
        h = F.layer_norm(x, (D,), P("ln2.weight"), P("ln2.bias"), eps=1e-5)
        m = F.gelu(F.linear(h, P("fc1.weight"), P("fc1.bias")))
        x = x + F.linear(m, P("fc2.weight"), P("fc2.bias"))
    return x


def attention():
    x0 = randn(B, T, D)
    target0 = randn(B, T, D)
    p0 = {}
    for l in range(LAYERS):
        for n, shape in PARAM_SHAPES:
            if n.startswith("ln") and n.endswith("weight"):
                v = randn(*shape, scale=0.1, shift=1.0)
            elif n.endswith("bias"):
                v = randn(*shape, scale=0.1)
            else:
                v = randn(*shape, scale=1.0 / math.sqrt(shape[1]))
            p0[f"layers.{l}.{n}"] = v
    for dt, tag in ((torch.float32, "f32"), (torch.float64, "f64")):
        x = leaf(x0, dt)
        p = {k: leaf(v, dt) for k, v in p0.items()}
        target = target0.to(dt)
        out = attention_forward(x, p)
        loss = ((out - target) ** 2).mean()
        loss.backward()
        ts = {"x": x.detach(), "target": target, "out": out.detach(), "loss": loss.detach(), "grad.x": x.grad}
        for k, v in p.items():
            ts[k] = v.detach()
            ts["grad." + k] = v.grad
        meta = {"torch": torch.__version__, "B": str(B), "T": str(T), "D": str(D), "heads": str(H),
                "layers": str(LAYERS), "eps": "1e-5"}
        save(f"attention_{tag}.safetensors", {k: v.clone() for k, v in ts.items()}, meta)


def dtypes():
    """One tensor of each dtype PyTorch has a safetensors name for, with
    values that Go recomputes: element i of each is given in the comments."""
    i = torch.arange(12)
    ts = {
        "f32": (i.to(torch.float32) * 0.25 - 1).reshape(3, 4),      # i/4 − 1
        "f64": (i.to(torch.float64) / 3).reshape(2, 3, 2),          # i/3
        "f16": (i.to(torch.float32) * 0.5 - 2).to(torch.float16),   # i/2 − 2
        "bf16": (i.to(torch.float32) * 8 - 40).to(torch.bfloat16),  # 8i − 40
        "i32": (i.to(torch.int32) * -7 + 3).reshape(4, 3),          # 3 − 7i
        "i64": i.to(torch.int64) * (1 << 33) - 5,                   # i·2³³ − 5
        "u8": (i * 21).to(torch.uint8),                             # 21i
        "i8": (i * 11 - 60).to(torch.int8),                         # 11i − 60
        "i16": (i * 3000 - 16000).to(torch.int16),                  # 3000i − 16000
        "bool": (i % 3 == 0).reshape(2, 6),                         # i mod 3 = 0
        "scalar": torch.tensor(2.5, dtype=torch.float32),           # 2.5, shape []
        "empty": torch.zeros(0, 3, dtype=torch.float32),            # shape [0 3]
    }
    save("dtypes.safetensors", ts, {"format": "pt", "note": "dtype coverage; \"quoted\"\tand tabbed"})


def main():
    torch.manual_seed(0)
    conv2d()
    pool2d()
    norm()
    softmax()
    cross_entropy()
    gelu()
    attention()
    dtypes()


if __name__ == "__main__":
    main()
