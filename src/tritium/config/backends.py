"""Triton's known backends and platforms (as of Triton 2.51), and which ones tritium serves."""

from __future__ import annotations

PYTHON_BACKEND = "python"
PYTHON_MODEL_FILENAME = "model.py"
ENSEMBLE_PLATFORM = "ensemble"

# Backends tritium runs. Any other backend is reported the way Triton reports a backend
# whose shared library is not installed.
SUPPORTED_BACKENDS: frozenset[str] = frozenset({PYTHON_BACKEND, "onnxruntime", "openvino"})

# platform -> (backend, default model file name)
PLATFORM_BACKENDS: dict[str, tuple[str, str]] = {
    "tensorrt_plan": ("tensorrt", "model.plan"),
    "onnxruntime_onnx": ("onnxruntime", "model.onnx"),
    "pytorch_libtorch": ("pytorch", "model.pt"),
    "tensorflow_savedmodel": ("tensorflow", "model.savedmodel"),
    "tensorflow_graphdef": ("tensorflow", "model.graphdef"),
}

# backend -> the platform Triton fills in when only the backend is given. TensorFlow is
# absent: its platform is told apart only by the model file name.
DEFAULT_PLATFORMS: dict[str, str] = {
    "tensorrt": "tensorrt_plan",
    "onnxruntime": "onnxruntime_onnx",
    "pytorch": "pytorch_libtorch",
}

# default model file name -> platform (TensorFlow only) and -> backend.
FILENAME_PLATFORMS: dict[str, str] = {
    "model.savedmodel": "tensorflow_savedmodel",
    "model.graphdef": "tensorflow_graphdef",
}
FILENAME_BACKENDS: dict[str, str] = {
    "model.plan": "tensorrt",
    "model.onnx": "onnxruntime",
    "model.xml": "openvino",
    "model.pt": "pytorch",
    "model.savedmodel": "tensorflow",
    "model.graphdef": "tensorflow",
    PYTHON_MODEL_FILENAME: PYTHON_BACKEND,
}

# backend -> default model file name, for backends without a platform.
BACKEND_FILENAMES: dict[str, str] = {
    PYTHON_BACKEND: PYTHON_MODEL_FILENAME,
    "openvino": "model.xml",
}

# Backends whose platform Triton checks against the backend; any other backend (python,
# or a custom one) may be paired with any platform.
KNOWN_BACKEND_PLATFORMS: dict[str, frozenset[str]] = {
    "tensorrt": frozenset({"tensorrt_plan"}),
    "onnxruntime": frozenset({"onnxruntime_onnx"}),
    "pytorch": frozenset({"pytorch_libtorch"}),
    "tensorflow": frozenset({"tensorflow_savedmodel", "tensorflow_graphdef"}),
}

# Triton gives CPU groups of these backends two instances by default, one otherwise.
TWO_CPU_INSTANCE_BACKENDS: frozenset[str] = frozenset({"tensorflow", "onnxruntime"})

# When a configuration names neither backend nor platform, Triton looks in the newest
# version folder for these files, in this order, and takes the first backend it finds.
_DETECTED_FILES: tuple[tuple[str, str], ...] = (
    ("model.savedmodel", "tensorflow"),
    ("model.graphdef", "tensorflow"),
    ("model.plan", "tensorrt"),
    ("model.onnx", "onnxruntime"),
    ("model.pt", "pytorch"),
    (PYTHON_MODEL_FILENAME, PYTHON_BACKEND),
)


def detect_backend(
    backend: str, platform: str, default_model_filename: str, version_files: set[str]
) -> str:
    """The backend a configuration means: the one it names, the one its platform or
    default model file implies, else the first of Triton's model files present among
    ``version_files`` (the names in the newest version folder). "" when none says."""
    if backend:
        return backend
    if platform:
        return PLATFORM_BACKENDS.get(platform, ("", ""))[0]
    if default_model_filename:
        if default_model_filename in FILENAME_BACKENDS:
            return FILENAME_BACKENDS[default_model_filename]
        if default_model_filename.endswith(".onnx"):
            return "onnxruntime"
        return PYTHON_BACKEND if default_model_filename.endswith(".py") else ""
    for filename, found in _DETECTED_FILES:
        if filename in version_files:
            return found
    return ""
