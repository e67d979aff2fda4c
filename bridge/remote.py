"""Ranks of other hosts (docs/CLIENT.md "Other hosts"): the `--listen` address and the
file of variables a user sources on node 2 and up before torchrun. Pure but for the file."""

from __future__ import annotations

import errno
import ipaddress
import shlex
import socket

from trainbridge.bridge import private_files

ENV_FILE_MARK = "# trainbridge: the variables of one job"


def parse_listen(text: str) -> tuple[str, int]:
    """ "ADDR" or "ADDR:PORT" ("[v6]:PORT") -> (address, port; 0: a free port). Raises
    ValueError that says what is wrong."""
    address, port = text, "0"
    if text.startswith("["):
        address, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else "0"
    elif text.count(":") == 1:
        address, port = text.split(":")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise ValueError(
            f"--listen {text}: {address!r} is not an IP address (give this host's address "
            "on the network the other hosts reach it by, e.g. 10.0.0.1 or 10.0.0.1:29600)"
        ) from None
    check_address(str(ip))
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--listen {text}: the port must be a number from 0 to 65535")
    return str(ip), int(port)


def check_address(address: str) -> None:
    """Other hosts cannot reach a loopback address, and the client tells the ranks of other
    hosts from its own by the address they connect from (bridge/hub.py)."""
    if ipaddress.ip_address(address).is_loopback:
        raise ValueError(
            f"listen address {address} is a loopback address, which other hosts cannot "
            "reach; give this host's address on their network"
        )


def check_local(address: str) -> None:
    """Raise ValueError, in words, when `address` is not one of this host's (nothing could
    listen there)."""
    ip = ipaddress.ip_address(address)
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((address, 0))
        except OSError as exc:
            if exc.errno != errno.EADDRNOTAVAIL:
                raise
            raise ValueError(
                f"listen address {address} is not an address of this host; give this "
                "host's address on the network the other hosts reach it by (`ip -brief "
                "address` lists them)"
            ) from None


def env_file_text(variables: dict[str, str]) -> str:
    """A POSIX shell file of `export NAME='value'` lines."""
    lines = [
        ENV_FILE_MARK + " for its ranks on other hosts. Secret:",
        "# whoever holds them can speak as the job. On each other host: copy it there",
        "# (mode 0600), then `. ./THIS_FILE` in the shell that runs torchrun.",
    ]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in sorted(variables.items())]
    return "\n".join(lines) + "\n"


def check_env_file(path: str) -> None:
    """Raise OSError when write_env_file(path, ...) would be refused: checked before the job
    starts, so a bad --rank-env costs no job."""
    private_files.check_replaceable(path, ENV_FILE_MARK.encode("ascii"))


def write_env_file(path: str, variables: dict[str, str]) -> None:
    """Write the file readable by this user only (0600). A file already there is replaced
    only when it is this user's and an earlier --rank-env file (it starts with ENV_FILE_MARK);
    anything else is refused (private_files.PrivateFileError): the keys never go into a file
    whose readers trainbridge did not choose."""
    private_files.create_exclusive(
        path, env_file_text(variables).encode("ascii"), marker=ENV_FILE_MARK.encode("ascii")
    )
