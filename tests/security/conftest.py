"""A second local account, for the tests of docs/SECURITY.md: everything it tries here is what
another user of a shared GPU server could try against the user running trainbridge.

The tests run as root (CI does); the other account is made on first use (`useradd`) and every
one of its attempts runs under it with setpriv (its uid, its gid, no supplementary groups, no
capabilities). Root is the user under attack: its files are what the other account must not
read or redirect (root itself reads everything, so the checks are always made as the other
account). Off root the tests cannot make an account; they skip and say so, and under CI (where
they must run) they fail instead.

The victim's directories live outside pytest's tmp_path, which is 0700 and would hide every
file whatever its own mode: a home directory of 0755, as Debian makes them, and a shared
directory of 0777 (a group's project directory), where another account can plant links.
"""

import os
import pwd
import shutil
import subprocess
import tempfile

import pytest

OTHER = "tbother"


def _make_account():
    try:
        return pwd.getpwnam(OTHER)
    except KeyError:
        pass
    made = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER],
        capture_output=True,
        text=True,
    )
    if made.returncode not in (0, 9):  # 9: another worker made it first
        raise RuntimeError(f"useradd {OTHER} failed: {made.stderr.strip()}")
    return pwd.getpwnam(OTHER)


@pytest.fixture(scope="session")
def other():
    """The other account's passwd entry."""
    if os.geteuid() != 0:
        why = "these tests make a second local account and switch to it: they need root"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the second-user tests, but {why}")
        pytest.skip(why)
    return _make_account()


@pytest.fixture
def as_other(other):
    """Run argv as the other account; returns the CompletedProcess (text)."""

    def run(argv, **kw):
        cmd = [
            "setpriv",
            f"--reuid={other.pw_uid}",
            f"--regid={other.pw_gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--",
            *argv,
        ]
        kw.setdefault("timeout", 60)
        return subprocess.run(cmd, capture_output=True, text=True, cwd="/", **kw)

    return run


@pytest.fixture
def can_read(as_other):
    """Whether the other account can open `path` for reading (a file) or list it (a dir)."""

    def check(path):
        probe = (
            "import os, sys\n"
            "p = sys.argv[1]\n"
            "try:\n"
            "    os.listdir(p) if os.path.isdir(p) else open(p, 'rb').read(1)\n"
            "except OSError as e:\n"
            "    print('refused', e.errno); sys.exit(3)\n"
            "print('read')\n"
        )
        out = as_other(["/usr/bin/python3", "-c", probe, str(path)])
        assert out.returncode in (0, 3), out.stderr
        return out.returncode == 0

    return check


def _dir(mode):
    path = tempfile.mkdtemp(prefix="tb-sec-", dir="/tmp")
    os.chmod(path, mode)
    return path


@pytest.fixture
def home():
    """The user's home: 0755, as Debian makes them (other accounts may traverse it)."""
    path = _dir(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def shared():
    """A directory every account may write in, without the sticky bit (a group's project
    directory): another account can plant files and links in it."""
    path = _dir(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def user_env(home):
    """The environment of the user under attack: XDG dirs in `home`, no PYTHONUNBUFFERED."""
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    env.pop("TRAINBRIDGE_STORE", None)
    env["HOME"] = home
    env["XDG_DATA_HOME"] = os.path.join(home, ".local", "share")
    env["XDG_CONFIG_HOME"] = os.path.join(home, ".config")
    return env
