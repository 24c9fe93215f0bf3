"""Values found after a credential word that are settings or references, not secrets. Pure.

Configuration names often merely contain a word the redactor watches ("encryption_key", "client_secret",
"auth", "token"): their value may be the secret, or only say where the secret is kept (an alias, an ARN, a
path, a vault or environment reference, the name of a Kubernetes secret) or how it is handled (an algorithm,
a switch). Redacting those destroys useful knowledge ("pass ServerSideEncryption=aws:kms" is how S3 uploads
get accepted) and protects nothing, so the detectors ask here first.

Two levels: :func:`reference` holds for every credential word (a path is no password either);
:func:`setting` only after words that are not password words, since "correct-horse-battery" or "sunshine"
after ``password:`` may well be the password itself, while after ``encryption_key:`` a lower-case name is a
name.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["assignment", "reference", "setting"]

_URL: Final = re.compile(r"(?i)^[a-z][a-z0-9+.\-]*://[^\s@]*$")
# A path: absolute, home-relative or relative, or lower-case segments ("alias/aws/s3", "secret/prod/db").
_ABS_PATH: Final = re.compile(r"^(?:~|\.{1,2})?/[\w.@%~\-]+(?:/[\w.@%~\-]+)*/?$")
_NAME_PATH: Final = re.compile(r"^[a-z0-9][a-z0-9_.\-]*(?:/[a-z0-9_.\-]+)+/?$")
_FILE: Final = re.compile(
    r"(?i)^[\w.\-]+\.(?:json|ya?ml|toml|ini|cfg|conf|env|txt|pem|crt|cer|key|pub|p12|pfx|jks|gpg|asc|cnf)$"
)
# "arn:aws:kms:...", "aws:kms", "vault:kv/oauth", "env:OPENAI_API_KEY", "projects/acme/...": where a secret lives.
_SCHEME_REF: Final = re.compile(
    r"^(?:arn:aws[\w-]*:[\w\-]*:[\w\-]*:\d*:[\w\-/:.]+"
    r"|(?:aws|gcp|azure|vault|env|ssm|secretsmanager|kms|keyvault|file|k8s|op|sops|doppler):[\w\-./:]+)$"
)
_ENV_NAME: Final = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
# "--no-verify", "--from-env-file=.env", "-field=password", "-p", "Name=value" (not "-jsSDCRCdZLxu51...").
_ASSIGNMENT: Final = re.compile(
    r"^--[a-z][a-z0-9]*(?:-[a-z0-9]+)*(?:=.*)?$|^-[a-z]{1,20}=.*$|^-[A-Za-z]$|^[A-Za-z_][\w.\-]*=[^=\s]"
)

# Algorithms, schemes and methods: how a secret is made or checked, never the secret.
_ALGORITHM: Final = re.compile(
    r"""(?ix)^(?:
        aes[-_]?(?:128|192|256)(?:[-_]?(?:gcm|cbc|ctr|xts))? | aes | rsa(?:[-_]?(?:1024|2048|3072|4096|oaep|pss))?
      | [hrep]s(?:256|384|512) | sha[-_]?(?:1|224|256|384|512) | hmac(?:[-_]?sha[-_]?\d+)? | md5
      | ed25519 | ecdsa(?:[-_]?p?-?\d+)? | curve25519 | x25519 | chacha20(?:-poly1305)? | argon2(?:id|i|d)?
      | bcrypt | scrypt | pbkdf2(?:[-_]sha\d+)? | sigv[24] | oauth2? | oidc | saml2? | ldaps? | kerberos
      | mtls | tls(?:1\.[0-3])? | ntlm | jwt | jwe | jws
    )$"""
)
# Names of two to five lower-case words, maybe numbered ("ingress-tls", "customer-managed", "tls-2026"): a single
# word stays suspect ("token=refresh" may be the token), unless it is a known switch or mode.
_NAME: Final = re.compile(r"^[a-z]{2,20}(?:[-.](?:[a-z]{1,20}\d{0,4}|\d{1,8})){1,4}$")
_SWITCHES: Final = frozenset(
    """
    enabled disabled enable disable on off true false yes no none null auto automatic manual managed unmanaged
    optional required mandatory strict lax lenient permissive default custom inherit internal external local
    remote cookie header query body session memory file disk vault kms trial free basic bearer digest
    signed unsigned encrypted plaintext rotating rotated static dynamic ephemeral persistent readonly readwrite
    """.split()  # noqa: SIM905 - a word list reads better as text
)
_DURATION: Final = re.compile(r"^\d{1,6}(?:ms|s|m|h|d|w|y)$")


def reference(value: str) -> bool:
    """Whether ``value`` says where a secret is kept (URL without credentials, path, file, ARN, vault or
    environment reference, environment variable name) rather than being one."""
    v = value.strip().strip("\"'")
    return bool(
        _URL.match(v) or _path(v) or _NAME_PATH.match(v) or _FILE.match(v) or _SCHEME_REF.match(v) or _ENV_NAME.match(v)
    )


def _path(value: str) -> bool:
    # A base64 secret may start with "/" too: a path's parts are names, not long runs of mixed case and digits.
    if not _ABS_PATH.match(value):
        return False
    parts = [p for p in value.split("/") if p]
    return all(len(p) < 16 or not (any(c.isupper() for c in p) and any(c.isdigit() for c in p)) for p in parts)


def setting(value: str) -> bool:
    """Whether ``value`` reads as a setting after a non-password credential word: an algorithm or scheme, a
    switch ("enabled", "trial"), a lower-case name of several words ("ingress-tls", "customer-managed") or a
    duration."""
    v = value.strip().strip("\"'")
    return bool(_ALGORITHM.match(v) or v.lower() in _SWITCHES or _NAME.match(v) or _DURATION.match(v))


def assignment(value: str) -> bool:
    """Whether a value found in prose after a credential word is itself a flag or an assignment
    ("pass ServerSideEncryption=aws:kms", "credentials --from-env-file=.env"): then the word was a verb
    or a noun of the sentence, not the name of what follows."""
    return _ASSIGNMENT.match(value.strip()) is not None
