"""Ranks of other hosts (docs/CLIENT.md "Other hosts"), the I/O: whether a `--listen`
address is one of this host's, and the file of variables a user sources on node 2 and up
before torchrun. The address and the file's text are bridge/listen.py's (pure)."""

from __future__ import annotations

import errno
import ipaddress
import socket

from trainbridge.bridge import private_files
from trainbridge.bridge.listen import ENV_FILE_MARK, env_file_text


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
