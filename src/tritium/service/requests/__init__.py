"""The request path: submitting a request to its model's scheduler and settling its
response (one step, in a stated order), streamed responses, the request spinner (and its trials)."""
