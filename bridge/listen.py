"""Ranks of other hosts (docs/CLIENT.md "Other hosts"), as text: the `--listen` address
checked, and the file of variables a user sources on node 2 and up before torchrun. Pure:
whether the address is this host's and the file itself are bridge/remote.py's."""

from __future__ import annotations

import ipaddress
import shlex

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


def env_file_text(variables: dict[str, str]) -> str:
    """A POSIX shell file of `export NAME='value'` lines."""
    lines = [
        ENV_FILE_MARK + " for its ranks on other hosts. Secret:",
        "# whoever holds them can speak as the job. On each other host: copy it there",
        "# (mode 0600), then `. ./THIS_FILE` in the shell that runs torchrun.",
    ]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in sorted(variables.items())]
    return "\n".join(lines) + "\n"
