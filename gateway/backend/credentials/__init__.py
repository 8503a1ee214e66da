"""Who the gateway is toward an upstream: the service credential, RFC 8693 token exchange,
signed caller assertions and their keys, TLS with a client certificate.

The ground floor of backend/: imports no other room of it.
"""
