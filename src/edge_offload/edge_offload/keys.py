# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""CURVE key pairs that authenticate the edge server and its robots.

Key files are ZeroMQ certificates: ``NAME.key`` holds the public key (safe to copy),
``NAME.key_secret`` the public and the secret key (mode 0600). The server authorises a
robot by finding the robot's public ``.key`` file in its authorised-clients folder;
a robot trusts a server whose public key file it was given.

``edge_offload_keygen`` (``main`` below) creates them::

    edge_offload_keygen                       # server + robot pair in the default folder,
                                              # robot authorised on the server
    edge_offload_keygen --dir DIR --name robot2 --authorize-in DIR/authorized_clients
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.auth

DEFAULT_KEYS_DIR = Path('~/.local/share/edge_offload/keys')
AUTHORIZED_CLIENTS_SUBDIR = 'authorized_clients'

_logger = logging.getLogger(__name__)


class KeyFileError(RuntimeError):
    """A key file is missing or unreadable; the message says how to create it."""


@dataclass(frozen=True)
class KeyPair:
    """A CURVE key pair (Z85 text, 40 bytes each); ``secret`` is empty for public-only."""

    public: bytes
    secret: bytes


def validate_transport(endpoint: str, security: str, allow_plaintext: bool) -> None:
    """Raise ValueError for a bad endpoint, or plaintext that was not explicitly allowed."""
    if not endpoint.startswith(('tcp://', 'ipc://', 'inproc://')):
        raise ValueError(f'endpoint {endpoint!r} must start with tcp://, ipc:// or inproc://')
    if security not in ('curve', 'plaintext'):
        raise ValueError(f"security must be 'curve' or 'plaintext', not {security!r}")
    if security == 'plaintext' and not allow_plaintext:
        raise ValueError(
            "security 'plaintext' is unauthenticated and unencrypted; set allow_plaintext "
            'to use it'
        )


def expand_path(path: str | os.PathLike[str]) -> Path:
    """Expand ``~`` and environment variables in a configured path."""
    return Path(os.path.expandvars(os.path.expanduser(os.fspath(path))))


def _load(path: Path, *, need_secret: bool) -> KeyPair:
    if not zmq.has('curve'):
        raise KeyFileError('this libzmq was built without CURVE support')
    if not path.is_file():
        raise KeyFileError(
            f'key file {path} does not exist: create keys with `edge_offload_keygen` '
            '(see README, "Network set-up")'
        )
    try:
        public, secret = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as error:
        raise KeyFileError(f'key file {path} is not a ZeroMQ certificate: {error}') from None
    if need_secret and not secret:
        raise KeyFileError(f'{path} holds no secret key: give the NAME.key_secret file')
    return KeyPair(public=public, secret=secret or b'')


def load_secret_key_pair(path: str | os.PathLike[str]) -> KeyPair:
    """Load a ``NAME.key_secret`` file (this end's identity)."""
    return _load(expand_path(path), need_secret=True)


def load_public_key(path: str | os.PathLike[str]) -> bytes:
    """Load the public key from a ``NAME.key`` (or ``NAME.key_secret``) file."""
    return _load(expand_path(path), need_secret=False).public


def generate_key_pair(directory: str | os.PathLike[str], name: str) -> tuple[Path, Path]:
    """Create ``NAME.key`` and ``NAME.key_secret`` in ``directory``; return their paths.

    Raises:
        FileExistsError: a key of that name exists (keys are never overwritten).

    """
    folder = expand_path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    public_path = folder / f'{name}.key'
    secret_path = folder / f'{name}.key_secret'
    for path in (public_path, secret_path):
        if path.exists():
            raise FileExistsError(f'{path} exists; keys are not overwritten')
    public_file, secret_file = zmq.auth.create_certificates(folder, name)
    os.chmod(secret_file, 0o600)
    return Path(public_file), Path(secret_file)


def ensure_keys(directory: str | os.PathLike[str], robots: list[str]) -> dict[str, str]:
    """Create the server's and ``robots``' CURVE keys in ``directory`` where missing.

    Every robot's public key is authorised in ``directory/authorized_clients``; existing
    pairs are kept. Returns the key files: server_secret, server_public, authorized, and
    ``<robot>_secret`` per robot.
    """
    directory = expand_path(directory)
    for name in ('server', *robots):
        if not name or '/' in name or name.startswith('.'):
            raise ValueError(f'invalid key name {name!r}')
        if not (directory / f'{name}.key_secret').is_file():
            generate_key_pair(directory, name)
    authorized = directory / AUTHORIZED_CLIENTS_SUBDIR
    authorized.mkdir(parents=True, exist_ok=True)
    files = {
        'server_secret': str(directory / 'server.key_secret'),
        'server_public': str(directory / 'server.key'),
        'authorized': str(authorized),
    }
    for name in robots:
        public = directory / f'{name}.key'
        (authorized / public.name).write_bytes(public.read_bytes())
        files[f'{name}_secret'] = str(directory / f'{name}.key_secret')
    return files


def ensure_loopback_keys(directory: Path) -> dict[str, str]:
    """Create server and robot CURVE keys in ``directory`` if missing (a loopback set-up).

    Returns the key parameters: server_secret, server_public, robot_secret, authorized.
    """
    return ensure_keys(directory, ['robot'])


def main(argv: list[str] | None = None) -> int:
    """Create CURVE key pairs for the edge server and robots (console script)."""
    parser = argparse.ArgumentParser(
        prog='edge_offload_keygen',
        description='Create CURVE key pairs for the edge server and the robots.',
    )
    parser.add_argument(
        '--dir',
        default=str(DEFAULT_KEYS_DIR),
        help='folder for the key files (default: %(default)s)',
    )
    parser.add_argument(
        '--name',
        action='append',
        help='key pair to create (repeatable); default: server and robot',
    )
    parser.add_argument(
        '--authorize-in',
        metavar='DIR',
        help="copy the public keys of the non-server pairs into DIR (the server's "
        f'authorised clients); default: DIR/{AUTHORIZED_CLIENTS_SUBDIR} when creating the '
        'default pairs',
    )
    parser.add_argument(
        '--exist-ok', action='store_true', help='keep existing pairs instead of failing'
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format='%(message)s')
    folder = expand_path(args.dir)
    names = args.name or ['server', 'robot']
    authorize_in = args.authorize_in
    if authorize_in is None and args.name is None:
        authorize_in = folder / AUTHORIZED_CLIENTS_SUBDIR
    for name in names:
        if not name or '/' in name or name.startswith('.'):
            parser.error(f'invalid key name {name!r}')
        public_path = folder / f'{name}.key'
        try:
            public_path, secret_path = generate_key_pair(folder, name)
            _logger.info('created %s and %s', public_path, secret_path)
        except FileExistsError as error:
            if not args.exist_ok:
                _logger.error('%s (use --exist-ok to keep it)', error)
                return 1
            _logger.info('kept existing %s', public_path)
        if authorize_in is not None and name != 'server':
            target_dir = expand_path(authorize_in)
            target_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(public_path, target_dir / public_path.name)
            _logger.info('authorised %s in %s', name, target_dir)
    return 0


if __name__ == '__main__':
    sys.exit(main())
