"""The bearer token of ``hermes-core mcp serve --transport http``: the kernel's
:mod:`hermes_core.bearer` (shared with ``hermes-core inspect``)."""

from hermes_core.bearer import MIN_LENGTH, TOKEN_FILE, Credential, CredentialError, resolve, rotate

__all__ = ["MIN_LENGTH", "TOKEN_FILE", "Credential", "CredentialError", "resolve", "rotate"]
