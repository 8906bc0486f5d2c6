"""L5: network frontends (HTTP/REST, gRPC, metrics): thin adapters over the service layer."""
