"""Seed 001, privacy: "Secrets in content or metadata never reach storage" without destroying useful knowledge.

A configuration name that merely contains a word like encryption, token or key keeps a value that is no secret (an
algorithm, an alias, an ARN, a path, a switch, a reference to where the secret is kept); the secret itself, under
the same names, is still redacted. The snippets here are not those of ``bench/_benign.py`` (which the rules were
measured on): they check that the rules hold beyond it.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engramdb import Engram
from engramdb.privacy.redact import redact_text, redact_value

KEPT = [
    "pass ServerSideEncryption=aws:kms",
    "upload with ServerSideEncryption=aws:kms and SSEKMSKeyId=alias/aws/s3",
    "bucket_key_encryption_key: alias/data-lake",
    "sse_kms_key = arn:aws:kms:ap-south-1:210987654321:key/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
    "cookie_signing_key: hs512",
    "encryption: aes-256-gcm",
    "client_secret: secretsmanager:prod/oauth/web",
    "webhook_secret: WEBHOOK_SIGNING_SECRET",
    "api_key: disabled",
    "access_token: header",
    "secret: app-tls-2026",
    "secret: registry-pull",
    "token: ~/.config/hub/token",
    "tls_private_key: certs/server.pem",
    "password_file: ./secrets/db.txt",
    "auth: mtls",
    "session_token_lifetime: 12h",
    "pass --force-with-lease only on your own branch",
    "pass BucketKeyEnabled=true as well",
    "mariadb -u report -p analytics < query.sql",
    "token: gh auth token prints it",
]

REDACTED = [
    ("encryption_key: 7rQ9bX2mLk4vP8sW1zN6yT3hJ5cF0aGd", "7rQ9bX2mLk4vP8sW1zN6yT3hJ5cF0aGd"),
    ("client_secret = Zq8-Rk2vWm9Lp4Tx7Yb3", "Zq8-Rk2vWm9Lp4Tx7Yb3"),
    ("the session token is Vb7Kq2Lm9Xw4Zp8Rt3Yn6Hd==", "Vb7Kq2Lm9Xw4Zp8Rt3Yn6Hd=="),
    ("token AbCdEf123456GhIjKl789==", "AbCdEf123456GhIjKl789=="),
    ("password: correct-horse-battery-staple", "correct-horse-battery-staple"),
    ("password=enabled2024!", "enabled2024!"),
    ("auth: sunshine", "sunshine"),
    ("mysql -u root -pS3cr3tRootPw appdb", "S3cr3tRootPw"),
    ("docker login -u ci -p Gh7kLm2Qx9Wv registry.example.com", "Gh7kLm2Qx9Wv"),
    ("The client_secret is -jsSDCRCdZLxu51aqtbOko5QkFiYQGdl0EQ", "-jsSDCRCdZLxu51aqtbOko5QkFiYQGdl0EQ"),
]


@pytest.mark.parametrize("text", KEPT)
def test_settings_named_after_a_credential_word_stay(text: str) -> None:
    assert redact_text(text).text == text


@pytest.mark.parametrize(("text", "secret"), REDACTED)
def test_the_secret_under_the_same_names_is_still_redacted(text: str, secret: str) -> None:
    assert secret not in redact_text(text).text


def test_metadata_settings_stay_and_metadata_secrets_go() -> None:
    meta = {
        "encryption_key": "alias/aws/s3",
        "ServerSideEncryption": "aws:kms",
        "client_secret": "vault:kv/oauth/client",
        "api_token": "GITHUB_TOKEN",
        "db_password": "Tr0ub4dor&3",
        "signing_key": "Qm9bX2vL8kP4wT7z",
    }
    out, kinds = redact_value(meta)
    for kept in ("encryption_key", "ServerSideEncryption", "client_secret", "api_token"):
        assert out[kept] == meta[kept]
    assert out["db_password"] == "[REDACTED:password]"
    assert out["signing_key"] == "[REDACTED:credential]"
    assert set(kinds) == {"password", "credential"}


def test_remember_stores_the_seed_example_as_given(mem: Engram) -> None:
    """The issue's example through the public write path: stored unchanged, found by its words."""
    m = mem.remember("S3 uploads: pass ServerSideEncryption=aws:kms or the bucket policy rejects them", agent="ops")
    assert "ServerSideEncryption=aws:kms" in m.content
    assert mem.search("bucket policy rejects uploads", agent="ops")[0].memory.id == m.id


_RANDOM = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789", min_size=20, max_size=40)


@given(
    name=st.sampled_from(["encryption_key", "client_secret", "api_key", "auth_token", "session_key"]),
    value=_RANDOM.filter(lambda v: any(c.isdigit() for c in v) and any(c.isupper() for c in v)),
    op=st.sampled_from([": ", "=", " = "]),
)
def test_random_values_under_credential_names_are_always_redacted(name: str, value: str, op: str) -> None:
    """Whatever the rules for settings keep, a random-looking value under a credential name never survives."""
    assert value not in redact_text(f"{name}{op}{value}").text
