"""The redaction benchmark's corpus: realistic texts holding true secrets, personal data or look-alikes only.

Generated from a fixed seed (bench/redaction.py scores it); the parts and the random values are in
bench/_redaction_gen.py.
"""

from __future__ import annotations

import string
from urllib.parse import quote

from _redaction_gen import ALNUM, B64, HEX, URLSAFE, D, Gen, S, Sample, Template, compose


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
