"""gRPC over TLS and mutual TLS (Triton's ``--grpc-use-ssl*`` flags) with tritonclient.grpc.

A throw-away CA, a server certificate (localhost, 127.0.0.1) and a client certificate are
made with the ``openssl`` command; the test is skipped when it is not installed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl command is not installed (Debian/Ubuntu package: openssl)")

EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(cwd: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _signed(cwd: Path, ca: str, name: str, cn: str, extensions: str) -> None:
    _openssl(cwd, "req", *EC_KEY, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}")
    (cwd / f"{name}.ext").write_text(extensions + "\n")
    _openssl(
        cwd, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
        "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext",
    )


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ca.crt, server.{crt,key} for localhost, client.{crt,key}; other_ca.crt signs other.crt."""
    d = tmp_path_factory.mktemp("grpc-tls")
    for ca in ("ca", "other_ca"):
        _openssl(d, "req", "-x509", *EC_KEY, "-keyout", f"{ca}.key", "-out", f"{ca}.crt", "-days", "2",
                 "-subj", f"/CN=tritium test {ca}")
    _signed(d, "ca", "server", "localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth")
    _signed(d, "ca", "client", "client", "extendedKeyUsage=clientAuth")
    _signed(d, "other_ca", "other", "intruder", "extendedKeyUsage=clientAuth")
    return d


def _tls_args(certs: Path) -> list[str]:
    return ["--grpc-use-ssl=true", f"--grpc-server-cert={certs / 'server.crt'}", f"--grpc-server-key={certs / 'server.key'}"]


@pytest.fixture(scope="module")
def tls_server(grpc_launch, certs):
    with grpc_launch(_tls_args(certs)) as server:
        yield server


@pytest.fixture(scope="module")
def mutual_server(grpc_launch, certs):
    args = [*_tls_args(certs), "--grpc-use-ssl-mutual=true", f"--grpc-root-cert={certs / 'ca.crt'}"]
    with grpc_launch(args) as server:
        yield server


def _client(server, certs: Path, client: str | None = None, **kwargs) -> grpcclient.InferenceServerClient:
    if client is not None:
        kwargs.update(private_key=str(certs / f"{client}.key"), certificate_chain=str(certs / f"{client}.crt"))
    return grpcclient.InferenceServerClient(
        f"localhost:{server.grpc_port}", ssl=True, root_certificates=str(certs / "ca.crt"), **kwargs
    )


def _infer_ok(client: grpcclient.InferenceServerClient) -> None:
    a = np.array([1, 2, 3, 4], np.float32)
    inputs = [grpcclient.InferInput("INPUT0", [4], "FP32"), grpcclient.InferInput("INPUT1", [4], "FP32")]
    for inp in inputs:
        inp.set_data_from_numpy(a)
    result = client.infer("add_sub", inputs, client_timeout=30)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + a)


def _refused(client: grpcclient.InferenceServerClient) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as info:
        client.is_server_live(client_timeout=10)
    client.close()
    return info.value


def test_tls_client_trusting_the_ca(tls_server, certs):
    client = _client(tls_server, certs)
    try:
        assert client.is_server_ready()
        _infer_ok(client)
    finally:
        client.close()


def test_plaintext_client_is_refused_by_a_tls_server(tls_server):
    error = _refused(grpcclient.InferenceServerClient(tls_server.grpc_url))
    assert error.status() == "StatusCode.UNAVAILABLE"


def test_client_not_trusting_the_server_is_refused(tls_server, certs):
    client = grpcclient.InferenceServerClient(
        f"localhost:{tls_server.grpc_port}", ssl=True, root_certificates=str(certs / "other_ca.crt")
    )
    assert _refused(client).status() == "StatusCode.UNAVAILABLE"


def test_mutual_tls_with_a_client_certificate(mutual_server, certs):
    client = _client(mutual_server, certs, "client")
    try:
        assert client.is_server_live()
        _infer_ok(client)
    finally:
        client.close()


@pytest.mark.parametrize("client_cert", [None, "other"], ids=["no-client-cert", "foreign-client-cert"])
def test_mutual_tls_refuses_other_clients(mutual_server, certs, client_cert):
    assert _refused(_client(mutual_server, certs, client_cert)).status() == "StatusCode.UNAVAILABLE"


def test_unreadable_certificate_fails_start_up_naming_the_file(grpc_launch, certs, tmp_path):
    missing = tmp_path / "missing.crt"
    server = grpc_launch(["--grpc-use-ssl=true", f"--grpc-server-cert={missing}", f"--grpc-server-key={certs / 'server.key'}"])
    with pytest.raises(RuntimeError) as info:
        server.start()
    assert str(missing) in str(info.value)
    assert server.proc is not None and server.proc.returncode not in (0, None)
