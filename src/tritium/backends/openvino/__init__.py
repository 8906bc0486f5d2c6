"""The openvino backend: OpenVINO IR models (``model.xml`` + ``model.bin``) served by
instance workers, one compiled model per instance on its device, with the parameters of
Triton's openvino backend.

Only :mod:`.loading` is imported by the worker, and only for a model of this backend, so
a server without openvino installed pays nothing for it.
"""
