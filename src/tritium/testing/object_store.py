"""A real S3-compatible server on loopback for the cloud repository tests: moto's
standalone server (``moto[server]``, in the ``test`` extra) in a thread of the test process.

``with s3_server() as store:`` starts it on port 0; ``store.url("bucket/path")`` is the
location tritium takes (Triton's ``s3://host:port/bucket/path``), ``store.env`` the
credentials a server process needs, ``store.upload(folder, "bucket/path")`` copies a
local repository in, ``store.require_auth()`` makes every later request need real
credentials (none exist: any key is refused) until the block ends.
"""

from __future__ import annotations

import logging
import os
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# Any key works until require_auth; the region is the one botocore needs to sign requests.
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "tritium-test",
    "AWS_SECRET_ACCESS_KEY": "tritium-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class S3Store:
    """The running server and a boto3 client on it."""

    def __init__(self, host: str, port: int) -> None:
        import boto3

        self.endpoint = f"http://{host}:{port}"
        self.hostport = f"{host}:{port}"
        self.env = {**os.environ, **CREDENTIALS}
        for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
            self.env.pop(name, None)
        self.client: Any = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
        )

    def url(self, path: str) -> str:
        return f"s3://{self.hostport}/{path}"

    def create_bucket(self, bucket: str) -> None:
        self.client.create_bucket(Bucket=bucket)

    def upload(self, folder: Path, path: str) -> None:
        """Every file under ``folder`` (``__pycache__`` aside) to ``bucket/prefix``."""
        bucket, _, prefix = path.partition("/")
        for file in sorted(folder.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                key = "/".join(p for p in (prefix, file.relative_to(folder).as_posix()) if p)
                self.client.upload_file(str(file), bucket, key)

    def delete(self, path: str) -> None:
        """Every object under ``bucket/prefix``."""
        bucket, _, prefix = path.partition("/")
        listed = self.client.list_objects_v2(Bucket=bucket, Prefix=prefix)
        for item in listed.get("Contents", []):
            self.client.delete_object(Bucket=bucket, Key=item["Key"])

    def _auth_count(self, count: str) -> None:
        request = urllib.request.Request(
            f"{self.endpoint}/moto-api/reset-auth",
            data=count.encode(),
            method="POST",
            headers={"Content-Type": "text/plain"},  # a form body would be parsed away
        )
        with urllib.request.urlopen(request, timeout=10):
            pass

    @contextmanager
    def require_auth(self) -> Iterator[None]:
        self._auth_count("0")
        try:
            yield
        finally:
            self._auth_count("inf")


@contextmanager
def s3_server() -> Iterator[S3Store]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield S3Store(host, port)
    finally:
        server.stop()
