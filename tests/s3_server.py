"""A real S3 server on loopback for the tests: moto's server mode in a subprocess.

Usage::

    from .s3_server import s3_server, s3_env

    def test_remote(tmp_path):
        with s3_server() as s3:                    # a free port; returns once it answers
            uri = s3.upload_folder(tmp_path / "data", "bucket", "ds")
            # uri == "s3://bucket/ds?endpoint_override=127.0.0.1:PORT&scheme=http"
            with s3_env(s3):                       # credentials + region for Arrow
                fs, path = pyarrow.fs.FileSystem.from_uri(uri)
                loader = shardfeed.Loader(uri, batch_size=64, output="numpy")
        # here the server is stopped (terminate, wait, kill)

As a fixture (one server for the session; ``s3.reset()`` empties it)::

    @pytest.fixture(scope="session")
    def s3():
        with s3_server() as server, s3_env(server):
            yield server

Requirements: ``moto[server]`` (moto >= 5 with flask and flask-cors) and ``boto3``
in the interpreter that runs the tests; the server runs as ``sys.executable -m
moto.server``.  What Arrow's S3 filesystem needs (``s3_env``): credentials in
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` (any value; moto accepts
"testing"), ``AWS_REGION=us-east-1``, and ``AWS_EC2_METADATA_DISABLED=true`` so
that the AWS SDK never probes the EC2 metadata endpoint (a delay of about a
second per client when it is unreachable).  The endpoint is given in the URI
(``endpoint_override=127.0.0.1:PORT&scheme=http``) or, with
``s3_env(s3, endpoint_env=True)``, in ``AWS_ENDPOINT_URL`` so that a plain
``s3://bucket/prefix`` reaches the server.

moto keeps objects in memory and answers a ranged GET by loading the whole
object, so keep test objects small (<= 16 MB).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class S3Server:
    """A running moto server on 127.0.0.1:port."""

    port: int
    process: subprocess.Popen[bytes] = field(repr=False)
    log_path: Path = field(repr=False)
    host: str = "127.0.0.1"

    @property
    def endpoint(self) -> str:
        """host:port, as Arrow's ``endpoint_override`` takes it."""
        return f"{self.host}:{self.port}"

    @property
    def endpoint_url(self) -> str:
        """http://host:port, as boto3 and ``AWS_ENDPOINT_URL`` take it."""
        return f"http://{self.endpoint}"

    def uri(self, bucket: str, prefix: str = "") -> str:
        """The URI of ``bucket/prefix`` on this server for Arrow (and shardfeed)."""
        path = f"{bucket}/{prefix.strip('/')}".rstrip("/")
        return f"s3://{path}?endpoint_override={self.endpoint}&scheme=http"

    def client(self) -> Any:
        """A boto3 S3 client for this server."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def create_bucket(self, bucket: str) -> None:
        client = self.client()
        try:
            client.create_bucket(Bucket=bucket)
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass

    def upload_folder(self, folder: str | os.PathLike[str], bucket: str, prefix: str = "") -> str:
        """Uploads every file below ``folder`` to ``bucket/prefix/<relative path>``
        (creating the bucket) and returns the URI of ``bucket/prefix``."""
        self.create_bucket(bucket)
        client = self.client()
        root = Path(folder)
        files = sorted(p for p in root.rglob("*") if p.is_file())
        if not files:
            raise FileNotFoundError(f"no files under {root}")
        for path in files:
            key = "/".join(p for p in (prefix.strip("/"), path.relative_to(root).as_posix()) if p)
            client.upload_file(str(path), bucket, key)
        return self.uri(bucket, prefix)

    def reset(self) -> None:
        """Deletes every bucket and object (moto's reset endpoint)."""
        req = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(req, timeout=10):
            pass

    def log(self) -> str:
        """What the server wrote to stdout and stderr so far."""
        return self.log_path.read_text(errors="replace")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except urllib.error.HTTPError:
        return True  # an HTTP error is an answer
    except OSError:
        return False


def _stop(process: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)


@contextlib.contextmanager
def s3_server(timeout: float = 30.0, attempts: int = 3) -> Iterator[S3Server]:
    """Starts ``python -m moto.server`` on 127.0.0.1 and a free port, waits (at
    most ``timeout`` seconds) until it answers HTTP, yields it, and stops it.

    A port taken by someone else between choosing it and binding it makes the
    server exit at once; then another port is tried (``attempts`` in all).
    Raises RuntimeError, with the server's output, if it never answers.
    """
    log_dir = tempfile.TemporaryDirectory(prefix="shardfeed-s3-")
    server: S3Server | None = None
    try:
        for attempt in range(attempts):
            port = _free_port()
            log_path = Path(log_dir.name) / f"moto-{port}.log"
            with open(log_path, "wb") as log:
                process = subprocess.Popen(
                    [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            candidate = S3Server(port=port, process=process, log_path=log_path)
            deadline = time.monotonic() + timeout
            while process.poll() is None and time.monotonic() < deadline:
                if _answers(candidate.endpoint_url + "/moto-api/"):
                    server = candidate
                    break
                time.sleep(0.05)
            if server is not None:
                break
            exited = process.poll() is not None  # e.g. the port was taken meanwhile
            _stop(process)
            if attempt == attempts - 1 or not exited:
                raise RuntimeError(
                    f"moto server on port {port} did not answer within {timeout} s "
                    f"(exit code {process.returncode}):\n{candidate.log()[-4000:]}"
                )
        assert server is not None
        yield server
    finally:
        if server is not None:
            _stop(server.process)
        log_dir.cleanup()


@contextlib.contextmanager
def s3_env(server: S3Server | None = None, endpoint_env: bool = False) -> Iterator[None]:
    """Sets what Arrow's S3 filesystem (and boto3) need to talk to the test server,
    and restores the previous environment afterwards.  With ``endpoint_env`` it
    also sets ``AWS_ENDPOINT_URL`` to the server, so that URIs need no
    ``endpoint_override``.

    Arrow reads these when it makes an S3 filesystem, so set them before
    ``FileSystem.from_uri`` or ``shardfeed.Loader``; a child process (a DataLoader
    worker, a second rank) inherits them.
    """
    values = {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    # Settings from the developer's machine must not leak into the tests.
    cleared = ["AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"]
    if endpoint_env:
        if server is None:
            raise ValueError("endpoint_env=True needs the server")
        values["AWS_ENDPOINT_URL"] = server.endpoint_url
        cleared.remove("AWS_ENDPOINT_URL")
    saved = {k: os.environ.get(k) for k in [*values, *cleared]}
    try:
        for k in cleared:
            os.environ.pop(k, None)
        os.environ.update(values)
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
