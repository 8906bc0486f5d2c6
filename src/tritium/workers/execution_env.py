"""A model's own Python environment (Triton's ``EXECUTION_ENV_PATH`` parameter).

A Python-backend model may name a packed environment (a ``conda-pack`` tarball, or any
``.tar.gz``/``.tar`` holding ``bin/python3``) in its config::

    parameters: { key: "EXECUTION_ENV_PATH",
                  value: { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" } }

``$$TRITON_MODEL_DIRECTORY`` is the model's folder (a relative path is taken from there
too); a path that is a folder is used as an already unpacked environment. An archive is
unpacked once into a cache folder named after its path, size and modification time
(``$TRITIUM_EXECUTION_ENV_CACHE``, else ``$XDG_CACHE_HOME/tritium/execution-envs``):
concurrent loads unpack into private folders and the first rename wins, so a
half-unpacked environment is never used. Members that would land outside the folder
(``../``, absolute paths, links pointing out) are refused, by ``tarfile``'s ``data`` filter
where this Python has it.

The model's workers then run under ``<env>/bin/python3`` with tritium's own package on
``PYTHONPATH`` (through a folder linking to it alone). The worker code is pure Python; it needs numpy from the environment and
msgspec (tritium's message codec): when the environment has no msgspec, the server's is
lent to it through a folder holding only that package (it must fit the environment's
Python version). Every way this can fail is a load error naming the model and the reason.
Blocking throughout: run it off the event loop.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritium.core.errors import Unavailable

PARAMETER = "EXECUTION_ENV_PATH"
_MODEL_DIRECTORY = "$$TRITON_MODEL_DIRECTORY"
# tritium's package folder, lent to the worker (see ``_lent_tritium``).
_PACKAGE = Path(__file__).resolve().parents[1]
_PROBE = "import numpy, msgspec, tritium.backends.python.stub"
_PROBE_TIMEOUT_S = 120.0

_lock = threading.Lock()
# (interpreter, mtime of the interpreter) -> the checked WorkerPython; a probe costs a
# process start, so each environment is checked once per server.
_checked: dict[tuple[str, float], WorkerPython] = {}


@dataclass(frozen=True, slots=True)
class WorkerPython:
    """How to start a worker in a model's own environment."""

    executable: str
    path: tuple[str, ...]  # put before PYTHONPATH
    env_root: str

    def environ(self, base: Mapping[str, str]) -> dict[str, str]:
        """The worker's environment: ``base`` with this interpreter's path and bin folder."""
        environ = dict(base)
        old = environ.get("PYTHONPATH")
        environ["PYTHONPATH"] = os.pathsep.join([*self.path, *([old] if old else [])])
        environ["PATH"] = os.pathsep.join(
            [str(Path(self.env_root) / "bin"), environ.get("PATH", os.defpath)]
        )
        # Not the server's own virtual environment: the worker is in the model's.
        environ.pop("VIRTUAL_ENV", None)
        environ.pop("PYTHONHOME", None)
        return environ


def requested(model_dir: Path, config: Mapping[str, Any]) -> tuple[str, Path] | None:
    """The environment a config asks for (the value as written, and its path), or None."""
    param = config.get("parameters", {}).get(PARAMETER)
    value = (param or {}).get("string_value", "") if isinstance(param, Mapping) else ""
    if not value:
        return None
    path = Path(value.replace(_MODEL_DIRECTORY, str(model_dir)))
    return value, path if path.is_absolute() else model_dir / path


def cache_root() -> Path:
    explicit = os.environ.get("TRITIUM_EXECUTION_ENV_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tritium" / "execution-envs"


def prepare(model_dir: Path, config: Mapping[str, Any]) -> WorkerPython | None:
    """The interpreter the workers of the model in ``model_dir`` run under, or None for
    the server's own.
    Raises :class:`Unavailable` with the reason when the environment is unusable."""
    asked = requested(model_dir, config)
    if asked is None:
        return None
    value, path = asked
    where = f"{PARAMETER} '{value}'"  # as written: error texts carry no server paths
    try:
        root = path if path.is_dir() else _unpacked(path, cache_root())
    except (OSError, tarfile.TarError, ValueError) as exc:
        raise Unavailable(
            f"cannot unpack the execution environment {where}: {_reason(exc)}"
        ) from None
    python = root / "bin" / "python3"
    if not python.exists():
        raise Unavailable(f"the execution environment {where} has no bin/python3")
    return _checked_python(where, python, root)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _unpacked(archive: Path, root: Path) -> Path:
    """The folder ``archive`` is unpacked in (unpacked now if not yet)."""
    info = archive.stat()  # a missing archive fails here, with its OSError
    key = hashlib.sha256(
        f"{archive.resolve()}\0{info.st_size}\0{info.st_mtime_ns}".encode()
    ).hexdigest()[:24]
    target = root / f"{archive.name.split('.')[0] or 'env'}-{key}"
    if target.is_dir():
        return target
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".unpacking-", dir=root))
    try:
        with tarfile.open(archive) as tar:
            _extract_all(tar, scratch)
        try:
            os.rename(scratch, target)
        except OSError:
            if not target.is_dir():  # not another load's rename that came first
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def _extract_all(tar: tarfile.TarFile, into: Path) -> None:
    members = tar.getmembers()
    for member in members:  # refused by name, whatever this Python's filters do
        parts = Path(member.name).parts
        if member.name.startswith(("/", "\\")) or ".." in parts:
            raise ValueError(f"the archive member '{member.name}' would land outside it")
    if hasattr(tarfile, "data_filter"):
        try:
            tar.extractall(into, members=members, filter="data")
        except tarfile.FilterError as exc:
            raise ValueError(f"the archive member is refused: {exc}") from None
        return
    for member in members:  # no filter: links must stay inside too
        if member.issym() or member.islnk():
            target = (into / member.name).parent / member.linkname
            if member.linkname.startswith("/") or not _inside(target, into):
                raise ValueError(
                    f"the archive member '{member.name}' links outside it ('{member.linkname}')"
                )
    tar.extractall(into, members=members)  # noqa: S202 -- members checked above


def _inside(path: Path, root: Path) -> bool:
    return os.path.normpath(path).startswith(os.path.normpath(root) + os.sep)


def _checked_python(where: str, python: Path, root: Path) -> WorkerPython:
    try:
        stamp = python.stat().st_mtime
    except OSError as exc:
        raise Unavailable(f"{where}: {_reason(exc)}") from None
    key = (str(python), stamp)
    with _lock:
        known = _checked.get(key)
    if known is not None:
        return known
    own = _lent_tritium()
    plain = WorkerPython(str(python), (own,), str(root))
    error = _probe(plain)
    chosen = plain
    if error is not None and "msgspec" in error:
        lent = WorkerPython(str(python), (own, _lent_msgspec()), str(root))
        error = _probe(lent)
        chosen = lent
    if error is not None:
        raise Unavailable(
            f"the interpreter of the execution environment {where} cannot run a worker: {error}"
        )
    with _lock:
        _checked[key] = chosen
    return chosen


def _probe(python: WorkerPython) -> str | None:
    """None when ``python`` imports what a worker needs, else why not."""
    try:
        done = subprocess.run(
            [python.executable, "-c", _PROBE],
            env=python.environ(os.environ),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_PROBE_TIMEOUT_S,
            check=False,
        )
    except OSError as exc:
        return f"cannot start it: {_reason(exc)}"
    except subprocess.TimeoutExpired:
        return f"it did not start within {_PROBE_TIMEOUT_S:g} s"
    if done.returncode == 0:
        return None
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else f"it exited with status {done.returncode}"


def _lent_tritium() -> str:
    """A folder holding only tritium's package: the folder tritium is installed in may
    hold the server's own numpy too, which must not shadow the environment's."""
    return _lend({"tritium": _PACKAGE})


def _lent_msgspec() -> str:
    """A folder holding only the server's msgspec (and what it imports), to lend to an
    environment without one."""
    import msgspec  # the server's; imported here only to find it

    modules = {"msgspec": Path(msgspec.__file__).parent}
    try:
        import typing_extensions

        modules["typing_extensions.py"] = Path(typing_extensions.__file__)
    except ImportError:
        pass
    return _lend(modules)


def _lend(modules: dict[str, Path]) -> str:
    """A cache folder of links to ``modules`` (link name -> source); made once, each link
    put in place by an atomic rename, so concurrent loads see it whole."""
    sources = "\0".join(f"{name}={path}" for name, path in sorted(modules.items()))
    key = hashlib.sha256(sources.encode()).hexdigest()[:16]
    folder = cache_root() / f"lent-{key}"
    folder.mkdir(parents=True, exist_ok=True)
    for link_name, source in modules.items():
        link = folder / link_name
        if not link.exists():
            scratch = folder / f".{link_name}.{os.getpid()}.{threading.get_ident()}"
            scratch.unlink(missing_ok=True)
            scratch.symlink_to(source)
            os.replace(scratch, link)
    return str(folder)
