"""Secrets planted in logs, one per shape of `analyze.redact.SHAPES` (and a private-key block),
each made up in its provider's documented format; and the check that none reached a test server.

Use in a test module (pytest puts tests/ on sys.path):

    from planted_secrets import PLANTED_LINES, SECRETS, assert_nothing_leaked
"""

from __future__ import annotations

from openai_server import OpenAIServer

ENDPOINT_KEY = "local-endpoint-key-7f3a9c"  # the configured key: no provider's shape

# One planted secret per shape: (kind, the line a log prints, the secret in it).
# fmt: off
PLANTED: list[tuple[str, str, str]] = [
    ("openai_key", "export OPENAI_API_KEY_BACKUP_FOR sk-proj-Q3xT9kLm2Vb7Rn4Wp8Zs1Yc6Hd0Fg5Ja", "sk-proj-Q3xT9kLm2Vb7Rn4Wp8Zs1Yc6Hd0Fg5Ja"),
    ("openai_key", "[rank0]: openai.AuthenticationError: Incorrect API key provided: sk-7bQ2mX9pL4vN8cR1tY6wZ3kJ5hG0fD2s", "sk-7bQ2mX9pL4vN8cR1tY6wZ3kJ5hG0fD2s"),
    ("anthropic_key", "client = Anthropic(key sk-ant-api03-Zx8Qm2Lp9Vn4Rt7Wk1Yb6Hc3Jd0Fg5Sa-AbCdEf)", "sk-ant-api03-Zx8Qm2Lp9Vn4Rt7Wk1Yb6Hc3Jd0Fg5Sa-AbCdEf"),
    ("github_token", "+ git clone https://ghp_R2d2C3p0Xw9Yv8Ut7Sr6Qp5On4Ml3Kj2Ih1G@github.com/org/train.git", "ghp_R2d2C3p0Xw9Yv8Ut7Sr6Qp5On4Ml3Kj2Ih1G"),
    ("github_token", "using github_pat_11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789abcdefghijKLMNOPQRSTUVWX for pip", "github_pat_11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789abcdefghijKLMNOPQRSTUVWX"),
    ("gitlab_token", "pip install git+https://oauth2@gitlab.example.com/x.git # glpat-Xy7Zq2Wv9Ut4Sr1Qp8On", "glpat-Xy7Zq2Wv9Ut4Sr1Qp8On"),
    ("slack_token", "notify: posting with xoxb-2048-4096-Rt5Yu7Io9Pa1Sd3Fg to #train-alerts", "xoxb-2048-4096-Rt5Yu7Io9Pa1Sd3Fg"),
    ("huggingface_token", "huggingface-cli login using hf_QwErTyUiOpAsDfGhJkLzXcVbNm1234567890", "hf_QwErTyUiOpAsDfGhJkLzXcVbNm1234567890"),
    ("aws_access_key_id", "botocore: credentials AKIAZ7QX3LMN4OPQ5RST found in environment", "AKIAZ7QX3LMN4OPQ5RST"),
    ("secret_assignment", "aws_secret_access_key = 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", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8mX4kL2p"),
    ("google_api_key", "gemini: key=AIzaSyD4-Qm9Xb2Lp7Vn0Rt3Wk8Yc1Hd6Fg5Jq2 rejected", "AIzaSyD4-Qm9Xb2Lp7Vn0Rt3Wk8Yc1Hd6Fg5Jq2"),
    ("stripe_key", "billing hook with sk_live_51HqZx8Qm2Lp9Vn4Rt7Wk1Yb", "sk_live_51HqZx8Qm2Lp9Vn4Rt7Wk1Yb"),
    ("nvidia_api_key", "docker login nvcr.io -u $oauthtoken -p nvapi-Qm9Xb2Lp7Vn0Rt3Wk8Yc1Hd6Fg5Jq2sZx", "nvapi-Qm9Xb2Lp7Vn0Rt3Wk8Yc1Hd6Fg5Jq2sZx"),
    ("jwt", "[rank2]: ray session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0cmFpbmVyIn0.Qm9Xb2Lp7Vn0Rt3Wk8Yc1Hd6Fg expired", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0cmFpbmVyIn0.Qm9Xb2Lp7Vn0Rt3Wk8Yc1Hd6Fg"),
    ("secret_assignment", "WANDB_API_KEY=8f14e45fceea167a5a36dedd4bea2543d0c9a1b7", "8f14e45fceea167a5a36dedd4bea2543d0c9a1b7"),
    ("secret_assignment", "NGC_API_KEY=bjRzOGY3ZDZnNWg0ajNrMmwxOm1ubzk4YmNkLWVmZ2g", "bjRzOGY3ZDZnNWg0ajNrMmwxOm1ubzk4YmNkLWVmZ2g"),
    ("secret_assignment", 'DB_PASSWORD="correct horse battery"', "correct horse battery"),
    ("secret_assignment", "[rank0]: {'client_secret': 'Zq9-Wx8_Vc7', 'rank': 0}", "Zq9-Wx8_Vc7"),
    ("secret_assignment", "HF_TOKEN: Sh0rtL1v3dT0k3n", "Sh0rtL1v3dT0k3n"),
    ("secret_option", "+ python upload.py --api-key Kx7Lm9Np2Qr4 --epochs 3", "Kx7Lm9Np2Qr4"),
    ("authorization", "> Authorization: Bearer Tk.9aZ-Qm2Lp7Vn0Rt3Wk8", "Tk.9aZ-Qm2Lp7Vn0Rt3Wk8"),
    ("authorization", "Authorization: Basic YWRtaW46aHVudGVyMg==", "YWRtaW46aHVudGVyMg=="),
    ("bearer_token", "curl -sS -H 'X-Auth: Bearer Rt3Wk8Yc1Hd6Fg5Jq' http://metrics:9090", "Rt3Wk8Yc1Hd6Fg5Jq"),
    ("url_password", "mlflow: tracking at postgresql://trainer:Hunter2-Blue@db.internal:5432/mlflow", "Hunter2-Blue"),
    ("url_password", "pip: Looking in indexes: https://__token__:Pypi9Secret7@pypi.example.com/simple", "Pypi9Secret7"),
    ("endpoint_key", f"[rank1]: export LLM_KEY_COPY {ENDPOINT_KEY} done", ENDPOINT_KEY),
]
# fmt: on
PEM = [
    "[rank0]: -----BEGIN RSA PRIVATE KEY-----",
    "[rank0]: MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
    "[rank0]: VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK",
    "[rank0]: LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo==",
    "[rank0]: -----END RSA PRIVATE KEY-----",
]
PEM_SECRETS = [line.split(": ", 1)[1] for line in PEM[1:4]]
SECRETS = [secret for _, _, secret in PLANTED] + PEM_SECRETS
PLANTED_LINES = [line for _, line, _ in PLANTED] + PEM


def assert_nothing_leaked(server: OpenAIServer, key: str = ENDPOINT_KEY) -> None:
    """No planted secret in any request the server received (also as JSON escapes a slash);
    key: the endpoint key configured where the corpus prints ENDPOINT_KEY."""
    assert server.requests
    secrets = [secret.replace(ENDPOINT_KEY, key) for secret in SECRETS]
    for request in server.requests:
        body = request.raw.decode()
        leaked = [secret for secret in secrets if secret in body or secret.replace("/", "\\/") in body]
        assert not leaked, leaked


def planted_lines(key: str = ENDPOINT_KEY) -> list[str]:
    """The corpus's lines, printing `key` where it prints the endpoint key."""
    return [line.replace(ENDPOINT_KEY, key) for line in PLANTED_LINES]
