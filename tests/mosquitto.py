"""A Mosquitto broker of a test's own, and the ``mosquitto_pub``/``mosquitto_sub`` clients as independent peers."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from vigil.dev.broker import free_port

CONF = """\
listener {port} 127.0.0.1
{security}
persistence true
persistence_location {data}/
user root
log_dest file {data}/mosquitto.log
log_type error
log_type warning
log_type notice
"""


@dataclass(frozen=True)
class Certificates:
    """A throwaway CA (PEM) and a server certificate it signed for 127.0.0.1 and localhost, with its key."""

    ca: Path
    cert: Path
    key: Path


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def make_certificates(directory: Path) -> Certificates:
    """A new CA and a server certificate signed by it, written to ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"vigil test CA {directory.name}")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = Certificates(ca=directory / "ca.pem", cert=directory / "server.pem", key=directory / "server.key")
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(_key_pem(server_key))
    return files


class Mosquitto:
    """``mosquitto -c CONF`` on a free loopback port with persistence in ``data_dir``; restartable on both.

    Args:
        tls: serve TLS only, with these certificates.
        users: refuse anonymous clients; these user names and passwords (``mosquitto_passwd``) may connect.
    """

    def __init__(self, data_dir: Path, *, tls: Certificates | None = None, users: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.host = "127.0.0.1"
        self.tls = tls
        self.users = users
        self._process: subprocess.Popen[bytes] | None = None
        data_dir.mkdir(parents=True, exist_ok=True)
        security = ["allow_anonymous true"]
        if users is not None:
            passwords = data_dir / "passwords"
            for n, (user, password) in enumerate(users.items()):
                create = ["-c"] if n == 0 else []
                subprocess.run(["mosquitto_passwd", *create, "-b", str(passwords), user, password], check=True)
            security = ["allow_anonymous false", f"password_file {passwords}"]
        if tls is not None:
            security += [f"cafile {tls.ca}", f"certfile {tls.cert}", f"keyfile {tls.key}"]
        self._conf = data_dir / "mosquitto.conf"
        self._conf.write_text(CONF.format(port=self.port, data=data_dir, security="\n".join(security)))

    @property
    def client_options(self) -> list[str]:
        """What ``mosquitto_pub`` and ``mosquitto_sub`` need to connect: the CA, and the first user."""
        options = ["--cafile", str(self.tls.ca)] if self.tls else []
        if self.users:
            user, password = next(iter(self.users.items()))
            options += ["-u", user, "-P", password]
        return options

    def start(self, timeout_s: float = 10.0) -> None:
        """Start the broker and wait until its port accepts connections."""
        self._process = subprocess.Popen(
            ["mosquitto", "-c", str(self._conf)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"mosquitto exited with {self._process.returncode}; see {self.data_dir}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return  # a TLS listener accepts the TCP connection too: it is listening
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def stop(self) -> None:
        """Stop it as a service manager would (SIGTERM): it saves its sessions and queued messages to disk."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=10)


async def mosquitto_pub(broker: Mosquitto, topic: str, payload: bytes, *options: str, timeout_s: float = 10.0) -> int:
    """Publish one message with ``mosquitto_pub -V 5 -q 1``; its exit code (0: the broker acknowledged it)."""
    process = await asyncio.create_subprocess_exec(
        "mosquitto_pub",
        *("-h", broker.host, "-p", str(broker.port), *broker.client_options, "-V", "5", "-q", "1", "-t", topic),
        *("-s", *options),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with asyncio.timeout(timeout_s):
            await process.communicate(payload)
    except TimeoutError:
        process.kill()
        await process.wait()
    assert process.returncode is not None
    return process.returncode


async def mosquitto_pub_lines(broker: Mosquitto, topic: str, lines: list[str], qos: int) -> int:
    """Publish each line as one message, as fast as one client can (``mosquitto_pub -l``); its exit code."""
    process = await asyncio.create_subprocess_exec(
        "mosquitto_pub",
        *("-h", broker.host, "-p", str(broker.port), *broker.client_options, "-V", "5", "-q", str(qos)),
        *("-t", topic, "-l"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    async with asyncio.timeout(30):
        await process.communicate("".join(f"{line}\n" for line in lines).encode())
    assert process.returncode is not None
    return process.returncode


class MosquittoSub:
    """A persistent ``mosquitto_sub`` session: ``subscribe()`` creates it, ``read(n)`` collects what it queued."""

    def __init__(self, broker: Mosquitto, topic: str, client_id: str) -> None:
        self._broker = broker
        self._args = ["-h", broker.host, "-p", str(broker.port), *broker.client_options, "-V", "5", "-q", "1"]
        self._args += ["-c", "-i", client_id]
        self._args += ["-t", topic]

    async def subscribe(self) -> None:
        """Create the session and its subscription, and return once the broker has acknowledged it."""
        await self._run("-E")

    async def read(self, count: int, fmt: str = "%t|%P|%p", timeout_s: float = 10.0) -> list[str]:
        """The next ``count`` messages, formatted with ``-F fmt`` (``%P`` prints user properties as key:value)."""
        out = await self._run("-C", str(count), "-W", str(int(timeout_s)), "-F", fmt)
        return out.decode().splitlines()

    async def _run(self, *options: str) -> bytes:
        process = await asyncio.create_subprocess_exec(
            "mosquitto_sub",
            *self._args,
            *options,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        return out
