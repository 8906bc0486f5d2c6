"""L2: code that runs inside worker processes, one folder per backend kind."""
