#!/usr/bin/env python3
"""Golden data for the Vision Transformer of package nn/models, computed by
torchvision's VisionTransformer (torchvision 0.14).

Run from the repository root with Debian's torch:

    /usr/bin/python3 testdata/golden/gen_vit.py

It writes testdata/golden/models_vit.safetensors with two cases.
"torchvision_tiny" is a VisionTransformer with image 32, patch 8, 2 layers,
hidden 48, 3 heads, MLP 192, 10 classes and no dropout. Its weights are not
stored: the k-th entry of its state dict (in state_dict order) is

    shift + scale * hash_uniform(WEIGHT_SEED + k, numel)

reshaped to the entry's shape (hashinit.py; the Go twin is
internal/golden.HashUniform), with (shift, scale) from init_rule below. The
batch of 2 images is hash_uniform(INPUT_SEED, 2*3*32*32) and the labels are
LABELS. The case is run in float64 and in float32 (weights and images rounded
from the float64 values) and stores, under "<case>.<f64|f32>.<name>":

    logits              the model's output [2, 10] (eval mode; the model has
                        no batch norm and no active dropout, so training mode
                        gives the same values)
    loss                cross-entropy of the logits and the labels (mean)
    grad.<key>          d loss / d parameter, for every parameter, under
                        torchvision's state-dict names

"timm_avg" runs the same model and weights with timm's global_pool="avg"
instead of the class token: the encoder's output tokens except the class
token are averaged, and encoder.ln (timm's fc_norm) normalises the average
before the head; it stores logits and loss only.

The metadata holds "case.<case>" (the configuration as JSON),
"keys.<case>" (a JSON list of [name, shape, shift, scale] in
state-dict order, so the Go test can check that it rebuilds the same weights)
and "torch"/"torchvision" (the versions).
"""

import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from torchvision.models.vision_transformer import VisionTransformer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from hashinit import hash_uniform  # noqa: E402
from safetensors_io import write_safetensors  # noqa: E402

CASE = "torchvision_tiny"
AVG_CASE = "timm_avg"
CONFIG = dict(image_size=32, patch_size=8, num_layers=2, num_heads=3, hidden_dim=48,
              mlp_dim=192, num_classes=10, in_channels=3, batch=2)
WEIGHT_SEED = 1000
INPUT_SEED = 7
LABELS = [3, 7]


def init_rule(name, shape):
    """(shift, scale) of a weight: matrices and kernels U(±1/sqrt(fan_in));
    layer norm gains 1 + U(±0.5); biases U(±0.2); the class token and the
    position embedding U(±0.5)."""
    if name in ("class_token", "encoder.pos_embedding"):
        return 0.0, 0.5
    if name.endswith("weight") and len(shape) >= 2:
        return 0.0, 1.0 / math.sqrt(int(np.prod(shape[1:])))
    if name.endswith("weight"):
        return 1.0, 0.5
    return 0.0, 0.2


def build():
    c = CONFIG
    torch.manual_seed(0)
    model = VisionTransformer(
        image_size=c["image_size"], patch_size=c["patch_size"], num_layers=c["num_layers"],
        num_heads=c["num_heads"], hidden_dim=c["hidden_dim"], mlp_dim=c["mlp_dim"],
        dropout=0.0, attention_dropout=0.0, num_classes=c["num_classes"]).double()
    keys = []
    with torch.no_grad():
        sd = model.state_dict()
        for k, (name, t) in enumerate(sd.items()):
            shift, scale = init_rule(name, list(t.shape))
            vals = shift + scale * hash_uniform(WEIGHT_SEED + k, t.numel())
            t.copy_(torch.from_numpy(vals).reshape(t.shape))
            keys.append([name, list(t.shape), shift, scale])
    return model, keys


def forward_avg(m, x):
    """timm's VisionTransformer with global_pool="avg" (fc_norm after the
    pooling, no final norm before it), written with torchvision's modules."""
    h = m._process_input(x)
    h = torch.cat([m.class_token.expand(h.shape[0], -1, -1), h], dim=1)
    h = h + m.encoder.pos_embedding
    h = m.encoder.layers(m.encoder.dropout(h))
    h = h[:, 1:].mean(dim=1)
    return m.heads(m.encoder.ln(h))


def run(model, dtype, forward=None):
    c = CONFIG
    m = model.to(dtype)
    m.eval()
    m.zero_grad(set_to_none=True)
    n = c["batch"] * c["in_channels"] * c["image_size"] ** 2
    x = torch.from_numpy(hash_uniform(INPUT_SEED, n)).reshape(
        c["batch"], c["in_channels"], c["image_size"], c["image_size"]).to(dtype)
    y = torch.tensor(LABELS, dtype=torch.int64)
    logits = forward(m, x) if forward else m(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    out = {"logits": logits.detach(), "loss": loss.detach()}
    for name, p in m.named_parameters():
        out["grad." + name] = p.grad.detach().clone()
    return out


def main():
    model, keys = build()
    n_params = sum(p.numel() for p in model.parameters())
    tensors = {}
    # float64 first: the float32 model is the float64 one rounded.
    for tag, dtype in (("f64", torch.float64), ("f32", torch.float32)):
        for name, t in run(model, dtype).items():
            tensors[f"{CASE}.{tag}.{name}"] = t
        for name, t in run(model, dtype, forward_avg).items():
            if not name.startswith("grad."):
                tensors[f"{AVG_CASE}.{tag}.{name}"] = t
    params = dict(CONFIG, weight_seed=WEIGHT_SEED, input_seed=INPUT_SEED, labels=LABELS,
                  num_parameters=n_params)
    meta = {
        "case." + CASE: json.dumps(dict(params, global_pool="token"), separators=(",", ":")),
        "case." + AVG_CASE: json.dumps(dict(params, global_pool="avg"), separators=(",", ":")),
        "keys." + CASE: json.dumps(keys, separators=(",", ":")),
        "keys." + AVG_CASE: json.dumps(keys, separators=(",", ":")),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
    }
    write_safetensors(os.path.join(HERE, "models_vit.safetensors"), tensors, meta)


if __name__ == "__main__":
    main()
