# An unmodified training loop whose run length is known only to its LR schedule,
# or to nobody: argv[1] picks the pattern.
#   cosine_per_step   CosineAnnealingLR(T_max=30) stepped after every optimizer step
#   cosine_per_epoch  CosineAnnealingLR(T_max=3 epochs) stepped once per epoch of 10 batches
#   poly_per_step     PolynomialLR(total_iters=30)
#   sequential        SequentialLR(warmup LinearLR, then cosine): composite, length unknown
#   by_hand           nanoGPT's pattern: lr set by hand from max_iters (get_lr), no scheduler
import math
import sys

import torch

pattern = sys.argv[1]
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
lrs = torch.optim.lr_scheduler
x, y = torch.randn(16, 4), torch.randn(16, 1)
epochs, batches = 3, 10
max_iters = epochs * batches
sched = None
if pattern == "cosine_per_step":
    sched = lrs.CosineAnnealingLR(opt, T_max=max_iters)
elif pattern == "cosine_per_epoch":
    sched = lrs.CosineAnnealingLR(opt, T_max=epochs)
elif pattern == "poly_per_step":
    sched = lrs.PolynomialLR(opt, total_iters=max_iters)
elif pattern == "sequential":
    warm = lrs.LinearLR(opt, start_factor=0.1, total_iters=5)
    cos = lrs.CosineAnnealingLR(opt, T_max=max_iters - 5)
    sched = lrs.SequentialLR(opt, [warm, cos], milestones=[5])


def get_lr(it):
    return 0.1 * 0.5 * (1.0 + math.cos(math.pi * it / max_iters))


it = 0
for epoch in range(epochs):
    for batch in range(batches):
        if pattern == "by_hand":
            for group in opt.param_groups:
                group["lr"] = get_lr(it)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        it += 1
        if sched is not None and pattern != "cosine_per_epoch":
            sched.step()
    if pattern == "cosine_per_epoch":
        sched.step()
print(f"done {it} steps", flush=True)
