#!/usr/bin/env python3
"""A model exported from PyTorch the way users export one, for the test that
loading it into flock gives PyTorch's outputs.

Run from the repository root with Debian's torch:

    /usr/bin/python3 testdata/golden/gen_export.py

It builds torchvision's VisionTransformer in a tiny configuration (image 32,
patch 8, 2 layers, hidden 48, 3 heads, MLP 192, 10 classes) with PyTorch's
own initialisation (torch.manual_seed(0)), and writes

    export_vit_tiny.safetensors     its float32 state dict, under
                                    torchvision's names, as exported
    export_vit_tiny_io.safetensors  "input" [2, 3, 32, 32] (torch.randn with
                                    seed 1) and "logits" [2, 10], the model's
                                    output in eval mode
"""

import os
import sys

import torch
import torchvision
from torchvision.models.vision_transformer import VisionTransformer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from safetensors_io import write_safetensors  # noqa: E402


def main():
    torch.manual_seed(0)
    model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=3,
                              hidden_dim=48, mlp_dim=192, num_classes=10)
    model.eval()
    torch.manual_seed(1)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        logits = model(x)
    meta = {"torch": torch.__version__, "torchvision": torchvision.__version__}
    write_safetensors(os.path.join(HERE, "export_vit_tiny.safetensors"), model.state_dict(), meta)
    write_safetensors(os.path.join(HERE, "export_vit_tiny_io.safetensors"),
                      {"input": x, "logits": logits}, meta)


if __name__ == "__main__":
    main()
