"""``audit.checkpoint.key``: an Ed25519 private key in PEM, read once at load (the signer in
:mod:`gateway.observability.audit_chain` loads it with the same function)."""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key

__all__ = ["checkpoint_key_problem", "load_checkpoint_key"]


def load_checkpoint_key(pem: str) -> Ed25519PrivateKey:
    """The key; ValueError (with a reason for people) when it is not an unencrypted Ed25519
    private key in PEM."""
    try:
        key = load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError(
            f"is not an unencrypted PEM private key ({exc.__class__.__name__})"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError("must be an Ed25519 private key (openssl genpkey -algorithm ed25519)")
    return key


def checkpoint_key_problem(pem: str) -> str | None:
    try:
        load_checkpoint_key(pem)
    except ValueError as exc:
        return str(exc)
    return None
