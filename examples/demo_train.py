"""A small real training run (torch on the CPU, synthetic data, a few seconds) that reports
its stages and progress to trainbridge, and can misbehave on purpose to show each outcome.

    scripts/demo                                  # succeeded
    scripts/demo --fail-at train                  # failed: an exception in stage 'train'
    scripts/demo --crash-at model                 # crashed: SIGSEGV in native code
    scripts/demo --hang-at data                   # hung (needs --stall-timeout or a budget)
    scripts/demo --hang-at save --hang-budget 2   # hung: 'save' overran its 2 s budget

Under `trainbridge run` (scripts/demo does that) the worker reports to the live view; run
alone (`python examples/demo_train.py`) it trains the same way and the worker stays silent.
"""

import argparse
import ctypes
import math
import os
import tempfile
import threading
import time

from trainbridge import worker

STAGES = ("config", "data", "model", "optimizer", "train", "save")


def misbehave(stage: str, args: argparse.Namespace) -> None:
    """Do what the options asked for when the run reaches `stage`."""
    if args.fail_at == stage:
        raise RuntimeError(f"demo failure requested with --fail-at {stage}")
    if args.crash_at == stage:
        print(f"crashing in stage {stage} (SIGSEGV through ctypes)", flush=True)
        ctypes.string_at(0)
    if args.hang_at == stage:
        print(f"hanging in stage {stage} (waiting on an event nobody sets)", flush=True)
        threading.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    parser.add_argument("--fail-at", choices=STAGES, help="raise an exception in this stage")
    parser.add_argument("--hang-at", choices=STAGES, help="block forever in this stage")
    parser.add_argument("--crash-at", choices=STAGES, help="segfault in this stage")
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help="time budget in seconds for every stage (hung when overrun)",
    )
    parser.add_argument(
        "--out",
        default=os.path.join(tempfile.gettempdir(), "trainbridge-demo", "model.pt"),
        help="where the trained weights go (default: in the temp dir)",
    )
    parser.add_argument(
        "--hang-budget",
        type=float,
        default=None,
        help="time budget in seconds for the --hang-at stage only: the hang is "
        "declared there, however long the stages before it take",
    )
    args = parser.parse_args()

    def budget(stage: str):
        if args.hang_budget is not None and stage == args.hang_at:
            return args.hang_budget
        return args.budget

    with worker.stage("config", budget=budget("config")):
        misbehave("config", args)
        import torch  # inside a stage: a slow or stuck import is visible as such

        torch.manual_seed(0)
        torch.set_num_threads(1)
        print(f"torch {torch.__version__}, {args.steps} steps", flush=True)

    with worker.stage("data", budget=budget("data")):
        misbehave("data", args)
        n, features = 4096, 32
        x = torch.randn(n, features)
        true_w = torch.randn(features, 1)
        y = x @ true_w + 0.1 * torch.randn(n, 1)
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(x, y), batch_size=64, shuffle=True
        )

    with worker.stage("model", budget=budget("model")):
        misbehave("model", args)
        model = torch.nn.Sequential(
            torch.nn.Linear(features, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)
        )

    with worker.stage("optimizer", budget=budget("optimizer")):
        misbehave("optimizer", args)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        loss_fn = torch.nn.MSELoss()

    with worker.stage("train", budget=budget("train")):
        step = 0
        started = time.monotonic()
        while step < args.steps:
            for xb, yb in loader:
                if step == args.steps // 2:
                    misbehave("train", args)
                optimizer.zero_grad()
                loss = loss_fn(model(xb), yb)
                loss.backward()
                optimizer.step()
                step += 1
                worker.progress(step, args.steps, loss=round(loss.item(), 5))
                if step % 50 == 0 or step == args.steps:
                    print(f"step {step}/{args.steps} loss {loss.item():.4f}", flush=True)
                # A few seconds in all, so the live view has something to show.
                time.sleep(0.005)
                if step >= args.steps:
                    break
        if not math.isfinite(loss.item()):
            raise FloatingPointError(f"loss diverged: {loss.item()}")
        rate = step / max(time.monotonic() - started, 1e-9)
        print(
            f"trained {step} steps at {rate:.0f} steps/s, final loss {loss.item():.4f}", flush=True
        )

    with worker.stage("save", budget=budget("save")):
        misbehave("save", args)
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        torch.save(model.state_dict(), args.out)
        print(f"saved {args.out}", flush=True)


if __name__ == "__main__":
    main()
