"""Installed as a user installs it: the wheel and the npm tarball are built
from this checkout, installed into fresh environments in a temporary directory outside the
repository, and an unmodified script with its own `worker.py` and a tqdm bar is supervised
by the installed `trainbridge run` and by the installed Node package.

Nothing here imports from the checkout into the children: their PYTHONPATH, TRAINBRIDGE_*
variables and this machine's PYTHONUNBUFFERED are removed, and their cwd is the temp dir.
Dependencies (pyzmq, msgpack, psutil, rich, nvidia-ml-py, tqdm; uplot for Node) come from
the registries through pip's and npm's caches. No torch is needed.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile

import psutil
import pytest

from trainbridge import __version__

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
STEP_S = 180  # an upper bound for one install step; a step that needs it has failed anyway
TQDM = "tqdm==4.70.1"  # requirements-dev.txt's pin

# What a fresh user would write: its own module named `worker` and a tqdm loop.
USER_WORKER = '''\
"""The training script's own module that happens to be called `worker`."""


def fetch(i):
    return i
'''
USER_TRAIN = '''\
import sys
import time

import worker
from tqdm import tqdm

print("own worker:", worker.__file__, flush=True)
# Not something a script does; it lets the test see which trainbridge (if any) was loaded.
print("trainbridge from:", getattr(sys.modules.get("trainbridge"), "__file__", None), flush=True)
for i in tqdm(range(20), desc="epoch", mininterval=0):
    time.sleep(0.02)
print("fetch ->", worker.fetch(1), flush=True)
'''
# The store from the installed package: submit, attach, ping, send, then rejoin from event N.
NODE_STORE = """\
const { openStore } = require('trainbridge');
const [python, script, storePath] = process.argv.slice(2);
const env = JSON.parse(process.env.INSTALL_TEST_ENV);
(async () => {
  const store = openStore(storePath, { python });
  const id = await store.submit({ command: python, args: ['echo.py'], cwd: script, env });
  const job = store.attach(id);
  const echoed = [];
  job.on('message', (data) => echoed.push(data.echo));
  await new Promise((resolve) => job.once('hello', resolve));
  const rtt = await job.ping({ timeout: 10 });
  await job.send({ n: 1 });
  await job.send('stop');
  const report = await job.done;
  const seqs = [];
  for await (const event of store.attach(id, { since: 3 })) {
    if (event.seq !== null) seqs.push(event.seq);
  }
  await store.close();
  process.stdout.write(JSON.stringify({ rtt, echoed, outcome: report.outcome, seqs }) + '\\n');
})();
"""
# A script that answers what the GUI sends (worker.receive / worker.send).
USER_ECHO = """\
from trainbridge import worker

with worker.stage("serve"):
    while True:
        got = worker.receive(timeout=0.05)
        if got is None:
            continue
        worker.send({"echo": got})
        if got == "stop":
            break
"""
# openStore() with a Python that cannot serve it: the error the GUI gets.
NODE_REFUSED = """\
const { openStore } = require('trainbridge');
const [python, storePath] = process.argv.slice(2);
(async () => {
  const store = openStore(storePath, { python });
  let error = null;
  try { await store.jobs(); } catch (err) { error = err.message; }
  await store.close();
  process.stdout.write(JSON.stringify({ error }) + '\\n');
})();
"""
NODE_RUN = '''\
const { launch } = require('trainbridge');
const [python, cwd] = process.argv.slice(2);
const env = JSON.parse(process.env.INSTALL_TEST_ENV);
const job = launch({ python, args: ['train.py'], cwd, env, timeouts: { startupTimeout: 60 } });
const seen = { spawn: null, noWorker: [], hellos: 0, stages: [], progress: [], lines: [] };
job.on('spawn', (s) => { seen.spawn = s; });
job.on('no_worker', (w) => seen.noWorker.push(w.reason));
job.on('hello', () => { seen.hellos += 1; });
job.on('stage', (s) => { if (s.event === 'begin') seen.stages.push(s.name); });
job.on('progress', (p) => seen.progress.push({ step: p.step, total: p.total, metrics: p.metrics }));
job.on('log', (l) => { if (l.stream !== 'worker') seen.lines.push(l.text); });
const say = (out) => process.stdout.write(JSON.stringify(out) + '\\n');
job.done.then((report) => say({ seen, report }),
  (err) => say({ seen, error: { name: err.name, message: err.message } }));
'''


def sh(cmd, cwd, env=None, timeout=STEP_S):
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (
        f"{cmd} -> {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc.stdout


def clean_env():
    """This machine's environment without anything that points into the checkout."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONUNBUFFERED", "PYTHONPATH", "VIRTUAL_ENV", "NODE_PATH")
        and not k.startswith("TRAINBRIDGE_")
    }
    # Our own venv's bin (scripts/test puts it first) must not supply `python` or `trainbridge`.
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not os.path.abspath(p).startswith(ROOT)
    )
    return env


def venv(tmp, name, *requirements):
    """A fresh venv (no pip of its own) with `requirements` installed by our pip."""
    path = os.path.join(tmp, name)
    sh([sys.executable, "-m", "venv", "--without-pip", path], tmp)
    python = os.path.join(path, "bin", "python")
    if requirements:
        sh(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                python,
                "install",
                "-q",
                "--disable-pip-version-check",
                *requirements,
            ],
            tmp,
        )
    return python


def training_venv(tmp):
    """A GUI's training venv, which supervises its jobs: what the worker needs (pyzmq,
    msgpack) and the script's tqdm, nothing of trainbridge; made once for the module's tests."""
    python = os.path.join(tmp, "train", "bin", "python")
    return python if os.path.exists(python) else venv(tmp, "train", "pyzmq", "msgpack", TQDM)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The wheel and the tarball, built from a copy of the sources (the checkout stays clean)."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.fail("node and npm are needed (scripts/setup's requirements)")
    tmp = str(tmp_path_factory.mktemp("install"))
    src = os.path.join(tmp, "src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules", "*.egg-info")
    for name in ("trainbridge", "protocol", "worker", "bridge"):
        shutil.copytree(os.path.join(ROOT, name), os.path.join(src, name), ignore=ignore)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(os.path.join(ROOT, name), os.path.join(src, name))
    node_src = os.path.join(src, "node-client")
    for name in ("src", "scripts", "dashboard"):
        shutil.copytree(
            os.path.join(ROOT, "node-client", name), os.path.join(node_src, name), ignore=ignore
        )
    for name in ("package.json", "index.d.ts", "README.md"):
        shutil.copy(os.path.join(ROOT, "node-client", name), os.path.join(node_src, name))
    dist = os.path.join(tmp, "dist")
    # setuptools from our venv (requirements-dev.txt pins one that knows PEP 639).
    sh(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            dist,
            src,
        ],
        tmp,
    )
    sh(["npm", "pack", "--silent", "--pack-destination", dist], node_src, env=clean_env())
    wheel = os.path.join(dist, f"trainbridge-{__version__}-py3-none-any.whl")
    tarball = os.path.join(dist, f"trainbridge-{__version__}.tgz")
    assert os.path.isfile(wheel) and os.path.isfile(tarball), os.listdir(dist)
    yield {"tmp": tmp, "wheel": wheel, "tarball": tarball}
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def script(built):
    """The user's unmodified script, in a directory of its own outside the repository."""
    path = os.path.join(built["tmp"], "user-script")
    os.makedirs(path)
    with open(os.path.join(path, "worker.py"), "w") as f:
        f.write(USER_WORKER)
    with open(os.path.join(path, "train.py"), "w") as f:
        f.write(USER_TRAIN)
    with open(os.path.join(path, "echo.py"), "w") as f:
        f.write(USER_ECHO)
    return path


def test_the_wheel_holds_everything_and_asks_only_for_what_each_side_needs(built):
    with zipfile.ZipFile(built["wheel"]) as whl:
        names = set(whl.namelist())
        meta = whl.read(f"trainbridge-{__version__}.dist-info/METADATA").decode()
    for name in (
        "trainbridge/__init__.py",
        "trainbridge/__main__.py",
        "trainbridge/py.typed",
        "trainbridge/protocol/__init__.py",
        "trainbridge/protocol/codec.py",
        "trainbridge/protocol/limits.py",
        "trainbridge/worker/__init__.py",
        "trainbridge/worker/auto.py",
        "trainbridge/bridge/cli.py",
        "trainbridge/bridge/inject/sitecustomize.py",
        "trainbridge/bridge/doctor/__main__.py",
        "trainbridge/bridge/doctor/probe.py",
        f"trainbridge-{__version__}.dist-info/licenses/LICENSE",
    ):
        assert name in names, name
    outside = {"protocol", "worker", "bridge", "tests"} & {n.split("/")[0] for n in names}
    assert not outside, names  # everything is inside `trainbridge`
    requires = [
        line.split(":", 1)[1].strip()
        for line in meta.splitlines()
        if line.startswith("Requires-Dist:")
    ]
    base = sorted(r.split(">")[0] for r in requires if "extra ==" not in r)
    client = sorted(r.split(">")[0] for r in requires if "extra == \"client\"" in r)
    assert base == ["msgpack", "pyzmq"], requires  # the worker's needs, and the supervisor's
    assert client == ["nvidia-ml-py", "rich"], requires  # detail only: GPU figures, a live screen
    assert "License-Expression: MIT" in meta and "Project-URL:" in meta
    assert "Operating System :: POSIX :: Linux" in meta


def test_the_tarball_ships_the_python_package_and_the_dashboard(built):
    with tarfile.open(built["tarball"]) as tgz:
        names = set(tgz.getnames())
        package = json.load(tgz.extractfile("package/package.json"))
    for name in (
        "package/src/index.js",
        "package/index.d.ts",
        "package/LICENSE",
        "package/python/trainbridge/__init__.py",
        "package/python/trainbridge/protocol/codec.py",
        "package/python/trainbridge/worker/__init__.py",
        "package/python/trainbridge/worker/auto.py",
        "package/python/trainbridge/bridge/inject/sitecustomize.py",
        "package/python/trainbridge/bridge/storeserve.py",  # openStore()'s helper
        "package/python/trainbridge/bridge/doctor/probe.py",
        "package/dashboard/cli.js",
        "package/dashboard/public/index.html",
    ):
        assert name in names, name
    assert not any("/test/" in n or "node_modules" in n for n in names), names
    assert package["version"] == __version__  # one version for both packages
    assert package["os"] == ["linux"] and package["license"] == "MIT"
    assert package["bin"] == {"trainbridge-dashboard": "dashboard/cli.js"}
    assert "uplot" in package["dependencies"]  # the dashboard's charts
    assert package["repository"]["url"]


def test_installed_trainbridge_run_supervises_an_unmodified_script(built, script):
    python = venv(built["tmp"], "gui", built["wheel"] + "[client]", TQDM)
    bindir = os.path.dirname(python)
    env = clean_env()
    version = sh([os.path.join(bindir, "trainbridge"), "--version"], script, env=env)
    assert version.startswith(f"trainbridge {__version__} ")
    assert sh([python, "-m", "trainbridge", "--version"], script, env=env) == version
    proc = subprocess.run(
        [os.path.join(bindir, "trainbridge"), "run", "--json", "--", python, "train.py"],
        cwd=script,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_S,
    )
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0, (proc.stderr, events[-1:])
    assert events[0]["event"] == "spawn" and events[0]["command"] == [python, "train.py"]
    messages = [e for e in events if e["event"] == "message"]
    lines = [e["text"] for e in events if e["event"] == "output"]
    hellos = [e for e in messages if e["kind"] == "hello"]
    assert len(hellos) == 1 and hellos[0]["body"]["pid"] == events[0]["pid"]
    began = [
        e["body"]["name"]
        for e in messages
        if e["kind"] == "stage" and e["body"]["event"] == "begin"
    ]
    assert began[:2] == ["startup", "main"], began
    progress = [e["body"] for e in messages if e["kind"] == "progress"]
    assert progress and progress[-1]["step"] == 20 and progress[-1]["total"] == 20, progress
    assert progress[-1]["metrics"]["bar"] == "epoch"
    assert f"own worker: {os.path.join(script, 'worker.py')}" in lines, lines
    site = os.path.join(built["tmp"], "gui", "lib")
    loaded = [line for line in lines if line.startswith("trainbridge from: ")]
    assert loaded and loaded[0].split(": ", 1)[1].startswith(site), loaded  # the wheel's copy
    assert "fetch -> 1" in lines
    report = events[-1]["report"]
    assert report["outcome"] == "succeeded" and report["worker"]["off"] is None, report
    assert not psutil.Process().children(recursive=True)

    # The installed scheduler: submit, then attach from event N and from now.
    cli = os.path.join(bindir, "trainbridge")
    store = ["--store", os.path.join(built["tmp"], "installed-jobs.db")]
    job_id = sh([cli, "submit", *store, "--", python, "train.py"], script, env=env).strip()
    whole = sh([cli, "attach", job_id, *store, "--json"], script, env=env)
    seqs = [json.loads(line)["seq"] for line in whole.splitlines()]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > 10, seqs[:5]
    tail = sh([cli, "attach", job_id, *store, "--json", "--from", str(seqs[-2])], script, env=env)
    assert [json.loads(line)["seq"] for line in tail.splitlines()] == seqs[-2:]
    now = sh([cli, "attach", job_id, *store, "--json", "--now"], script, env=env)
    assert [json.loads(line)["event"] for line in now.splitlines()][0] == "state"
    assert json.loads(now.splitlines()[-1])["report"]["outcome"] == "succeeded"
    assert not psutil.Process().children(recursive=True)


def node_app(built):
    """A GUI project outside the repository with the packed npm package installed."""
    app = os.path.join(built["tmp"], "gui-app")
    if not os.path.isdir(os.path.join(app, "node_modules", "trainbridge")):
        os.makedirs(app, exist_ok=True)
        with open(os.path.join(app, "package.json"), "w") as f:
            json.dump({"name": "gui-app", "private": True}, f)
        for name, text in (
            ("run.js", NODE_RUN),
            ("store.js", NODE_STORE),
            ("refused.js", NODE_REFUSED),
        ):
            with open(os.path.join(app, name), "w") as f:
                f.write(text)
        sh(
            [
                "npm",
                "install",
                "--no-audit",
                "--no-fund",
                "--prefer-offline",
                "--loglevel=error",
                built["tarball"],
            ],
            app,
            env=clean_env(),
        )
    return app


def node_run(built, script, python):
    """run.js in the installed app: (app, {seen, report} or {seen, error}); nothing left running."""
    app = node_app(built)
    env = clean_env()
    env["INSTALL_TEST_ENV"] = json.dumps(clean_env())
    out = sh(["node", "run.js", python, script], app, env=env, timeout=120)
    assert not psutil.Process().children(recursive=True)
    return app, json.loads(out.splitlines()[-1])


def run_node(built, script, python):
    app, result = node_run(built, script, python)
    return app, result["seen"], result["report"]


def test_installed_node_package_brings_the_worker_to_a_venv_without_trainbridge(built, script):
    # The training venv has what the worker needs and nothing of trainbridge: the worker
    # and the zero-code hook come from the npm package.
    python = training_venv(built["tmp"])
    app, seen, report = run_node(built, script, python)
    assert seen["spawn"]["command"] == [python, "train.py"], seen["spawn"]
    assert seen["hellos"] == 1 and seen["stages"][:2] == ["startup", "main"], seen
    assert seen["progress"] and seen["progress"][-1]["step"] == 20, seen["progress"]
    assert seen["progress"][-1]["total"] == 20
    assert f"own worker: {os.path.join(script, 'worker.py')}" in seen["lines"], seen["lines"]
    bundled = os.path.join(
        app, "node_modules", "trainbridge", "python", "trainbridge", "__init__.py"
    )
    assert f"trainbridge from: {bundled}" in seen["lines"], seen["lines"]
    assert "fetch -> 1" in seen["lines"] and seen["noWorker"] == []
    assert report["outcome"] == "succeeded" and report["worker"]["off"] is None, report


def test_installed_node_package_says_what_a_venv_without_pyzmq_needs_to_launch(built, script):
    # The supervisor runs under the training venv's Python: without pyzmq and
    # msgpack, launch() rejects with one sentence naming what to install where, and leaves
    # nothing running.
    python = venv(built["tmp"], "bare", TQDM)
    _, result = node_run(built, script, python)
    assert result["error"] == {
        "name": "LaunchError",
        "message": f"cannot run the trainbridge supervisor with {python}: the trainbridge "
        f"supervisor needs pyzmq and msgpack, not installed for {python}; run "
        f"`{python} -m pip install pyzmq msgpack`",
    }, result
    assert result["seen"]["spawn"] is None, result


def test_the_base_install_supervises_on_its_own_and_names_what_it_lacks(built, script):
    # `pip install trainbridge` in the training venv: pyzmq and msgpack, nothing else. What
    # the worker needs is all the supervisor needs: its own `trainbridge run`
    # supervises, in plain lines without rich. Without pyzmq, one sentence says what to
    # install where.
    base = venv(built["tmp"], "base", built["wheel"], TQDM)
    env = clean_env()
    sh([base, "-c", "import zmq, msgpack, trainbridge.worker"], script, env=env)
    for optional in ("psutil", "rich", "pynvml"):
        probe = subprocess.run(
            [base, "-c", f"import {optional}"], env=env, capture_output=True, timeout=60
        )
        assert probe.returncode != 0, f"{optional} came with the base install"
    bindir = os.path.dirname(base)
    version = sh([os.path.join(bindir, "trainbridge"), "--version"], script, env=env)
    assert version.startswith(f"trainbridge {__version__} ")
    plain = subprocess.run(
        [os.path.join(bindir, "trainbridge"), "run", "--", base, "train.py"],
        cwd=script,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_S,
    )
    assert plain.returncode == 0 and "Traceback" not in plain.stderr, plain.stderr
    assert "fetch -> 1" in plain.stdout.splitlines(), plain.stdout
    assert plain.stdout.splitlines()[-1].startswith("trainbridge: Job succeeded"), plain.stdout
    nodeps = venv(built["tmp"], "nodeps", "--no-deps", built["wheel"])
    refused = subprocess.run(
        [os.path.join(os.path.dirname(nodeps), "trainbridge"), "run", "--", nodeps, "-V"],
        cwd=script,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 125 and "Traceback" not in refused.stderr, refused.stderr
    assert "the trainbridge supervisor needs pyzmq and msgpack" in refused.stderr
    assert f"{nodeps} -m pip install pyzmq msgpack" in refused.stderr
    gui = os.path.join(built["tmp"], "gui", "bin", "trainbridge")
    if not os.path.exists(gui):
        venv(built["tmp"], "gui", built["wheel"] + "[client]", TQDM)
    proc = subprocess.run(
        [gui, "run", "--json", "--", base, "train.py"],
        cwd=script,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_S,
    )
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    hello = [e for e in events if e["event"] == "message" and e["kind"] == "hello"]
    assert len(hello) == 1 and hello[0]["body"]["python"]["executable"] == base
    assert events[-1]["report"]["progress"]["step"] == 20
    # The zero-code hook loads the client's own copy of the worker (one version on both
    # ends of the socket), not the training venv's.
    lines = [e["text"] for e in events if e["event"] == "output"]
    loaded = [line.split(": ", 1)[1] for line in lines if line.startswith("trainbridge from: ")]
    assert loaded and loaded[0].startswith(os.path.join(built["tmp"], "gui", "lib")), loaded


def test_installed_node_package_pings_sends_and_rejoins_a_scheduled_job(built, script):
    """openStore() of the installed npm package, with the training venv that has only pyzmq
    and msgpack (the package brings the supervisor): submit, attach, ping and send
    through the keeper, then rejoin the feed from event 3 (the attached job's API, from the
    tarball as a GUI project gets it)."""
    python = training_venv(built["tmp"])
    app = node_app(built)
    env = clean_env()
    env["INSTALL_TEST_ENV"] = json.dumps(clean_env())
    store = os.path.join(built["tmp"], "node-jobs.db")
    out = sh(["node", "store.js", python, script, store], app, env=env, timeout=120)
    result = json.loads(out.splitlines()[-1])
    assert result["outcome"] == "succeeded", result
    assert result["rtt"] is not None and 0 < result["rtt"] < 10, result
    assert result["echoed"] == [{"n": 1}, "stop"], result
    seqs = result["seqs"]
    # Node's events are its Job's (a feed `lead` or `reply` line has none): in order, from 3.
    assert seqs[0] == 3 and seqs == sorted(set(seqs)) and len(seqs) > 5, seqs
    assert not psutil.Process().children(recursive=True)


def test_installed_node_package_says_what_a_venv_without_pyzmq_needs_for_the_store(built, script):
    bare = os.path.join(built["tmp"], "bare", "bin", "python")
    if not os.path.exists(bare):
        bare = venv(built["tmp"], "bare", TQDM)
    app = node_app(built)
    out = sh(["node", "refused.js", bare, os.path.join(built["tmp"], "refused.db")], app)
    said = json.loads(out.splitlines()[-1])["error"]
    # One sentence: what is missing, for which Python, and the command that installs it
    assert "the trainbridge supervisor needs pyzmq and msgpack" in said, said
    assert f"{bare} -m pip install pyzmq msgpack" in said and "Traceback" not in said, said
    assert not psutil.Process().children(recursive=True)


def test_installed_dashboard_serves_the_store_with_only_pyzmq_and_msgpack(built, script):
    """`npx trainbridge-dashboard` in the GUI project: the package's bin, its page and uPlot,
    and the jobs of a store served by the training venv's Python."""
    python = training_venv(built["tmp"])
    app = node_app(built)
    env = clean_env()
    store = os.path.join(built["tmp"], "dashboard-jobs.db")
    env.update(
        TRAINBRIDGE_PYTHON=python, TRAINBRIDGE_DASHBOARD_TOKEN="install-test-token-0123456789"
    )
    bin_ = os.path.join(app, "node_modules", ".bin", "trainbridge-dashboard")
    dash = subprocess.Popen(
        [bin_, "--store", store, "--port", "0"],
        cwd=app,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = dash.stdout.readline()  # blocks until it serves or exits
        assert first.startswith("trainbridge dashboard: http://127.0.0.1:"), (
            first,
            dash.stderr.read() if dash.poll() is not None else "",
        )
        base = first.split()[2].split("/?token=")[0]
        bearer = {"Authorization": "Bearer install-test-token-0123456789"}

        def get(path):
            req = urllib.request.Request(base + path, headers=bearer)
            with urllib.request.urlopen(req, timeout=30) as answer:
                return answer.status, answer.read()

        status, page = get("/")
        assert status == 200 and b"<html" in page.lower()
        status, uplot = get("/vendor/uPlot.esm.js")
        assert status == 200 and len(uplot) > 10_000  # the dependency came with the package
        body = json.dumps({"kind": "command", "argv": [python, "train.py"], "cwd": script})
        body = body.encode()
        req = urllib.request.Request(
            base + "/api/jobs",
            data=body,
            headers={**bearer, "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=30) as answer:
            job_id = json.loads(answer.read())["id"]
        deadline = time.monotonic() + STEP_S
        while time.monotonic() < deadline:
            rows = json.loads(get("/api/jobs")[1])
            row = next((r for r in rows if r["id"] == job_id), None)
            if row and row.get("outcome"):
                break
            time.sleep(0.2)  # polling the dashboard as a page would: nothing to wait on
        assert row and row["outcome"] == "succeeded", row
    finally:
        dash.send_signal(signal.SIGINT)
        dash.wait(timeout=60)
    assert dash.returncode == 0, dash.stderr.read()
    assert not psutil.Process().children(recursive=True)
