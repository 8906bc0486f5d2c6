"""The onnxruntime backend: ONNX models served by instance workers, one
``InferenceSession`` per instance, with Triton's configuration semantics.

Only :mod:`.loading` is imported by the worker, and only for a model of this backend, so
a server without onnxruntime installed pays nothing for it.
"""
