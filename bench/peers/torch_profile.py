"""Per-op CPU profile of one PyTorch training step, beside `flock bench model
--profile`: the model of bench/peers/torch_model.py, SGD with momentum 0.9,
cross-entropy on a fixed batch of random images, 2 threads; one warm-up step,
three timed steps, then three steps under torch.profiler, whose table (self
CPU time, summed over the three steps) it prints.

    "$(bench/peers/setup.sh)" bench/peers/torch_profile.py [MODEL [BATCH [SIDE]]]
"""
import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_model  # noqa: E402  (the same architectures)


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "vit_tiny_p4"
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    side = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    torch.set_num_threads(2)
    torch.manual_seed(1)
    m = torch_model.build(name, side, 3, 10)
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, side, side)
    y = torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()

    step()
    t = time.perf_counter()
    for _ in range(3):
        step()
    print(f"{name}, batch {batch}, {side}² images: step {(time.perf_counter() - t) / 3 * 1000:.2f} ms (mean of 3)")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))


if __name__ == "__main__":
    main()
