"""Loading, reloading and unloading models while requests flow: the model manager, the
version builder, warm-up, repository polling and Triton's repository API."""
