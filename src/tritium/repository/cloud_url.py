"""Triton's cloud model repository locations (``s3://``, ``gs://``, ``as://``), parsed.

The spellings are Triton's (user_guide/model_repository.md, "Cloud Storage"):

- ``s3://bucket/path``; a private S3-compatible store as ``s3://host:port/bucket/path``
  (plain HTTP, Triton's default) or ``s3://https://host:port/bucket/path``; credentials,
  session token and region come from the environment or the AWS config files, as botocore
  reads them (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
  ``AWS_DEFAULT_REGION``);
- ``gs://bucket/path``; credentials from ``GOOGLE_APPLICATION_CREDENTIALS``, else the
  attached service account, else anonymous (Triton's order, also Google's default chain);
- ``as://account/container/path``; ``AZURE_STORAGE_KEY`` for shared-key access, else
  Azure's default credential chain (managed identity, ...).

Each is read through fsspec and the store's fsspec implementation, an optional extra of
tritium; this module only parses (no import of those packages, no I/O).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from tritium.repository.scan import RepositoryError


@dataclass(frozen=True)
class Store:
    """One kind of object store: its fsspec protocol, package, extra and mount variable."""

    name: str
    protocol: str
    package: str
    extra: str
    mount_env: str


# Triton's schemes; the mount variables are Triton's own (TRITON_*_MOUNT_DIRECTORY).
STORES: dict[str, Store] = {
    "s3": Store("Amazon S3", "s3", "s3fs", "s3", "TRITON_AWS_MOUNT_DIRECTORY"),
    "gs": Store("Google Cloud Storage", "gcs", "gcsfs", "gcs", "TRITON_GCS_MOUNT_DIRECTORY"),
    "as": Store("Azure Storage", "abfs", "adlfs", "azure", "TRITON_AZURE_MOUNT_DIRECTORY"),
}


@dataclass(frozen=True)
class CloudLocation:
    """A parsed cloud location: ``root`` is the store path (``bucket/path``, or
    ``container/path`` for Azure) that the local copy mirrors."""

    text: str
    scheme: str
    root: str
    options: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def store(self) -> Store:
        return STORES[self.scheme]


def cloud_scheme(text: str) -> str | None:
    """The cloud scheme of a ``--model-repository`` value (``s3``, ``gs``, ``as``), or None."""
    scheme, sep, _ = text.partition("://")
    scheme = scheme.lower()
    return scheme if sep and scheme in STORES else None


def parse_cloud_location(text: str) -> CloudLocation:
    """``text`` as a cloud location; RepositoryError (one line) when it names none."""
    scheme = cloud_scheme(text)
    if scheme is None:
        raise RepositoryError(f"model repository '{text}' is not a cloud location")
    rest = text.partition("://")[2]
    options: dict[str, Any] = {}
    if scheme == "s3":
        endpoint, rest = _s3_endpoint(rest)
        if endpoint:
            options["client_kwargs"] = {"endpoint_url": endpoint}
    elif scheme == "as":
        account, _, rest = rest.partition("/")
        if not account:
            raise RepositoryError(
                f"model repository '{text}': no storage account (as://account/container/path)"
            )
        options.update(_azure_credentials(account))
    root = "/".join(part for part in rest.split("/") if part)
    if not root:
        what = "container" if scheme == "as" else "bucket"
        raise RepositoryError(f"model repository '{text}': no {what} named")
    if any(part in (".", "..") for part in root.split("/")):
        raise RepositoryError(f"model repository '{text}': '.' and '..' are not path parts")
    return CloudLocation(text, scheme, root, options)


def _s3_endpoint(rest: str) -> tuple[str, str]:
    """Triton's private-instance forms: ``[http(s)://]host:port/bucket/path``."""
    for prefix in ("http://", "https://"):
        if rest.lower().startswith(prefix):
            host, _, path = rest[len(prefix) :].partition("/")
            return prefix + host, path
    first, _, path = rest.partition("/")
    if ":" in first:  # bucket names never hold a colon: this is host:port, over HTTP
        return "http://" + first, path
    return "", rest


def _azure_credentials(account: str) -> dict[str, Any]:
    key = os.environ.get("AZURE_STORAGE_KEY", "")
    if key:
        return {"account_name": account, "account_key": key}
    # No key: Azure's default credential chain (managed identity, workload identity, CLI).
    return {"account_name": account, "anon": False}
