"""Every shell, Python and JS block of the documentation runs as a reader copies it:
README.md, docs/*.md and node-client/README.md. Each block is its own test, named FILE:LINE
(the line of its opening fence), and what its text claims it prints is asserted.

A block is run unless the Markdown says otherwise, with HTML comments on the lines just above
its fence (several may be stacked; each is `<!-- doc-test: KIND ARGS -->`):

  skip REASON                  not run here (a GPU, a second host, a server that runs until
                               Ctrl-C, the full test command itself, a synopsis); reported as
                               skipped with REASON
  omit "PREFIX" REASON         the block's lines that start with PREFIX are left out of the run;
                               each is reported as its own skipped test (FILE:ITS_LINE)
  output "TEXT" ["TEXT" ...]   the block's stdout+stderr must contain each TEXT
  exit N                       its exit status must be N (default 0); a shell block then runs
                               every line (as pasted into a terminal) instead of under `set -e`
  replace "OLD" "NEW" REASON   OLD is replaced by NEW in the text that runs (to shorten a demo)
  with FILE                    tests/install/doc_blocks/FILE is put in front of the block: the
                               names a reader supplies (a loader, a `ui` object)
  via "COMMAND"                a Python block runs as the script of COMMAND (e.g. under
                               `trainbridge run --`), not as a plain `python block.py`
  deadline S                   seconds the block may take (default DEADLINE_S)

An unknown marker, a marker that is not directly above a fence, or a block in a programming
language this file has no runner for (e.g. ```ts) is a failure, so no block escapes silently.
Blocks without a language, and json blocks, are output samples and formats: not run.

Placeholders the harness substitutes in every block (PLACEHOLDERS below):
  /path/to/training/venv/bin/python   this checkout's .venv/bin/python
  /path/to/project                    the block's scratch project directory
  /path/to/job.log, /path/jobs.db     files in it
  ID (a whole word, shell blocks)     the newest job's id (`trainbridge jobs --json --limit 1`)
and `train.py` in the scratch directory is doc_blocks/train.py (a few fast steps, no torch).

Where: each block runs in a fresh scratch directory under /tmp (short: ipc paths are limited)
with HOME, XDG_* , TMPDIR and TRAINBRIDGE_STORE inside it, .venv/bin first on PATH and
PYTHONUNBUFFERED, PYTHONPATH, VIRTUAL_ENV and TRAINBRIDGE_* removed. Python blocks run with the
venv's python; JS blocks as an ES module under node (top-level await), where `require` resolves
`trainbridge` to this checkout's node-client through a node_modules link. A shell block that
names the checkout's files (scripts/, .venv/, node-client, tests/, examples/) runs from a copy
of the checkout's top level made of links, so what it writes at the top (a demo's report)
lands in the scratch directory; node-client/README.md's `npm run`/`npm test` blocks run in
node-client. Afterwards the block's process group and every process that still names the
scratch directory (a keeper, a training child) are ended.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field

import psutil
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "doc_blocks")
VENV_BIN = os.path.join(ROOT, ".venv", "bin")
PYTHON = os.path.join(VENV_BIN, "python")
DEADLINE_S = 120

RUNNERS = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python", "py": "python"}
RUNNERS.update({"js": "js", "javascript": "js", "mjs": "js"})
# Code a reader would run, for which there is no runner here: a failure until one is added or
# the block is marked skip.
NO_RUNNER = {"ts", "typescript", "zsh", "fish", "console", "powershell", "ps1", "bat", "cmd"}
KINDS = {"skip", "omit", "output", "exit", "replace", "with", "via", "deadline"}

NEWEST_JOB = (
    "\"$(trainbridge jobs --json --limit 1 | python -c 'import json, sys; "
    "print(json.load(sys.stdin)[0][\"id\"])')\""
)


def placeholders(project):
    return {
        "/path/to/training/venv/bin/python": PYTHON,
        "/path/to/project": project,
        "/path/to/job.log": os.path.join(project, "job.log"),
        "/path/jobs.db": os.path.join(project, "jobs.db"),
    }


REPO_PATHS = re.compile(r"(?<![\w/.-])(scripts/|\.venv/|node-client\b|tests/|examples/)")
MARKER = re.compile(r"^<!-- doc-test: (\S+)\s*(.*?)\s*-->\s*$")
QUOTED = re.compile(r'\s*"((?:[^"\\]|\\.)*)"')


@dataclass
class Block:
    doc: str  # path relative to ROOT
    line: int  # the opening fence's line, 1-based
    lang: str
    lines: list  # [(line number, text)]
    markers: list = field(default_factory=list)  # [(kind, quoted args, rest, line number)]

    def marks(self, kind):
        return [m for m in self.markers if m[0] == kind]


def split_args(text):
    """'"a" "b" rest of it' -> (["a", "b"], "rest of it")."""
    quoted = []
    while True:
        m = QUOTED.match(text)
        if not m:
            return quoted, text.strip()
        quoted.append(m.group(1).replace('\\"', '"'))
        text = text[m.end() :]


def documents():
    docs = ["README.md"]
    docs += sorted("docs/" + n for n in os.listdir(os.path.join(ROOT, "docs")) if n.endswith(".md"))
    docs.append("node-client/README.md")
    return [d for d in docs if os.path.exists(os.path.join(ROOT, d))]


def parse(doc):
    """The fenced blocks of `doc`, and the problems with its markers."""
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        return parse_text(doc, f.read())


def parse_text(doc, markdown):
    blocks, problems, pending, current = [], [], [], None
    for number, line in enumerate(markdown.splitlines(), 1):
        if current is not None:
            if line.strip() == "```":
                blocks.append(current)
                current = None
            else:
                current.lines.append((number, line))
            continue
        marker = MARKER.match(line)
        fence = re.match(r"^```\s*([\w+-]*)\s*$", line)
        if marker:
            kind, rest = marker.groups()
            if kind not in KINDS:
                problems.append(f"{doc}:{number}: unknown doc-test marker {kind!r}")
            quoted, rest = split_args(rest)
            pending.append((kind, quoted, rest, number))
        elif fence:
            current = Block(doc, number, fence.group(1).lower(), [], pending)
            pending = []
        elif pending:
            problems.append(f"{doc}:{pending[0][3]}: a doc-test marker not directly above a fence")
            pending = []
    if pending:
        problems.append(f"{doc}:{pending[0][3]}: a doc-test marker not directly above a fence")
    if current is not None:
        problems.append(f"{doc}:{current.line}: a fence that is never closed")
    return blocks, problems


def marker_problems(block):
    problems = []
    where = f"{block.doc}:{block.line}"
    for kind, quoted, rest, number in block.markers:
        ok = {
            "skip": not quoted and rest,
            "omit": len(quoted) == 1 and rest,
            "output": quoted and not rest,
            "exit": not quoted and rest.isdigit(),
            "replace": len(quoted) == 2 and rest,
            "with": not quoted and os.path.isfile(os.path.join(FIXTURES, rest)),
            "via": len(quoted) == 1 and not rest,
            "deadline": not quoted and rest.isdigit(),
        }.get(kind, True)
        if not ok:
            problems.append(
                f"{block.doc}:{number}: malformed `{kind}` marker (see this file's doc)"
            )
    if block.lang not in RUNNERS and block.lang not in NO_RUNNER and block.markers:
        problems.append(f"{where}: doc-test markers on a {block.lang or 'plain'} block (not run)")
    for _, quoted, _, number in block.marks("omit"):
        if not any(text.startswith(quoted[0]) for _, text in block.lines):
            problems.append(f"{block.doc}:{number}: no line of the block starts with {quoted[0]!r}")
    for _, quoted, _, number in block.marks("replace"):
        if not any(quoted[0] in text for _, text in block.lines):
            problems.append(f"{block.doc}:{number}: {quoted[0]!r} is not in the block")
    return problems


ALL = [(doc, *parse(doc)) for doc in documents()]


def cases():
    out = []
    for _, blocks, _ in ALL:
        for block in blocks:
            where = f"{block.doc}:{block.line}"
            if block.lang not in RUNNERS and block.lang not in NO_RUNNER:
                continue  # output samples, formats, plain text
            skip = block.marks("skip")
            if skip:
                out.append(pytest.param(block, id=where, marks=pytest.mark.skip(reason=skip[0][2])))
                continue
            for _, quoted, reason, _ in block.marks("omit"):
                for number, text in block.lines:
                    if text.startswith(quoted[0]):
                        out.append(
                            pytest.param(
                                None,
                                id=f"{block.doc}:{number}",
                                marks=pytest.mark.skip(reason=f"left out of {where}: {reason}"),
                            )
                        )
            out.append(pytest.param(block, id=where))
    return out


def test_every_marker_is_known_well_formed_and_on_a_block():
    problems = [p for _, blocks, parsed in ALL for p in parsed]
    problems += [p for _, blocks, _ in ALL for b in blocks for p in marker_problems(b)]
    assert not problems, "\n".join(problems)


def test_the_harness_reports_what_would_let_a_block_escape():
    markdown = """\
<!-- doc-test: skp typo -->
```sh
true
```
<!-- doc-test: skip away from its block -->

```sh
true
```
<!-- doc-test: output "a" -->
```
not run
```
"""
    blocks, problems = parse_text("X.md", markdown)
    problems += [p for b in blocks for p in marker_problems(b)]
    assert problems == [
        "X.md:1: unknown doc-test marker 'skp'",
        "X.md:5: a doc-test marker not directly above a fence",
        "X.md:11: doc-test markers on a plain block (not run)",
    ]
    assert [(b.line, b.lang) for b in blocks] == [(2, "sh"), (7, "sh"), (11, "")]


def ascii_text(text):
    return text.encode("ascii", "backslashreplace").decode("ascii")


def scratch_env(scratch):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONUNBUFFERED", "PYTHONPATH", "VIRTUAL_ENV", "NODE_PATH")
        and not k.startswith(("TRAINBRIDGE_", "PYTEST_", "npm_"))
    }
    home = os.path.join(scratch, "home")
    dirs = {
        "HOME": home,
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "XDG_STATE_HOME": os.path.join(home, ".local", "state"),
        "XDG_RUNTIME_DIR": os.path.join(scratch, "run"),
        "TMPDIR": os.path.join(scratch, "tmp"),
    }
    for path in dirs.values():
        os.makedirs(path, mode=0o700, exist_ok=True)
    env.update(dirs)
    env["TRAINBRIDGE_STORE"] = os.path.join(scratch, "store", "jobs.db")
    env["PATH"] = VENV_BIN + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    return env


def repo_view(scratch):
    """The checkout's top level as links, in the scratch directory: `scripts/demo` works from
    it, and what a script writes at the top lands here, not in the checkout."""
    view = os.path.join(scratch, "repo")
    os.mkdir(view)
    for name in os.listdir(ROOT):
        if name != ".git":
            os.symlink(os.path.join(ROOT, name), os.path.join(view, name))
    return view


def program(block, project):
    """The text that runs: omitted lines out, placeholders and replacements in."""
    omit = [q[0] for _, q, _, _ in block.marks("omit")]
    text = "\n".join(t for _, t in block.lines if not any(t.startswith(p) for p in omit)) + "\n"
    for _, (old, new), _, _ in block.marks("replace"):
        text = text.replace(old, new)
    for old, new in placeholders(project).items():
        text = text.replace(old, new)
    if RUNNERS[block.lang] == "sh":
        text = re.sub(r"(?<![\w$-])ID\b", NEWEST_JOB, text)
    preludes = []
    for _, _, name, _ in block.marks("with"):
        with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
            preludes.append(f.read() + "\n")
    text = "".join(preludes) + text
    return text


def leftovers(scratch):
    """Processes other than this one that still name the scratch directory."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "cwd", "environ"]):
        if proc.pid == os.getpid():
            continue
        info = proc.info
        names = [info.get("cwd") or "", *(info.get("cmdline") or [])]
        names += list((info.get("environ") or {}).values())
        if any(scratch in (n or "") for n in names):
            found.append(proc)
    return found


def end_everything(proc, scratch):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    rest = leftovers(scratch)
    for p in rest:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(rest, timeout=5)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=5)


@pytest.mark.parametrize("block", cases())
def test_doc_block(block):
    where = f"{block.doc}:{block.line}"
    runner = RUNNERS.get(block.lang)
    assert runner, (
        f"{where}: no runner for a {block.lang} block: add one to {__file__} or mark the block "
        "<!-- doc-test: skip REASON -->"
    )
    scratch = tempfile.mkdtemp(prefix="tbdoc-", dir="/tmp")
    try:
        run_block(block, runner, scratch, where)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_block(block, runner, scratch, where):
    env = scratch_env(scratch)
    project = os.path.join(scratch, "project")
    os.mkdir(project)
    shutil.copy(os.path.join(FIXTURES, "train.py"), project)
    os.mkdir(os.path.join(project, "node_modules"))
    os.symlink(
        os.path.join(ROOT, "node-client"), os.path.join(project, "node_modules", "trainbridge")
    )
    text = program(block, project)
    expect_exit = int(block.marks("exit")[0][2]) if block.marks("exit") else 0
    cwd = project
    if runner == "sh":
        if block.doc == "node-client/README.md" and re.search(r"\bnpm (run|test)\b", text):
            cwd = os.path.join(repo_view(scratch), "node-client")
        elif REPO_PATHS.search(text):
            cwd = repo_view(scratch)
        script = os.path.join(scratch, "block.sh")
        argv = ["bash", script] if block.marks("exit") else ["bash", "-e", script]
    elif runner == "python":
        script = os.path.join(project, "doc_block.py")
        via = block.marks("via")
        argv = (via[0][1][0].split() if via else []) + [PYTHON, script]
    else:
        script = os.path.join(project, "doc_block.mjs")
        text = (
            "import { createRequire } from 'node:module';\n"
            "const require = createRequire(import.meta.url);\n" + text
        )
        argv = ["node", script]
    with open(script, "w", encoding="utf-8") as f:
        f.write(text)
    deadline = int(block.marks("deadline")[0][2]) if block.marks("deadline") else DEADLINE_S
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=deadline)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        end_everything(proc, scratch)
    if timed_out:
        out, _ = proc.communicate()
    output = ascii_text(out.decode("utf-8", "replace"))
    shown = f"--- {where} ran (in {cwd}):\n{ascii_text(text)}--- its output:\n{output[-4000:]}"
    assert not timed_out, f"{where}: still running after {deadline} s\n{shown}"
    assert proc.returncode == expect_exit, f"{where}: exit {proc.returncode}\n{shown}"
    for _, quoted, _, _ in block.marks("output"):
        for want in quoted:
            assert want in output, f"{where}: {want!r} not in its output\n{shown}"
