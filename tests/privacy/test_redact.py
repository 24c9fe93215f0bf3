"""Redaction before storage: every detector, look-alikes that must survive, nested metadata, idempotency."""

from __future__ import annotations

import base64
import itertools
import json
import random
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.models import RedactionPolicy
from engramdb.privacy.redact import (
    PII_KINDS,
    SECRET_KINDS,
    find,
    placeholder,
    redact_text,
    redact_value,
)

PII = RedactionPolicy(secrets=True, pii=True)
rng = random.Random(7)


def rand(alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


AN = string.ascii_letters + string.digits
B64 = AN + "+/"


def jwt() -> str:
    def enc(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{enc({'alg': 'HS256', 'typ': 'JWT'})}.{enc({'sub': '42', 'admin': True})}.{rand(AN + '-_', 43)}"


PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    + "\n".join(rand(B64, 64) for _ in range(4))
    + ("\n-----END OPENSSH PRIVATE KEY-----")
)

# (kind, secret, text with {} where the secret goes)
SECRETS = [
    ("aws_access_key", "AKIA" + rand(string.ascii_uppercase + string.digits, 16), "key id {} in use"),
    ("aws_secret_key", rand(B64, 40), "aws_secret_access_key = {}"),
    ("gcp_api_key", "AIza" + rand(AN + "-_", 35), 'maps key "{}"'),
    ("gcp_oauth_token", "ya29." + rand(AN + "-_", 90), "token refreshed {} ok"),
    ("azure_storage_key", rand(B64, 86) + "==", "AccountName=x;AccountKey={};EndpointSuffix=core.windows.net"),
    ("azure_sas_token", rand(AN, 44) + "%3D", "https://x.blob.core.windows.net/c/f?sv=2022&sig={} 200"),
    ("github_token", "ghp_" + rand(AN, 36), "use {} for CI"),
    ("github_token", "github_pat_" + rand(AN, 22) + "_" + rand(AN, 59), "PAT: {}"),
    ("gitlab_token", "glpat-" + rand(AN, 20), "runner {}"),
    ("slack_token", "xoxb-123456789012-1234567890123-" + rand(AN, 24), "slack {}"),
    ("slack_webhook", "https://hooks.slack.com/services/T0123ABCD/B0123ABCDE/" + rand(AN, 24), "post to {}"),
    ("stripe_key", "sk_live_" + rand(AN, 24), "stripe.api_key = '{}'"),
    ("openai_key", "sk-proj-" + rand(AN + "-_", 74) + "T3BlbkFJ" + rand(AN, 20), "OPENAI_API_KEY={}"),
    ("anthropic_key", "sk-ant-api03-" + rand(AN + "-_", 93) + "AA", "my key is {} thanks"),
    ("huggingface_token", "hf_" + rand(AN, 34), "login --token {}"),
    ("npm_token", "npm_" + rand(AN, 36), "//registry.npmjs.org/:_authToken={}"),
    ("sendgrid_key", "SG." + rand(AN, 22) + "." + rand(AN, 43), "client('{}')"),
    ("private_key", PRIVATE_KEY, "deploy key:\n{}\nthanks"),
    ("jwt", jwt(), "Authorization: Bearer {}"),
    ("bearer_token", rand(AN, 32), 'curl -H "Authorization: Bearer {}" https://api'),
    ("basic_auth", base64.b64encode(b"admin:Sup3rS3cret").decode(), "Authorization: Basic {}"),
    ("url_password", "s3cr3t-P4ss", "postgres://app:{}@db.internal:5432/orders"),
    ("url_password", "P@ss91!", "redis://:{}@cache:6379/0"),
    ("password", "Tr0ub4dor&3", "my password is {} now"),
    ("password", "hunter22", "DB_PASSWORD={}"),
    ("password", "P@ssw0rd!24", "Server=sql;User ID=sa;Password={};Encrypt=true"),
    ("password", "sunshine", "[smtp]\npassword = {}\n"),
    ("password", "Xk9#mPq2vL", "docker login -u deploy -p {} registry.acme.dev"),
    ("password", "Zq7!rT4pLm", "The password for the staging database is {} now."),
    ("credential", rand(AN, 32), '{{"X-API-Key": "{}"}}'),
    ("credential", rand(string.hexdigits.lower()[:16], 40), "webhook:\n  secret: {}\n"),
]


@pytest.mark.parametrize(
    ("kind", "secret", "template"), SECRETS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(SECRETS)]
)
def test_each_kind_of_secret_is_replaced_by_its_typed_placeholder(kind: str, secret: str, template: str) -> None:
    text = template.format(secret)
    result = redact_text(text)
    assert secret not in result.text
    assert placeholder(kind) in result.text
    assert kind in result.kinds
    assert kind in SECRET_KINDS
    # The surrounding text is kept.
    for piece in template.split("{}"):
        assert piece.replace("{{", "{").replace("}}", "}") in result.text


LOOKALIKES = [
    "commit 3f5e2a9c1b7d4e8f0a6c2b9d7e1f3a5c8b0d2e4f fixed the token refresh race",
    "image: api@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "request_id=550e8400-e29b-41d4-a716-446655440000 status=200",
    '<img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6'
    'kgAAAABJRU5ErkJggg==">',
    "For example AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE and "
    "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "api_key: <your-api-key>",
    "OPENAI_API_KEY=${OPENAI_API_KEY}",
    "password: ********",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "a token looks like ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "password = os.environ['DB_PASSWORD']",
    "conn = connect(password=password)",
    "The password reset link expired",
    "We use a token bucket; max_tokens=4096 and token_count: 12",
    "The password is required and must have 12 characters",
    "Basic authentication is disabled; Bearer tokens are required",
    "DATABASE_URL=postgres://db.internal:5432/orders",
    "git clone git@github.com:acme/api.git",
    "secret: true\npassword_policy: strong",
    '{"password": null}',
    "deployed v2.14.3 at 2024-05-12T10:00:00Z",
    "the integrity is sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg==",
]


@pytest.mark.parametrize("text", LOOKALIKES)
def test_lookalikes_survive(text: str) -> None:
    result = redact_text(text, policy=PII)
    assert result.text == text
    assert result.kinds == ()


def test_personal_data_only_when_enabled() -> None:
    text = "mail alice.smith@acme-corp.io or call +1 415 555 2671, card 4111 1111 1111 1111"
    assert redact_text(text).text == text  # off by default
    result = redact_text(text, policy=PII)
    assert result.kinds == ("card_number", "email", "phone")
    assert "alice" not in result.text
    assert "2671" not in result.text
    assert "4111" not in result.text
    assert set(result.kinds) <= PII_KINDS


def test_card_numbers_need_a_luhn_check_and_an_issuer_prefix() -> None:
    assert redact_text("order 4111 1111 1111 1112 shipped", policy=PII).kinds == ()  # fails Luhn
    assert redact_text("ref 1234 5678 9012 3452", policy=PII).kinds == ()  # passes Luhn, no card network
    assert redact_text("card 5500-0000-0000-0004", policy=PII).kinds == ("card_number",)


def test_documentation_addresses_are_not_personal_data() -> None:
    assert redact_text("write to support@example.com or jane@example.org", policy=PII).kinds == ()


def test_overlapping_findings_merge_and_keep_the_most_specific_kind() -> None:
    token = jwt()
    result = redact_text(f"Authorization: Bearer {token}")
    assert result.text == "Authorization: Bearer [REDACTED:jwt]"
    result = redact_text("password=ghp_" + rand(AN, 36))
    assert result.text == "password=[REDACTED:github_token]"


def test_secrets_hidden_in_nested_metadata_and_keys() -> None:
    gh = "ghp_" + rand(AN, 36)
    aws = "AKIA" + rand(string.ascii_uppercase + string.digits, 16)
    value = {
        "deploy": {"steps": [{"env": {"DB_PASSWORD": "hunter22", "note": f"uses {gh}"}}, 3, None, True]},
        "db_password": "plain words here",
        "client_secret": "s3cr3t!",
        aws: "key as a key",
        "token_count": 1200,
        "max_tokens": "4096",
        "api_key": "${API_KEY}",
        "card": 4111111111111111,
    }
    out, kinds = redact_value(value, policy=PII)
    dumped = json.dumps(out)
    for secret in (gh, aws, "hunter22", "plain words here", "s3cr3t!", "4111111111111111"):
        assert secret not in dumped
    assert out["deploy"]["steps"][0]["env"]["DB_PASSWORD"] == "[REDACTED:password]"
    assert out["deploy"]["steps"][1:] == [3, None, True]
    assert out["token_count"] == 1200
    assert out["max_tokens"] == "4096"
    assert out["api_key"] == "${API_KEY}"
    assert "[REDACTED:aws_access_key]" in out
    assert set(kinds) == {"aws_access_key", "card_number", "credential", "github_token", "password"}
    assert redact_value(value, policy=RedactionPolicy(secrets=False, pii=False)) == (value, ())


def test_kinds_never_carry_values() -> None:
    result = redact_text("password: Tr0ub4dor&3 and ghp_" + rand(AN, 36))
    assert all(k in SECRET_KINDS for k in result.kinds)
    assert "Tr0ub4dor" not in repr(result.kinds)


def test_find_reports_sorted_non_overlapping_spans() -> None:
    text = "a AKIAZ3MHLQ7PNV4XK2RB b password=hunter22 c " + "ghp_" + rand(AN, 36)
    spans = find(text)
    assert [f.kind for f in spans] == ["aws_access_key", "password", "github_token"]
    assert all(a.end <= b.start for a, b in itertools.pairwise(spans))


def test_long_adversarial_input_is_fast_enough_to_finish() -> None:
    # A pathological identifier chain must not make the keyword detector backtrack quadratically.
    text = "a-" * 50_000 + "password=x"
    assert redact_text(text).text == text  # "x" is too short to be a credential, and it finishes


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300))
def test_redaction_is_idempotent(text: str) -> None:
    once = redact_text(text, policy=PII)
    assert redact_text(once.text, policy=PII).text == once.text


@settings(max_examples=100, deadline=None)
@given(
    prefix=st.text(alphabet=string.ascii_letters + " .,:\n", max_size=80),
    suffix=st.text(alphabet=string.ascii_letters + " .,:\n", max_size=80),
    pick=st.integers(min_value=0, max_value=len(SECRETS) - 1),
)
def test_a_secret_anywhere_in_prose_never_survives(prefix: str, suffix: str, pick: int) -> None:
    _, secret, template = SECRETS[pick]
    # Context-dependent kinds carry their context word in the template, so the template goes in whole.
    text = f"{prefix} {template.format(secret)} {suffix}"
    assert secret not in redact_text(text).text


@pytest.mark.parametrize(
    "text",
    [
        "auth: refresh OAuth token on 401 before retrying",
        "token: rotate weekly on Mondays",
        "secret: keep the vault sealed until the audit",
    ],
)
def test_a_label_before_a_sentence_is_not_a_credential(text: str):
    assert redact_text(text).text == text


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("auth: Xk9pq2wLm then retry", "Xk9pq2wLm"),
        ("password: sunshine and more", "sunshine"),
        ("auth: sunshine", "sunshine"),
        ("token=refresh", "refresh"),
    ],
)
def test_values_after_a_label_are_still_redacted(text: str, secret: str):
    assert secret not in redact_text(text).text
