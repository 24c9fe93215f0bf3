"""Redaction benchmark: recall and precision per kind of secret on a labelled corpus built here.

The corpus is generated from a fixed seed: true secrets (in the published formats of each
provider, freshly random, so none is real) embedded in realistic text (logs, config files,
shell history, chat, code, docs), and look-alikes that must survive (git SHAs, UUIDs, content
hashes, base64 images, placeholders, AWS's documented example keys, prose about passwords and
tokens, URLs without credentials, numbers that fail the Luhn check, documentation addresses).

Scoring is by span. A secret counts as found when the redacted spans cover it entirely (a
partial redaction leaks the rest); a redacted span is a true positive when it overlaps a
labelled secret; a look-alike survives when no redacted span touches it. The same corpus is
scored with Yelp's detect-secrets (its default plugins, line by line) when it is installed,
as a reference: ``pip install detect-secrets``.

    python bench/redaction.py                # full run, writes bench/results/redaction.json
    python bench/redaction.py --samples 200  # quicker
"""

from __future__ import annotations

import argparse
import base64
import json
import platform
import random
import string
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rich.console import Console
from rich.table import Table

from engramdb.models import RedactionPolicy
from engramdb.privacy.redact import find

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benign import BENIGN

RESULTS_DIR = Path(__file__).resolve().parent / "results"
console = Console()

# -- corpus ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Secret:
    """A labelled true secret (or personal datum) of ``kind``."""

    kind: str
    value: str


@dataclass(frozen=True, slots=True)
class Decoy:
    """A look-alike of ``category`` that must survive redaction."""

    category: str
    value: str


Part = str | Secret | Decoy


@dataclass(slots=True)
class Sample:
    text: str
    genre: str
    secrets: list[tuple[str, int, int]] = field(default_factory=list)
    decoys: list[tuple[str, int, int]] = field(default_factory=list)


def compose(genre: str, parts: Sequence[Part]) -> Sample:
    """Join ``parts`` into one text, recording where each secret and look-alike lands."""
    sample = Sample(text="", genre=genre)
    out: list[str] = []
    pos = 0
    for part in parts:
        text = part if isinstance(part, str) else part.value
        if isinstance(part, Secret):
            sample.secrets.append((part.kind, pos, pos + len(text)))
        elif isinstance(part, Decoy):
            sample.decoys.append((part.category, pos, pos + len(text)))
        out.append(text)
        pos += len(text)
    sample.text = "".join(out)
    return sample


ALNUM = string.ascii_letters + string.digits
UPPER_NUM = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


class Gen:
    """Random values in the published shapes of each kind of secret and look-alike."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def s(self, alphabet: str, n: int) -> str:
        return "".join(self.r.choice(alphabet) for _ in range(n))

    def pick(self, options: Sequence[Any]) -> Any:
        return self.r.choice(options)

    # secrets
    def aws_access_key(self) -> str:
        return self.pick(["AKIA", "ASIA"]) + self.s(UPPER_NUM, 16)

    def aws_secret_key(self) -> str:
        return self.s(B64, 40)

    def gcp_api_key(self) -> str:
        return "AIza" + self.s(URLSAFE, 35)

    def gcp_oauth_token(self) -> str:
        return "ya29." + self.s(URLSAFE, self.r.randint(80, 160))

    def azure_storage_key(self) -> str:
        return self.s(B64, 86) + "=="

    def azure_sas(self) -> str:
        return self.s(ALNUM, 40) + "%3D"

    def azure_client_secret(self) -> str:
        return self.s(ALNUM, 3) + str(self.r.randint(0, 9)) + "Q~" + self.s(ALNUM + "_~.-", 34)

    def github_token(self) -> str:
        if self.r.random() < 0.25:
            return "github_pat_" + self.s(ALNUM, 22) + "_" + self.s(ALNUM, 59)
        return self.pick(["ghp_", "gho_", "ghs_", "ghu_"]) + self.s(ALNUM, 36)

    def gitlab_token(self) -> str:
        return "glpat-" + self.s(URLSAFE, 20)

    def slack_token(self) -> str:
        return f"xox{self.pick('bpa')}-{self.s(string.digits, 12)}-{self.s(string.digits, 13)}-{self.s(ALNUM, 24)}"

    def slack_webhook(self) -> str:
        return f"https://hooks.slack.com/services/T{self.s(UPPER_NUM, 8)}/B{self.s(UPPER_NUM, 10)}/{self.s(ALNUM, 24)}"

    def stripe_key(self) -> str:
        return self.pick(["sk_live_", "rk_live_", "sk_test_"]) + self.s(ALNUM, self.pick([24, 99]))

    def openai_key(self) -> str:
        if self.r.random() < 0.5:
            return "sk-" + self.s(ALNUM, 20) + "T3BlbkFJ" + self.s(ALNUM, 20)
        return "sk-proj-" + self.s(URLSAFE, 74) + "T3BlbkFJ" + self.s(URLSAFE, 74)

    def anthropic_key(self) -> str:
        return "sk-ant-api03-" + self.s(URLSAFE, 93) + "AA"

    def huggingface_token(self) -> str:
        return "hf_" + self.s(ALNUM, 34)

    def npm_token(self) -> str:
        return "npm_" + self.s(ALNUM, 36)

    def sendgrid_key(self) -> str:
        return "SG." + self.s(URLSAFE, 22) + "." + self.s(URLSAFE, 43)

    def jwt(self) -> str:
        def enc(obj: dict[str, Any]) -> str:
            return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

        header = {"alg": self.pick(["HS256", "RS256"]), "typ": "JWT"}
        payload = {"sub": self.s(HEX, 12), "iat": self.r.randint(1_600_000_000, 1_800_000_000), "role": "admin"}
        return f"{enc(header)}.{enc(payload)}.{self.s(URLSAFE, 43)}"

    def opaque_token(self) -> str:
        return self.s(URLSAFE, self.r.randint(24, 48))

    def basic_auth(self) -> str:
        user = self.pick(["admin", "deploy", "ci-bot", "alice"])
        return base64.b64encode(f"{user}:{self.password()}".encode()).decode()

    def password(self) -> str:
        style = self.r.random()
        if style < 0.4:
            word = self.pick(["Summer", "dragon", "Tr0ub4dor", "monkey", "Welcome", "hunter", "P@ss", "letmein"])
            return word + self.s(string.digits, self.r.randint(1, 4)) + self.pick(["", "!", "#", "$"])
        if style < 0.8:
            return self.s(ALNUM + "!#$%^*-_", self.r.randint(10, 20))
        return self.s(ALNUM, self.r.randint(16, 32))

    def hex_secret(self) -> str:
        return self.s(HEX, self.pick([32, 40, 64]))

    def private_key(self, *, escaped: bool = False) -> str:
        label = self.pick(["RSA PRIVATE KEY", "PRIVATE KEY", "OPENSSH PRIVATE KEY", "EC PRIVATE KEY"])
        lines = [self.s(B64, 64) for _ in range(self.r.randint(3, 8))] + [self.s(B64, 20) + "=="]
        nl = "\\n" if escaped else "\n"
        return f"-----BEGIN {label}-----{nl}" + nl.join(lines) + f"{nl}-----END {label}-----"

    # personal data
    def email(self) -> str:
        first = self.pick(["alice", "bob", "carol", "dmitri", "eva", "farid", "gao", "hana", "ivan", "julia"])
        last = self.pick(["smith", "nguyen", "mueller", "garcia", "rossi", "kim", "okafor", "silva"])
        sep = self.pick([".", "_", ""])
        domain = self.pick(
            ["gmail.com", "acme-corp.io", "fastmail.fm", "uni-heidelberg.de", "proton.me", "yahoo.co.uk"]
        )
        return f"{first}{sep}{last}@{domain}"

    def phone(self) -> str:
        n = self.s(string.digits, 4)
        return self.pick(
            [
                f"+1 415 555 {n}",
                f"(212) 555-{n}",
                f"415-555-{n}",
                f"+44 20 7946 {self.s(string.digits, 4)}",
                f"+49 30 {self.s(string.digits, 8)}",
                f"+33 1 42 68 {self.s(string.digits, 2)} {self.s(string.digits, 2)}",
                f"+1-646-555-{n}",
            ]
        )

    def card(self) -> str:
        prefix = self.pick(["4", "51", "55", "37", "6011"])
        length = 15 if prefix == "37" else 16
        body = prefix + self.s(string.digits, length - len(prefix) - 1)
        for d in string.digits:
            if _luhn(body + d):
                digits = body + d
                break
        if length == 15:
            return f"{digits[:4]} {digits[4:10]} {digits[10:]}"
        sep = self.pick([" ", "-", ""])
        return sep.join(digits[i : i + 4] for i in range(0, 16, 4))

    def not_luhn_card(self) -> str:
        while True:
            digits = "4" + self.s(string.digits, 15)
            if not _luhn(digits):
                return " ".join(digits[i : i + 4] for i in range(0, 16, 4))

    # look-alikes
    def sha1(self) -> str:
        return self.s(HEX, 40)

    def sha256(self) -> str:
        return self.s(HEX, 64)

    def uuid(self) -> str:
        h = self.s(HEX, 32)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{self.pick('89ab')}{h[17:20]}-{h[20:]}"

    def data_uri(self) -> str:
        return "data:image/png;base64,iVBORw0KGgo" + self.s(B64, self.r.randint(60, 200)) + "="

    def integrity(self) -> str:
        return "sha512-" + self.s(B64, 86) + "=="


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


Template = Callable[[Gen], tuple[str, list[Part]]]
S, D = Secret, Decoy


def _secret_templates() -> list[Template]:
    """Each returns (genre, parts): a realistic text with one or more true secrets."""
    return [
        lambda g: (
            "config",
            [
                "[default]\naws_access_key_id = ",
                S("aws_access_key", g.aws_access_key()),
                "\naws_secret_access_key = ",
                S("aws_secret_key", g.aws_secret_key()),
                "\nregion = eu-west-1\n",
            ],
        ),
        lambda g: (
            "shell",
            [
                "$ export AWS_ACCESS_KEY_ID=",
                S("aws_access_key", g.aws_access_key()),
                "\n$ aws s3 ls s3://build-artifacts --region us-east-1",
            ],
        ),
        lambda g: (
            "chat",
            [
                "Deploy failed again. I used the key ",
                S("aws_access_key", g.aws_access_key()),
                " from the old account, maybe it was rotated?",
            ],
        ),
        lambda g: (
            "code",
            ['const maps = new google.maps.Map(el, { key: "', S("gcp_api_key", g.gcp_api_key()), '" });'],
        ),
        lambda g: (
            "log",
            [
                "2024-03-02T11:04:55Z DEBUG gcloud token refreshed: ",
                S("gcp_oauth_token", g.gcp_oauth_token()),
                " expires_in=3599",
            ],
        ),
        lambda g: (
            "config",
            [
                '{\n  "type": "service_account",\n  "project_id": "billing-prod",\n  "private_key": "',
                S("private_key", g.private_key(escaped=True)),
                '",\n  "client_email": "',
                S("email", "svc@billing-prod.iam.gserviceaccount.com"),
                '"\n}',
            ],
        ),
        lambda g: (
            "config",
            [
                "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=logsprod;AccountKey=",
                S("azure_storage_key", g.azure_storage_key()),
                ";EndpointSuffix=core.windows.net",
            ],
        ),
        lambda g: (
            "log",
            [
                "GET https://logsprod.blob.core.windows.net/exports/day.csv?sv=2022-11-02&ss=b&srt=o&sp=r&se=2024-04-01&sig=",
                S("azure_sas_token", g.azure_sas()),
                " 200 OK",
            ],
        ),
        lambda g: (
            "config",
            [
                "AZURE_CLIENT_ID=6f1c2d9e-0b7a-4d7e-9a51-3c2f8e1b4d60\nAZURE_CLIENT_SECRET=",
                S("azure_client_secret", g.azure_client_secret()),
                "\n",
            ],
        ),
        lambda g: (
            "shell",
            [
                "git remote set-url origin https://x-access-token:",
                S("github_token", g.github_token()),
                "@github.com/acme/api.git",
            ],
        ),
        lambda g: (
            "chat",
            ["use this PAT for the release job: ", S("github_token", g.github_token()), " (expires Friday)"],
        ),
        lambda g: (
            "config",
            [
                '[[runners]]\n  url = "https://gitlab.acme.dev/"\n  token = "',
                S("gitlab_token", g.gitlab_token()),
                '"\n',
            ],
        ),
        lambda g: (
            "code",
            [
                'client = WebClient(token="',
                S("slack_token", g.slack_token()),
                '")\nclient.chat_postMessage(channel="#ops", text=msg)',
            ],
        ),
        lambda g: (
            "config",
            ["alerting:\n  slack_webhook: ", S("slack_webhook", g.slack_webhook()), "\n  channel: '#alerts'\n"],
        ),
        lambda g: (
            "code",
            ["stripe.api_key = '", S("stripe_key", g.stripe_key()), "'\ncharge = stripe.Charge.create(amount=2000)"],
        ),
        lambda g: (
            "shell",
            ["OPENAI_API_KEY=", S("openai_key", g.openai_key()), " python eval.py --model gpt-4o"],
        ),
        lambda g: (
            "chat",
            ["my anthropic key is ", S("anthropic_key", g.anthropic_key()), ", can you check why it returns 401?"],
        ),
        lambda g: (
            "shell",
            ["huggingface-cli login --token ", S("huggingface_token", g.huggingface_token())],
        ),
        lambda g: (
            "config",
            ["//registry.npmjs.org/:_authToken=", S("npm_token", g.npm_token()), "\n"],
        ),
        lambda g: (
            "code",
            ["sg = SendGridAPIClient('", S("sendgrid_key", g.sendgrid_key()), "')"],
        ),
        lambda g: (
            "config",
            [S("private_key", g.private_key()), "\n"],
        ),
        lambda g: (
            "chat",
            ["here is the deploy key, paste it into the runner:\n", S("private_key", g.private_key()), "\nthanks!"],
        ),
        lambda g: (
            "log",
            ["POST /api/v2/orders 401 headers={'Authorization': 'Bearer ", S("jwt", g.jwt()), "'}"],
        ),
        lambda g: (
            "shell",
            ['curl -H "Authorization: Bearer ', S("bearer_token", g.opaque_token()), '" https://api.acme.dev/v1/me'],
        ),
        lambda g: (
            "log",
            ["upstream request: Authorization: Basic ", S("basic_auth", g.basic_auth()), " -> 403"],
        ),
        lambda g: (
            "config",
            [
                "DATABASE_URL=postgres://app_user:",
                S("url_password", quote(g.password(), safe="")),
                "@db.internal:5432/orders\n",
            ],
        ),
        lambda g: (
            "log",
            [
                "connecting to mongodb+srv://analytics:",
                S("url_password", g.password()),
                "@cluster0.x1y2z.mongodb.net/prod?retryWrites=true",
            ],
        ),
        lambda g: (
            "config",
            ["CELERY_BROKER_URL = 'redis://:", S("url_password", g.password()), "@cache.internal:6379/0'"],
        ),
        lambda g: (
            "config",
            [
                "Server=tcp:sql-prod.database.windows.net,1433;Initial Catalog=crm;User ID=crm_app;Password=",
                S("password", g.password().replace(";", "")),
                ";Encrypt=True;",
            ],
        ),
        lambda g: (
            "config",
            ["database:\n  host: db.internal\n  user: reporting\n  password: ", S("password", g.password()), "\n"],
        ),
        lambda g: (
            "config",
            ['{"db": {"user": "etl", "password": "', S("password", g.password()), '"}}'],
        ),
        lambda g: (
            "shell",
            ["mysql -h 10.0.3.7 -u root --password=", S("password", g.password()), " orders < dump.sql"],
        ),
        lambda g: (
            "chat",
            ["the wifi password is ", S("password", g.password()), " if anyone asks"],
        ),
        lambda g: (
            "chat",
            [
                "Login for the staging admin: user admin, password ",
                S("password", g.password()),
                ". Please don't share.",
            ],
        ),
        lambda g: (
            "code",
            [
                'SECRET_KEY = "',
                S("credential", "django-insecure-" + g.s(ALNUM + "!@#%^&*(-_=+)", 50).replace('"', "")),
                '"',
            ],
        ),
        lambda g: (
            "config",
            ["MAILGUN_API_KEY=", S("credential", "key-" + g.hex_secret()), "\n"],
        ),
        lambda g: (
            "config",
            ["webhook:\n  secret: ", S("credential", g.hex_secret()), "\n  events: [push]\n"],
        ),
        lambda g: (
            "code",
            ['headers = {"X-API-Key": "', S("credential", g.opaque_token()), '"}'],
        ),
        lambda g: (
            "chat",
            ["The client_secret is ", S("credential", g.opaque_token()), " for the staging tenant."],
        ),
        lambda g: (
            "log",
            ["auth ok session_token=", S("credential", g.opaque_token()), " user=4411 ip=10.2.0.14"],
        ),
        # Harder: the word and the value apart, plain-word passwords, secrets with no context word at all.
        lambda g: ("chat", ["The password for the staging database is ", S("password", g.password()), " now."]),
        lambda g: (
            "config",
            [
                "[smtp]\nhost = mail.acme.dev\npassword = ",
                S("password", g.pick(["sunshine", "dragonfly", "correcthorse"])),
                "\n",
            ],
        ),
        lambda g: (
            "chat",
            ["I pasted ", S("credential", g.opaque_token()), " into the vault config, does it work for you?"],
        ),
        lambda g: ("shell", ["docker login -u deploy -p ", S("password", g.password()), " registry.acme.dev"]),
        lambda g: (
            "code",
            [
                "conn = psycopg.connect(host='db', user='app', password='",
                S("password", g.password().replace("'", "")),
                "')",
            ],
        ),
        lambda g: (
            "log",
            [
                "Set-Cookie: sessionid=",
                S("credential", g.s(string.ascii_lowercase + string.digits, 32)),
                "; HttpOnly; Secure",
            ],
        ),
        lambda g: (
            "config",
            [
                "machine api.heroku.com\n  login ",
                S("email", "ops@acme.dev"),
                "\n  password ",
                S("password", g.hex_secret()),
                "\n",
            ],
        ),
    ]


def _pii_templates() -> list[Template]:
    return [
        lambda g: ("chat", ["Please send the invoice to ", S("email", g.email()), " before Friday."]),
        lambda g: ("log", ["user signup ok email=", S("email", g.email()), " plan=pro"]),
        lambda g: ("chat", ["You can reach me at ", S("phone", g.phone()), " after 5pm."]),
        lambda g: ("config", ["oncall:\n  name: Dana\n  phone: ", S("phone", g.phone()), "\n"]),
        lambda g: ("chat", ["charge it to my card ", S("card_number", g.card()), ", exp 04/27"]),
        lambda g: ("log", ["payment declined card=", S("card_number", g.card()), " reason=insufficient_funds"]),
        lambda g: (
            "chat",
            ["Contact ", S("email", g.email()), " or ", S("phone", g.phone()), " for access to the billing portal."],
        ),
        # Harder: a national number from another region, digits without separators, an obfuscated address.
        lambda g: (
            "chat",
            ["ring the London office on ", S("phone", f"020 7946 {g.s(string.digits, 4)}"), " tomorrow"],
        ),
        lambda g: ("log", ["sms sent to=", S("phone", f"+1415555{g.s(string.digits, 4)}"), " status=queued"]),
        lambda g: ("chat", ["write to ", S("email", "jmiller at gmail dot com"), " if the form fails"]),
        lambda g: ("config", ["billing_card: ", S("card_number", g.card().replace(" ", "").replace("-", "")), "\n"]),
    ]


def _decoy_templates() -> list[Template]:
    """Texts with look-alikes only: nothing in them may be redacted."""
    return [
        lambda g: (
            "log",
            ["commit ", D("git_sha", g.sha1()), "\nAuthor: CI <ci@example.com>\n\n    fix token refresh race"],
        ),
        lambda g: (
            "shell",
            ["git checkout ", D("git_sha", g.sha1()[:12]), " && git cherry-pick ", D("git_sha", g.sha1())],
        ),
        lambda g: ("config", ["image: registry.acme.dev/api@sha256:", D("hash", g.sha256()), "\n"]),
        lambda g: (
            "docs",
            ["The release tarball's SHA-256 is ", D("hash", g.sha256()), "; verify it before installing."],
        ),
        lambda g: ("config", ['"integrity": "', D("hash", g.integrity()), '",']),
        lambda g: ("log", ["request_id=", D("uuid", g.uuid()), " status=200 latency_ms=41"]),
        lambda g: ("log", ["trace ", D("uuid", g.uuid()), " span ", D("hash", g.s(HEX, 16)), " token bucket refilled"]),
        lambda g: ("code", ['<img alt="logo" src="', D("data_uri", g.data_uri()), '">']),
        lambda g: (
            "docs",
            [
                "For example, set AWS_ACCESS_KEY_ID=",
                D("aws_example", "AKIAIOSFODNN7EXAMPLE"),
                " and AWS_SECRET_ACCESS_KEY=",
                D("aws_example", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
                ".",
            ],
        ),
        lambda g: ("docs", ["api_key: ", D("placeholder", "<your-api-key>"), "\nendpoint: https://api.acme.dev\n"]),
        lambda g: ("config", ["OPENAI_API_KEY=", D("placeholder", "${OPENAI_API_KEY}"), "\n"]),
        lambda g: ("config", ["password: ", D("placeholder", "********"), "\n"]),
        lambda g: ("config", ["        token: ", D("placeholder", "${{ secrets.GITHUB_TOKEN }}"), "\n"]),
        lambda g: ("docs", ["Generate a token (it looks like ", D("placeholder", "ghp_" + "x" * 36), ") in settings."]),
        lambda g: ("docs", ["export STRIPE_KEY=", D("placeholder", "sk_live_" + "X" * 24), " # replace with yours"]),
        lambda g: (
            "code",
            ["password = ", D("code_ref", "os.environ['DB_PASSWORD']"), "\nconn = connect(password=password)"],
        ),
        lambda g: ("code", ["token = ", D("code_ref", "request.headers.get('X-Token')"), "\n"]),
        lambda g: ("code", ["api_key = ", D("code_ref", "settings.api_key"), "\n"]),
        lambda g: ("chat", [D("prose", "The password reset link expired"), ", can you send a new one?"]),
        lambda g: (
            "docs",
            [
                "We use a ",
                D("prose", "token bucket"),
                " rate limiter; ",
                D("prose", "max_tokens=4096"),
                " per request.",
            ],
        ),
        lambda g: ("chat", ["The ", D("prose", "secret sauce"), " is the cache warming, not the model."]),
        lambda g: ("docs", [D("prose", "The password is required"), " and must have 12 characters."]),
        lambda g: (
            "docs",
            [
                D("prose", "Rotate the API key every 90 days"),
                "; ",
                D("prose", "JWT tokens expire after 15 minutes"),
                ".",
            ],
        ),
        lambda g: (
            "docs",
            [D("prose", "Basic authentication is disabled"), "; ", D("prose", "Bearer tokens are required"), "."],
        ),
        lambda g: ("log", ["warning: ", D("prose", "token count exceeded: 8192"), " > 8000"]),
        lambda g: ("config", ["DATABASE_URL=", D("url", "postgres://db.internal:5432/orders"), "\n"]),
        lambda g: ("shell", ["git clone ", D("url", "git@github.com:acme/api.git"), " && cd api"]),
        lambda g: ("docs", ["see ", D("url", "https://docs.acme.dev/auth/tokens#rotate"), " for details"]),
        lambda g: (
            "log",
            ["deployed ", D("version", "v2.14.3"), " at ", D("version", "2024-05-12T10:00:00Z"), " to 10.0.4.12"],
        ),
        lambda g: ("chat", ["order ", D("number", g.not_luhn_card()), " shipped; tracking 1Z999AA10123456784"]),
        lambda g: (
            "log",
            [
                "ts=",
                D("number", str(g.r.randint(1_600_000_000, 1_800_000_000))),
                " build=",
                D("number", str(g.r.randint(10**8, 10**9))),
            ],
        ),
        lambda g: (
            "docs",
            [
                "Send questions to ",
                D("doc_email", "support@example.com"),
                " or ",
                D("doc_email", "jane@example.org"),
                ".",
            ],
        ),
        lambda g: ("docs", ["ISBN ", D("number", "978-0-13-468599-1"), ", 2nd edition"]),
        lambda g: ("log", ["md5(payload)=", D("hash", g.s(HEX, 32)), " size=18234"]),
        # Harder look-alikes: keyword-adjacent values that are not secrets, random ids without context.
        lambda g: (
            "config",
            ["features:\n  ", D("prose", "secret: true"), "\n  ", D("prose", "password_policy: strong"), "\n"],
        ),
        lambda g: ("config", ['{"', D("prose", 'password": null'), ', "user": "svc"}']),
        lambda g: (
            "docs",
            ["Download from https://drive.google.com/file/d/", D("random_id", "1" + g.s(URLSAFE, 32)), "/view"],
        ),
        lambda g: ("log", ["GET /v1/objects/", D("random_id", g.s(ALNUM, 24)), " 200"]),
        lambda g: ("docs", ["Key fingerprint ", D("hash", "SHA256:" + g.s(B64, 43)), " (ED25519)"]),
        lambda g: (
            "chat",
            ["I'll ", D("prose", "pass tomorrow"), " on the review, ", D("prose", "the token was expired"), "."],
        ),
        lambda g: ("code", ["from sklearn.pipeline import Pipeline  # ", D("prose", "sk-learn style"), " API"]),
        lambda g: ("log", ["refreshing ", D("prose", "token: rotated"), " at ", D("version", "2024-06-01 12:00:05")]),
        lambda g: (
            "docs",
            ["Call ", D("number", "1-800-FLOWERS"), " or see page ", D("number", "212"), " of the manual."],
        ),
    ]


def build_corpus(n: int, *, seed: int = 20240501) -> list[Sample]:
    """``n`` samples: about half with secrets, a fifth with personal data, the rest look-alikes only."""
    g = Gen(seed)
    secret_t, pii_t, decoy_t = _secret_templates(), _pii_templates(), _decoy_templates()
    samples = []
    for i in range(n):
        roll = i % 10
        pool = secret_t if roll < 5 else pii_t if roll < 7 else decoy_t
        # Walk each pool in order so every template appears, then at random.
        template = pool[(i // 10) % len(pool)] if i < 10 * max(len(secret_t), len(decoy_t)) else g.pick(pool)
        genre, parts = template(g)
        if g.r.random() < 0.3:  # a look-alike next to a secret: precision must hold in mixed text
            _extra_genre, extra = g.pick(decoy_t)(g)
            parts = [*parts, "\n", *extra]
        samples.append(compose(genre, parts))
    return samples


# -- scoring --------------------------------------------------------------------------------------------------

Span = tuple[int, int]
Detector = Callable[[Sample], list[tuple[str, int, int]]]


def engram_detector(policy: RedactionPolicy) -> Detector:
    def detect(sample: Sample) -> list[tuple[str, int, int]]:
        return [(f.kind, f.start, f.end) for f in find(sample.text, policy=policy)]

    return detect


_EXTENSIONS = {"code": ".py", "config": ".cfg"}


def detect_secrets_detector() -> Callable[[Sample], list[tuple[str, int, int]]] | None:
    """Yelp's detect-secrets as its users run it: default plugins and filters, one file per sample.

    (Its ad-hoc ``scan_line`` reports every entropy candidate unfiltered, which would be unfair.)
    Code samples are scanned as ``.py`` and config samples as ``.cfg`` files, since its keyword
    heuristics depend on the file type. Reported values are mapped back to spans on their line.
    """
    try:
        from detect_secrets.core.scan import scan_file
        from detect_secrets.settings import default_settings
    except ImportError:
        return None
    tmp = Path(tempfile.mkdtemp(prefix="engram-redaction-bench-"))

    def detect(sample: Sample) -> list[tuple[str, int, int]]:
        path = tmp / f"sample{_EXTENSIONS.get(sample.genre, '.txt')}"
        path.write_text(sample.text)
        lines = sample.text.splitlines(keepends=True)
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line))
        found: list[tuple[str, int, int]] = []
        with default_settings():
            for secret in scan_file(str(path)):
                value = secret.secret_value
                if not value or not 1 <= secret.line_number <= len(lines):
                    continue
                line = lines[secret.line_number - 1]
                start = line.find(value)
                while start != -1:
                    base = offsets[secret.line_number - 1]
                    found.append((secret.type, base + start, base + start + len(value)))
                    start = line.find(value, start + 1)
        return found

    return detect


def _covered(span: Span, found: list[tuple[str, int, int]]) -> bool:
    """Whether the union of found spans covers ``span`` entirely."""
    start, end = span
    pos = start
    for _, s, e in sorted(found, key=lambda f: f[1]):
        if s <= pos < e:
            pos = e
        if pos >= end:
            return True
    return pos >= end


def _overlaps(a: Span, b: Span) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@dataclass
class Score:
    recall: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))  # kind -> [found, n]
    typed: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # kind -> found with the right kind
    precision: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))  # kind -> [tp, n]
    decoys: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))  # category -> [kept, n]
    seconds: float = 0.0
    chars: int = 0


def score(samples: Sequence[Sample], detect: Detector, *, kinds: set[str] | None = None) -> Score:
    """Score ``detect`` on ``samples``; labels outside ``kinds`` are ignored (neither found nor missed)."""
    result = Score()
    for sample in samples:
        t0 = time.perf_counter()
        found = detect(sample)
        result.seconds += time.perf_counter() - t0
        result.chars += len(sample.text)
        labels = [s for s in sample.secrets if kinds is None or s[0] in kinds]
        ignored = [s for s in sample.secrets if kinds is not None and s[0] not in kinds]
        for kind, start, end in labels:
            cell = result.recall[kind]
            cell[1] += 1
            if _covered((start, end), found):
                cell[0] += 1
                if any(k == kind and _overlaps((s, e), (start, end)) for k, s, e in found):
                    result.typed[kind] += 1
        for kind, start, end in found:
            if any(_overlaps((start, end), (s, e)) for _, s, e in ignored):
                continue  # a finding on a label of a disabled kind is neither right nor wrong here
            cell = result.precision[kind]
            cell[1] += 1
            if any(_overlaps((start, end), (s, e)) for _, s, e in labels):
                cell[0] += 1
        for category, start, end in sample.decoys:
            cell = result.decoys[category]
            cell[1] += 1
            if not any(_overlaps((start, end), (s, e)) for _, s, e in found):
                cell[0] += 1
    return result


def benign_changes(detect: Detector) -> dict[str, list[str]]:
    """The benign snippets ``detect`` would change, by genre and in all ("all")."""
    changed: dict[str, list[str]] = {genre: [] for genre in ["all", *(g for g, _ in BENIGN)]}
    for genre, text in BENIGN:
        if detect(Sample(text=text, genre=genre)):
            changed[genre].append(text)
            changed["all"].append(text)
    return changed


def _ratio(cell: Sequence[int]) -> float | None:
    return cell[0] / cell[1] if cell[1] else None


def _totals(table: dict[str, list[int]]) -> list[int]:
    return [sum(c[0] for c in table.values()), sum(c[1] for c in table.values())]


def summary(result: Score) -> dict[str, Any]:
    return {
        "recall": _ratio(_totals(result.recall)),
        "precision": _ratio(_totals(result.precision)),
        "lookalikes_kept": _ratio(_totals(result.decoys)),
        "per_kind": {
            kind: {
                "n": cell[1],
                "recall": _ratio(cell),
                "typed_correctly": result.typed[kind] / cell[1] if cell[1] else None,
                "precision": _ratio(result.precision[kind]) if kind in result.precision else None,
                "redactions": result.precision[kind][1] if kind in result.precision else 0,
            }
            for kind, cell in sorted(result.recall.items())
        },
        "findings_per_kind": {k: {"true": c[0], "n": c[1]} for k, c in sorted(result.precision.items())},
        "lookalikes": {k: {"kept": c[0], "n": c[1]} for k, c in sorted(result.decoys.items())},
        "chars_per_second": result.chars / result.seconds if result.seconds else None,
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=1000, help="corpus size (default 1000)")
    parser.add_argument("--seed", type=int, default=20240501)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "redaction.json")
    parser.add_argument("--show-misses", action="store_true", help="print missed secrets and redacted look-alikes")
    args = parser.parse_args(argv)

    samples = build_corpus(args.samples, seed=args.seed)
    pii_kinds = {"email", "phone", "card_number"}
    secret_kinds = {k for s in samples for k, _, _ in s.secrets} - pii_kinds
    systems: dict[str, tuple[Detector, set[str]]] = {
        "engramdb (secrets)": (engram_detector(RedactionPolicy(secrets=True, pii=False)), secret_kinds),
        "engramdb (secrets+pii)": (engram_detector(RedactionPolicy(secrets=True, pii=True)), secret_kinds | pii_kinds),
    }
    reference = detect_secrets_detector()
    if reference is not None:
        systems["detect-secrets 1.x (reference)"] = (reference, secret_kinds)
    else:
        console.print("[yellow]detect-secrets is not installed: no reference column (pip install detect-secrets)[/]")

    results = {name: score(samples, det, kinds=kinds) for name, (det, kinds) in systems.items()}

    overview = Table(title=f"Redaction on {len(samples)} labelled samples (seed {args.seed})", title_justify="left")
    for col in ("system", "recall", "precision", "look-alikes kept", "chars/s"):
        overview.add_column(col, justify="right" if col != "system" else "left")
    for name, res in results.items():
        s = summary(res)
        overview.add_row(
            name, _pct(s["recall"]), _pct(s["precision"]), _pct(s["lookalikes_kept"]), f"{s['chars_per_second']:,.0f}"
        )
    console.print(overview)

    names = list(results)
    per_kind = Table(
        title="Per kind: recall (typed correctly) / precision of redactions of that kind", title_justify="left"
    )
    per_kind.add_column("kind")
    per_kind.add_column("n", justify="right")
    for name in names:
        per_kind.add_column(name, justify="right")
    all_kinds = sorted({k for r in results.values() for k in r.recall})
    for kind in all_kinds:
        n = max(r.recall[kind][1] for r in results.values() if kind in r.recall)
        cells = []
        for name in names:
            res = results[name]
            if kind not in res.recall:
                cells.append("-")
                continue
            rec = _ratio(res.recall[kind])
            if name.endswith("(reference)"):
                cells.append(_pct(rec))  # its own type names: only recall compares
                continue
            typed = res.typed[kind] / res.recall[kind][1]
            prec = _ratio(res.precision[kind]) if kind in res.precision else None
            cells.append(f"{_pct(rec)} ({_pct(typed)}) / {_pct(prec)}")
        per_kind.add_row(kind, str(n), *cells)
    console.print(per_kind)

    decoy_table = Table(title="Look-alikes kept intact", title_justify="left")
    decoy_table.add_column("category")
    decoy_table.add_column("n", justify="right")
    for name in names:
        decoy_table.add_column(name, justify="right")
    for category in sorted({c for r in results.values() for c in r.decoys}):
        n = next(r.decoys[category][1] for r in results.values())
        decoy_table.add_row(category, str(n), *[_pct(_ratio(results[name].decoys[category])) for name in names])
    console.print(decoy_table)

    benign = {name: benign_changes(det) for name, (det, _kinds) in systems.items()}
    benign_table = Table(
        title=f"Benign corpus ({len(BENIGN)} hand-written snippets, bench/_benign.py): share changed (false positives)",
        title_justify="left",
    )
    benign_table.add_column("genre")
    benign_table.add_column("n", justify="right")
    for name in names:
        benign_table.add_column(name, justify="right")
    for genre in [*sorted({g for g, _ in BENIGN}), "all"]:
        n = sum(1 for g, _ in BENIGN if genre in ("all", g))
        benign_table.add_row(genre, str(n), *[_pct(len(benign[name][genre]) / n) for name in names])
    console.print(benign_table)

    if args.show_misses:
        for text in benign["engramdb (secrets+pii)"]["all"]:
            console.print(f"[magenta]BENIGN changed[/]: {text!r}")
        detect, _kinds = systems["engramdb (secrets+pii)"]
        for sample in samples:
            found = detect(sample)
            for kind, start, end in sample.secrets:
                if not _covered((start, end), found):
                    console.print(f"[red]MISSED {kind}[/]: {sample.text[max(0, start - 40) : end + 10]!r}", markup=True)
            for category, start, end in sample.decoys:
                hit = [f for f in found if _overlaps((start, end), (f[1], f[2]))]
                if hit:
                    console.print(
                        f"[yellow]REDACTED look-alike {category}[/] as {hit[0][0]}: {sample.text[start:end]!r}"
                    )
            for kind, start, end in found:
                if not any(_overlaps((start, end), (s, e)) for _, s, e in sample.secrets):
                    console.print(f"[magenta]FALSE {kind}[/]: {sample.text[max(0, start - 30) : end + 10]!r}")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": "redaction",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "corpus": {
            "samples": len(samples),
            "seed": args.seed,
            "secrets": dict(Counter(k for s in samples for k, _, _ in s.secrets)),
            "lookalikes": dict(Counter(c for s in samples for c, _, _ in s.decoys)),
            "genres": dict(Counter(s.genre for s in samples)),
        },
        "systems": {name: summary(res) for name, res in results.items()},
        "benign": {
            "snippets": len(BENIGN),
            "changed": {name: {g: len(texts) for g, texts in b.items()} for name, b in benign.items()},
        },
    }
    args.out.write_text(json.dumps(payload, indent=2) + "\n")
    console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
