#!/usr/bin/env python3
"""Generate the PyTorch golden files of package nn: testdata/golden/nn_*.safetensors.

Each file holds cases. For a layer case NAME the keys are

    NAME/state/<key>        the module's state_dict before the forward pass
    NAME/input              the input (NAME/target, NAME/mask for some cases)
    NAME/output             the module's output
    NAME/grad_output        g, a random tensor of the output's shape
    NAME/grad/input         ∂L/∂input for L = sum(output * g)
    NAME/grad/<param>       ∂L/∂param
    NAME/state_after/<key>  the state_dict after the pass (batch norm in training)

in float64 (labels int64, masks bool), so that the Go tests can check both a
float64 run tightly and a float32 run. nn_init.safetensors holds the moments
(NAME/mean, NAME/std, NAME/min, NAME/max, NAME/n) of PyTorch's default
initialisation of large layers.

The files are written with a plain safetensors writer (the safetensors
package is not needed). Run with Debian's torch:

    /usr/bin/python3 testdata/golden/gen_nn.py
"""

import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import write_safetensors  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

def arr(t):
    return t.detach().cpu().numpy().copy()


def randomize(module):
    """Give affine parameters and running statistics non-trivial values."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("bias") or isinstance(module, (nn.BatchNorm2d, nn.LayerNorm)):
                p.copy_(torch.randn_like(p) * 0.5 + (1.0 if name.endswith("weight") else 0.0))
        for name, b in module.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn_like(b) * 0.3)
            elif name.endswith("running_var"):
                b.copy_(torch.rand_like(b) + 0.5)
            elif name.endswith("num_batches_tracked"):
                b.fill_(3)


def layer_case(out, name, module, x, *, train=True, forward=None, extra=None, after=False):
    """Run module on x, backward of sum(y * g), and record everything."""
    module.train(train)
    for k, v in module.state_dict().items():
        out[f"{name}/state/{k}"] = arr(v)
    x = x.clone().requires_grad_(x.is_floating_point())
    y = forward(module, x) if forward else module(x)
    g = torch.randn_like(y)
    y.backward(g)
    out[f"{name}/input"] = arr(x)
    out[f"{name}/output"] = arr(y)
    out[f"{name}/grad_output"] = arr(g)
    if x.is_floating_point():
        out[f"{name}/grad/input"] = arr(x.grad)
    for k, p in module.named_parameters():
        out[f"{name}/grad/{k}"] = arr(p.grad)
    if after:
        for k, v in module.state_dict().items():
            out[f"{name}/state_after/{k}"] = arr(v)
    for k, v in (extra or {}).items():
        out[f"{name}/{k}"] = arr(v)


def gen_linear():
    out = {}
    torch.manual_seed(1)
    layer_case(out, "bias", nn.Linear(5, 4), torch.randn(3, 5))
    layer_case(out, "nobias", nn.Linear(5, 4, bias=False), torch.randn(2, 3, 5))
    return out


def gen_conv2d():
    out = {}
    torch.manual_seed(2)
    layer_case(out, "basic", nn.Conv2d(3, 4, 3), torch.randn(2, 3, 7, 6))
    layer_case(out, "stride_pad", nn.Conv2d(3, 6, 3, stride=2, padding=1), torch.randn(2, 3, 9, 8))
    layer_case(out, "groups_dilation",
               nn.Conv2d(4, 6, 3, padding=2, dilation=2, groups=2, bias=False), torch.randn(1, 4, 7, 7))
    layer_case(out, "depthwise", nn.Conv2d(4, 4, 3, padding=1, groups=4), torch.randn(2, 4, 5, 5))
    layer_case(out, "pointwise", nn.Conv2d(5, 3, 1), torch.randn(2, 5, 4, 3))
    return out


def gen_batchnorm2d():
    out = {}
    torch.manual_seed(3)
    x = torch.randn(4, 3, 5, 5) * 2 + 1
    for name, train, kw in [
        ("train", True, {}),
        ("eval", False, {}),
        ("noaffine_train", True, {"affine": False, "momentum": 0.3, "eps": 1e-3}),
        ("norunning_eval", False, {"track_running_stats": False}),
        ("norunning_train", True, {"track_running_stats": False}),
        ("cumulative_train", True, {"momentum": None}),
    ]:
        bn = nn.BatchNorm2d(3, **kw)
        randomize(bn)
        layer_case(out, name, bn, x, train=train, after=True)
    return out


def gen_layernorm():
    out = {}
    torch.manual_seed(4)
    ln = nn.LayerNorm(6)
    randomize(ln)
    layer_case(out, "last", ln, torch.randn(2, 3, 6) * 3 + 1)
    ln = nn.LayerNorm([3, 4], eps=1e-3)
    randomize(ln)
    layer_case(out, "two_axes", ln, torch.randn(2, 3, 4))
    layer_case(out, "noaffine", nn.LayerNorm(5, elementwise_affine=False), torch.randn(4, 5))
    return out


def gen_activation():
    out = {}
    torch.manual_seed(5)
    x = torch.randn(3, 7) * 2
    x[x.abs() < 1e-3] = 0.5
    layer_case(out, "relu", nn.ReLU(), x)
    layer_case(out, "gelu", nn.GELU(), x)
    layer_case(out, "gelu_tanh", nn.GELU(approximate="tanh"), x)
    layer_case(out, "identity", nn.Identity(), x)
    layer_case(out, "flatten", nn.Flatten(), torch.randn(2, 3, 4, 5))
    layer_case(out, "flatten_1_2", nn.Flatten(1, 2), torch.randn(2, 3, 4, 5))
    layer_case(out, "dropout_eval", nn.Dropout(0.5), x, train=False)
    return out


def gen_pool():
    out = {}
    torch.manual_seed(6)
    x9 = torch.randn(2, 3, 9, 9)
    x7 = torch.randn(2, 3, 7, 7)
    layer_case(out, "max_s2_p1", nn.MaxPool2d(3, stride=2, padding=1), x9)
    layer_case(out, "max_ceil", nn.MaxPool2d(2, ceil_mode=True), x7)
    layer_case(out, "max_dilation", nn.MaxPool2d(2, stride=1, dilation=2), x7)
    layer_case(out, "avg_s2_p1", nn.AvgPool2d(3, stride=2, padding=1), x9)
    layer_case(out, "avg_exclude_pad", nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), x9)
    layer_case(out, "avg_ceil", nn.AvgPool2d(2, ceil_mode=True), x7)
    layer_case(out, "adaptive_1x1", nn.AdaptiveAvgPool2d(1), torch.randn(2, 3, 5, 5))
    layer_case(out, "adaptive_2x2", nn.AdaptiveAvgPool2d(2), torch.randn(2, 3, 6, 4))
    layer_case(out, "adaptive_3x2", nn.AdaptiveAvgPool2d((3, 2)), torch.randn(2, 3, 7, 5))
    return out


def gen_embedding():
    out = {}
    torch.manual_seed(7)
    idx = torch.tensor([[1, 3, 3, 9, 0], [2, 1, 3, 7, 7]])
    layer_case(out, "basic", nn.Embedding(10, 4), idx)
    return out


def gen_mha():
    out = {}
    torch.manual_seed(8)
    b, t, d, h = 2, 5, 8, 2
    x = torch.randn(b, t, d)

    def attend(mask):
        return lambda m, x: m(x, x, x, attn_mask=mask, need_weights=False)[0]

    def mha(**kw):
        m = nn.MultiheadAttention(d, h, batch_first=True, **kw)
        with torch.no_grad():
            for k, p in m.named_parameters():
                if k.endswith("bias"):
                    p.copy_(torch.randn_like(p) * 0.3)
        return m

    layer_case(out, "nomask", mha(), x, forward=attend(None))
    causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
    layer_case(out, "causal", mha(), x, forward=attend(causal), extra={"mask": causal})
    fmask = torch.randn(b * h, t, t)
    layer_case(out, "float_mask", mha(), x, forward=attend(fmask), extra={"mask": fmask})
    layer_case(out, "nobias", mha(bias=False), x, forward=attend(None))
    layer_case(out, "dropout_eval", mha(dropout=0.5), x, train=False, forward=attend(None))
    return out


def gen_loss():
    out = {}
    torch.manual_seed(9)
    logits = torch.randn(6, 5) * 2
    target = torch.tensor([0, 4, -100, 2, 1, 0])
    cases = [
        ("ce_mean", nn.CrossEntropyLoss()),
        ("ce_smooth", nn.CrossEntropyLoss(label_smoothing=0.1)),
        ("ce_sum", nn.CrossEntropyLoss(reduction="sum", label_smoothing=0.2)),
        ("ce_none", nn.CrossEntropyLoss(reduction="none")),
    ]
    for name, loss in cases:
        layer_case(out, name, loss, logits, forward=lambda m, x: m(x, target), extra={"target": target})
    y = torch.randn(6, 5)
    layer_case(out, "mse_mean", nn.MSELoss(), logits, forward=lambda m, x: m(x, y), extra={"target": y})
    layer_case(out, "mse_sum", nn.MSELoss(reduction="sum"), logits, forward=lambda m, x: m(x, y), extra={"target": y})
    return out


def gen_sequential():
    out = {}
    torch.manual_seed(10)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1, bias=False),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(4 * 3 * 3, 5),
    )
    randomize(model[1])
    layer_case(out, "cnn", model, torch.randn(2, 3, 6, 6), after=True)
    return out


def moments(out, name, t):
    t = t.detach().double().flatten()
    out[f"{name}/n"] = np.array(t.numel(), dtype=np.int64)
    out[f"{name}/mean"] = np.array(t.mean().item())
    out[f"{name}/std"] = np.array(t.std(unbiased=False).item())
    out[f"{name}/min"] = np.array(t.min().item())
    out[f"{name}/max"] = np.array(t.max().item())
    return t


def gen_init():
    out = {}
    torch.manual_seed(11)
    lin = nn.Linear(512, 256)
    w = moments(out, "linear_weight", lin.weight)
    assert w.abs().max() <= 1 / math.sqrt(512)
    lin = nn.Linear(64, 8192)
    b = moments(out, "linear_bias", lin.bias)
    assert b.abs().max() <= 1 / math.sqrt(64)
    conv = nn.Conv2d(64, 64, 3)
    w = moments(out, "conv2d_weight", conv.weight)
    assert w.abs().max() <= 1 / math.sqrt(64 * 9)
    conv = nn.Conv2d(4, 16384, 1)
    moments(out, "conv2d_bias", conv.bias)
    conv = nn.Conv2d(64, 128, 3)
    nn.init.kaiming_normal_(conv.weight, mode="fan_out", nonlinearity="relu")
    moments(out, "kaiming_normal_fan_out_relu", conv.weight)
    mha = nn.MultiheadAttention(256, 4, batch_first=True)
    moments(out, "mha_in_proj_weight", mha.in_proj_weight)
    moments(out, "mha_out_proj_weight", mha.out_proj.weight)
    moments(out, "embedding_weight", nn.Embedding(1000, 64).weight)
    t = torch.empty(200000)
    nn.init.trunc_normal_(t, mean=0.5, std=1.0, a=-1.0, b=2.0)
    moments(out, "trunc_normal", t)
    t = torch.empty(200000)
    nn.init.trunc_normal_(t, std=0.02)
    moments(out, "trunc_normal_vit", t)
    return out


def main():
    torch.set_default_dtype(torch.float64)
    for name, gen in [
        ("linear", gen_linear),
        ("conv2d", gen_conv2d),
        ("batchnorm2d", gen_batchnorm2d),
        ("layernorm", gen_layernorm),
        ("activation", gen_activation),
        ("pool", gen_pool),
        ("embedding", gen_embedding),
        ("mha", gen_mha),
        ("loss", gen_loss),
        ("sequential", gen_sequential),
        ("init", gen_init),
    ]:
        write_safetensors(os.path.join(HERE, f"nn_{name}.safetensors"), gen())


if __name__ == "__main__":
    main()
