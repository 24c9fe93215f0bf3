"""The redaction benchmark's parts: labelled secrets and look-alikes, texts made of them, and random values in the
published shape of each kind (bench/redaction.py; the templates are in bench/_redaction_corpus.py)."""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


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
