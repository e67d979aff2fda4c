"""The files a job made (worker.artifact; zero-code: torch.save and PIL's Image.save to a
path): listed in the report in the order said, with their kind, size and step; bounded and
counted past 1,000 per process. The Node twin: node-client/test/artifacts.test.js."""

import os
import sys

from trainbridge import bridge

from .conftest import WAIT_S, assert_tree_gone, validate_report

EXPLICIT = """
import os, sys
from trainbridge import worker
out = sys.argv[1]
worker.progress(10, 100)
open(os.path.join(out, "ckpt-10.pt"), "wb").write(b"x" * 1000)
assert worker.artifact(os.path.join(out, "ckpt-10.pt"))
assert worker.artifact(os.path.join(out, "grid.png"), kind="image", step=12)
os.mkdir(os.path.join(out, "final"))
assert worker.artifact(os.path.join(out, "final"))
try:
    worker.artifact("x.bin", kind="weights")
except ValueError as exc:
    print(exc)
"""


def test_files_the_script_names_are_listed_with_kind_size_and_step(tmp_path):
    job = bridge.launch([sys.executable, "-c", EXPLICIT, str(tmp_path)], zero_code=False)
    report = job.wait(WAIT_S)
    assert report is not None and report.outcome == "succeeded", report.summary
    validate_report(report)
    got = [
        {k: a[k] for k in ("name", "kind", "bytes", "step", "by", "rank")}
        for a in report["artifacts"]
    ]
    assert got == [
        {
            "name": "ckpt-10.pt",
            "kind": "checkpoint",
            "bytes": 1000,
            "step": 10,
            "by": "script",
            "rank": 0,
        },
        {"name": "grid.png", "kind": "image", "bytes": None, "step": 12, "by": "script", "rank": 0},
        {
            "name": "final",
            "kind": "checkpoint",
            "bytes": None,
            "step": 10,
            "by": "script",
            "rank": 0,
        },
    ]
    assert report["artifacts"][0]["path"] == os.path.join(str(tmp_path), "ckpt-10.pt")
    assert any(
        "kind must be one of checkpoint, image, file, not 'weights'" in line
        for line in report["log_tail"]
    )
    said = [e["body"]["name"] for e in job.events(timeout=0) if e.get("kind") == "artifact"]
    assert said == ["ckpt-10.pt", "grid.png", "final"]
    assert_tree_gone(job)


UNMODIFIED = """
import sys, torch
from PIL import Image
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1, 5):
    model(torch.ones(1, 2)).sum().backward(); opt.step(); opt.zero_grad()
    Image.new("RGB", (4, 4)).save(f"{sys.argv[1]}/sample-{step}.png")
torch.save(model.state_dict(), f"{sys.argv[1]}/model.pt")
torch.save(model.state_dict(), open(f"{sys.argv[1]}/by-file-object.pt", "wb"))
Image.new("RGB", (4, 4)).save(fp=f"{sys.argv[1]}/by-keyword.png")
from safetensors.torch import save_file
save_file({"w": torch.zeros(2)}, f"{sys.argv[1]}/lora.safetensors")
"""


def test_an_unmodified_script_s_checkpoint_and_samples_are_listed(tmp_path):
    """Zero-code: torch.save and Image.save to a path (a file object names no file)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    job = bridge.launch([sys.executable, "-c", UNMODIFIED, str(tmp_path)], env=env)
    report = job.wait(WAIT_S)
    assert report is not None and report.outcome == "succeeded", report.summary
    got = [(a["name"], a["kind"], a["step"], a["by"]) for a in report["artifacts"]]
    assert got == [
        ("sample-1.png", "image", 1, "Image.save"),
        ("sample-2.png", "image", 2, "Image.save"),
        ("sample-3.png", "image", 3, "Image.save"),
        ("sample-4.png", "image", 4, "Image.save"),
        ("model.pt", "checkpoint", 4, "torch.save"),
        ("by-keyword.png", "image", 4, "Image.save"),
        ("lora.safetensors", "checkpoint", 4, "safetensors.save_file"),
    ]
    sizes = {a["name"]: a["bytes"] for a in report["artifacts"]}
    assert sizes["model.pt"] == os.path.getsize(tmp_path / "model.pt")
    assert_tree_gone(job)


def test_past_1000_files_each_is_counted_and_said():
    code = (
        "from trainbridge import worker\nfor i in range(1005): worker.artifact(f'/tmp/s-{i}.png')"
    )
    job = bridge.launch([sys.executable, "-c", code], zero_code=False)
    report = job.wait(WAIT_S)
    assert report is not None and report.outcome == "succeeded", report.summary
    assert len(report["artifacts"]) == 1000
    assert report["dropped"]["artifacts"] == 5
    assert "5 more files the job made were not listed" in report.summary, report.summary
