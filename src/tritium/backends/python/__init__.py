"""The Python backend: loads ``model.py`` in a worker and provides ``triton_python_backend_utils``."""
