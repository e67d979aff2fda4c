"""The cheap environment facts every hello carries (PROTOCOL.md section 5), so each job
report can say what it ran on; and the parent-death settings read from the environment."""

from __future__ import annotations

import os
import subprocess
import sys

from trainbridge.worker import config as worker_config
from trainbridge.worker import facts


def _hello(receiver, tmp_path, **env_changes):
    env = receiver.env()
    env.pop("PYTHONUNBUFFERED", None)  # as real users run, unless a test sets it
    for name, value in env_changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    proc = subprocess.Popen(
        [sys.executable, "-c", "from trainbridge import worker; assert worker.enabled()"],
        env=env,
        cwd=str(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    return receiver.wait_for(lambda r: r.kind == "hello" and r.body["pid"] == proc.pid).body


def test_hello_says_what_the_process_runs_on(receiver, tmp_path):
    hello = _hello(receiver, tmp_path)
    assert hello["python"]["venv"] == (sys.prefix != sys.base_prefix)
    assert hello["cpu_count"] == os.cpu_count()
    assert hello["nvidia"] == facts.nvidia_driver()  # None on a machine without the driver
    assert hello["detached"] is False
    # stdout is a pipe and PYTHONUNBUFFERED is unset: print() output arrives in blocks.
    assert hello["stdout"] == {
        "isatty": False,
        "line_buffering": False,
        "write_through": False,
        "pythonunbuffered": False,
        "buffered": True,
    }


def test_a_non_utf8_locale_shows_even_when_it_is_not_used(receiver, tmp_path):
    # The C locale without coercion or UTF-8 mode: Python's ASCII locale encoding.
    hello = _hello(
        receiver,
        tmp_path,
        LC_ALL="C",
        LANG="C",
        PYTHONCOERCECLOCALE="0",
        PYTHONUTF8="0",
        PYTHONIOENCODING=None,
    )
    encoding = hello["encoding"]
    assert encoding["utf8_mode"] is False
    assert encoding["locale"].lower().replace("-", "") not in ("utf8", "")
    assert encoding["preferred"] == encoding["locale"]
    # UTF-8 mode (which the clients turn on) changes what is used, not what the locale is.
    utf8 = _hello(
        receiver,
        tmp_path,
        LC_ALL="C",
        LANG="C",
        PYTHONCOERCECLOCALE="0",
        PYTHONUTF8="1",
        PYTHONUNBUFFERED="1",
    )
    assert utf8["encoding"]["utf8_mode"] is True
    assert utf8["encoding"]["preferred"] == "utf-8"
    assert utf8["encoding"]["stdout"] == "utf-8"
    assert utf8["encoding"]["locale"] == encoding["locale"]
    assert utf8["stdout"]["buffered"] is False and utf8["stdout"]["pythonunbuffered"] is True


def test_nvidia_driver_version_from_the_kernel_modules_first_line(tmp_path):
    proprietary = tmp_path / "proprietary"
    proprietary.write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  "
        "Sat Aug 19 01:15:15 UTC 2023\nGCC version:  gcc 12\n"
    )
    assert facts.nvidia_driver(str(proprietary)) == {
        "driver": "535.104.05",
        "line": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  "
        "Sat Aug 19 01:15:15 UTC 2023",
    }
    open_module = tmp_path / "open"
    open_module.write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
        "550.54.14  Release Build  (dvs-builder@U16)  Thu Feb 22 2024\n"
    )
    assert facts.nvidia_driver(str(open_module))["driver"] == "550.54.14"
    odd = tmp_path / "odd"
    odd.write_text("something else entirely\n")
    assert facts.nvidia_driver(str(odd)) == {"driver": None, "line": "something else entirely"}
    assert facts.nvidia_driver(str(tmp_path / "absent")) is None


BASE = {
    "TRAINBRIDGE_ENDPOINT": "ipc:///tmp/x.sock",
    "TRAINBRIDGE_JOB_ID": "job-1",
    "TRAINBRIDGE_KEY": "ab" * 32,
}


def test_parent_death_settings():
    config, problem = worker_config.from_env(
        dict(BASE, TRAINBRIDGE_CLIENT_PID="4242", TRAINBRIDGE_KILL_GRACE_S="2.5")
    )
    assert problem is None
    assert (config.client_pid, config.detached, config.kill_grace_s) == (4242, False, 2.5)
    # Detached: the client's pid (inherited from an outer job, say) is not watched.
    config, _ = worker_config.from_env(
        dict(BASE, TRAINBRIDGE_CLIENT_PID="4242", TRAINBRIDGE_DETACHED="1")
    )
    assert (config.client_pid, config.detached) == (None, True)
    # Defaults: no client to watch, a 5 s grace.
    config, _ = worker_config.from_env(BASE)
    assert (config.client_pid, config.detached, config.kill_grace_s) == (None, False, 5.0)
    _, problem = worker_config.from_env(dict(BASE, TRAINBRIDGE_KILL_GRACE_S="-1"))
    assert "TRAINBRIDGE_KILL_GRACE_S" in problem
