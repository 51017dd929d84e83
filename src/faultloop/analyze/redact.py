"""What looks like a secret, replaced before any text leaves for an LLM endpoint.

Logs print environment dumps, command lines and URLs: a provider's token, a cloud key or a
password there must not reach a third-party model. `SHAPES` is the table of what looks like a
secret, one row per shape with where the shape comes from; a match is replaced by
`[REDACTED:<kind>]` and the rest of the line is left as it was, so that the model still reads the
ranks, exit codes and error strings around it. Private-key blocks span lines (`Redactor` follows
them); the configured endpoint key is replaced whatever its shape.

Every pattern is linear on hostile input: bounded repeats, no nested repeats, and each row is tried
only on lines holding one of its anchors.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from faultloop.core import atomic

MARKER = "[REDACTED:{}]"
# A configured key shorter than this is not searched for: a local server's dummy key ("x", "none")
# would otherwise blank every occurrence of an ordinary word.
MIN_KEY_CHARS = 8
# A private-key block whose END line never comes stops being followed after this many lines (a
# 4096-bit RSA key in PEM is 51 lines).
MAX_KEY_BLOCK_LINES = 200
FILE_BLOCK = 1 << 22  # characters of a log redacted at a time

# How the last word of a variable's, option's or field's name (split at `_`, `-`, `.`) ends when
# its value is a secret: `HF_TOKEN`, `PGPASSWORD`, `--db-password`, `"client_secret":`, `APIKEY`.
# The last word only: TOKENIZERS_PARALLELISM, max_tokens, password_file and secret_sharing are not
# secrets.
SECRET_WORDS = ("token", "secret", "password", "passwd", "passphrase", "credential", "credentials", "apikey")
# Last two words that name a secret together (`WANDB_API_KEY`, `AWS_SECRET_ACCESS_KEY`,
# `private-key`), where a key alone does not (`SORT_KEY`, `cache_key`).
SECRET_PAIRS = frozenset({("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"), ("auth", "key")})
# Values of such a name that hold no secret: unset, a reference to another variable, a mask.
NOT_A_VALUE = re.compile(r"(?i)(?:none|null|nil|true|false|undefined|\$.*|\*+|x+|<[^>]*>|\[REDACTED:.*)")


def names_a_secret(name: str) -> bool:
    """Whether a variable's, option's or field's name says its value is a secret."""
    words = [w for w in re.split(r"[_.\-]+", name.lower()) if w]
    return bool(words) and (words[-1].endswith(SECRET_WORDS) or tuple(words[-2:]) in SECRET_PAIRS)


@dataclass(frozen=True)
class Shape:
    """One shape of secret: its kind (the marker's word), the pattern (the named group `secret`
    is replaced where it has one, else the whole match), literals one of which a line must hold
    for the pattern to be tried (lower case: compared with the lowered line), and where the shape
    comes from. named: the match's `name` group must name a secret (`names_a_secret`)."""

    kind: str
    pattern: str
    anchors: tuple[str, ...]
    origin: str
    named: bool = False

    @functools.cached_property
    def regex(self) -> re.Pattern[str]:
        """Compiled on first use: logsage's deterministic runs import this module and never redact."""
        return re.compile(self.pattern)


# A token starts where no token character stands before it.
_B = r"(?<![A-Za-z0-9_\-])"
# A value after `=` or `:`: quoted (spaces allowed), else up to whitespace, a quote or a separator.
_VALUE = r"""(?:"(?P<dq>[^"\n]{1,1024})"|'(?P<sq>[^'\n]{1,1024})'|(?P<bare>[^\s"',;]{1,1024}))"""

SHAPES: tuple[Shape, ...] = (
    # ---- provider keys and tokens, by their documented prefixes ----
    Shape("anthropic_key", _B + r"sk-ant-[A-Za-z0-9_\-]{20,512}", ("sk-ant-",),
          "Anthropic API keys: `sk-ant-api03-...`, admin keys `sk-ant-admin01-...` (console.anthropic.com)"),
    Shape("openai_key", _B + r"sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,512}", ("sk-",),
          "OpenAI API keys: `sk-...`, project keys `sk-proj-...`, service accounts `sk-svcacct-...`, "
          "legacy user keys `sk-None-...` (platform.openai.com)"),
    Shape("github_token", _B + r"(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})",
          ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
          "GitHub tokens: `ghp_` personal, `gho_` OAuth, `ghu_`/`ghs_` app, `ghr_` refresh, `github_pat_` "
          "fine-grained (GitHub's token formats, 2021)"),
    Shape("gitlab_token", _B + r"gl(?:pat|dt|rt|ptt|cbt|oas)-[A-Za-z0-9_\-]{20,255}",
          ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "gloas-"),
          "GitLab tokens: `glpat-` personal access, `gldt-` deploy, `glrt-` runner (GitLab's token prefixes)"),
    Shape("slack_token", _B + r"xox[abposre]-[A-Za-z0-9\-]{10,255}", ("xox",),
          "Slack tokens: `xoxb-` bot, `xoxp-` user, `xoxa-`/`xoxr-` app and refresh (Slack's token types)"),
    Shape("huggingface_token", _B + r"hf_[A-Za-z0-9]{30,64}(?![A-Za-z0-9_])", ("hf_",),
          "Hugging Face user access tokens: `hf_` and 34 letters and digits (huggingface_hub's HF_TOKEN)"),
    Shape("aws_access_key_id", r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])",
          ("akia", "asia", "abia", "acca"),
          "AWS access key ids: `AKIA` long-term, `ASIA` temporary (IAM's unique identifier prefixes); the secret "
          "access key beside it is caught by its name (`aws_secret_access_key`, secret_assignment)"),
    Shape("google_api_key", _B + r"AIza[0-9A-Za-z_\-]{35}", ("aiza",),
          "Google API keys: `AIza` and 35 characters (Google Cloud's API keys)"),
    Shape("stripe_key", _B + r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,255}", ("_live_", "_test_"),
          "Stripe secret and restricted keys: `sk_live_`, `rk_live_`, `sk_test_` (Stripe's API keys)"),
    Shape("nvidia_api_key", _B + r"nvapi-[A-Za-z0-9_\-]{20,255}", ("nvapi-",),
          "NVIDIA API and NGC keys: `nvapi-...` (build.nvidia.com, NGC personal keys); older NGC keys by their "
          "name (`NGC_API_KEY`, `NGC_CLI_API_KEY`: secret_assignment)"),
    Shape("jwt", _B + r"eyJ[A-Za-z0-9_\-]{8,4096}\.eyJ[A-Za-z0-9_\-]{8,8192}\.[A-Za-z0-9_\-]{8,4096}", ("eyj",),
          "JSON Web Tokens (RFC 7519): base64url header and claims, each beginning `eyJ` (`{\"`), and a signature"),
    # ---- credentials by their place in a line ----
    Shape("authorization", r"(?i)\b(?:proxy-)?authorization\b[\"']?\s{0,8}[:=]\s{0,8}[\"']?"
          r"(?:(?:bearer|basic|token|digest|negotiate|apikey)\s{1,8})?"
          r"(?!(?:bearer|basic|token|digest|negotiate|apikey)\s)(?P<secret>[^\s\"',;\[]{1,4096})",
          ("authorization",), "HTTP `Authorization:` headers (RFC 9110): the scheme is kept, its credentials replaced"),
    Shape("bearer_token", r"(?i)\bbearer\s{1,8}(?P<secret>[A-Za-z0-9._~+/\-]{8,4096}=*)", ("bearer",),
          "a bearer token outside a header (RFC 6750 `Bearer <token>`: curl lines, client logs)"),
    Shape("url_password", r"\b[A-Za-z][A-Za-z0-9+.\-]{0,30}://[^\s:/@\[]{0,256}:(?P<secret>[^\s@/\[]{1,256})@",
          ("://",), "passwords in URLs (RFC 3986 userinfo `scheme://user:password@host`): the user is kept"),
    Shape("secret_assignment",
          r"(?<![A-Za-z0-9_.\-])(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{0,127})[\"']?\s{0,8}[:=]\s{0,8}" + _VALUE,
          (*SECRET_WORDS, "key"),
          "`KEY=value` and `KEY: value` environment dumps, config lines, JSON and Python dict fields whose name "
          "says secret (`names_a_secret`: HF_TOKEN, WANDB_API_KEY, NGC_API_KEY, AWS_SECRET_ACCESS_KEY, PASSWORD)",
          named=True),
    Shape("secret_option", r"(?<![A-Za-z0-9_\-])--?(?P<name>[A-Za-z][A-Za-z0-9_\-]{0,63})(?:=|\s{1,8})" + _VALUE,
          (*SECRET_WORDS, "key"),
          "command-line options whose name says secret (`--api-key X`, `--token=X`, `--password X`)",
          named=True),
)  # fmt: skip
KINDS = (*(shape.kind for shape in SHAPES), "private_key", "endpoint_key")
# Every anchor at once: a line holding none of them (nearly every line of a log) is passed as it is.
ANCHORS = tuple(sorted({a for s in SHAPES for a in s.anchors} | {"-----begin"}))

# PEM's armour (RFC 7468) around a private key: PKCS#1 and #8, EC, OpenSSH, PGP's key blocks.
KEY_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
KEY_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")


def _secret_span(match: re.Match[str]) -> tuple[int, int]:
    for group in ("secret", "dq", "sq", "bare"):
        if group in match.re.groupindex and match.group(group) is not None:
            return match.span(group)
    return match.span()


class Redactor:
    """Redacts lines in order (a private-key block spans lines) and counts what it replaced, by
    kind. keys: literal secrets replaced wherever they stand (the configured endpoint key)."""

    def __init__(self, keys: Iterable[str | None] = ()) -> None:
        self.keys = sorted({k for k in keys if k and len(k) >= MIN_KEY_CHARS and not _in_marker(k)}, key=len)[::-1]
        self.counts: Counter[str] = Counter()
        self._block_lines = 0  # lines left to follow in an open private-key block; 0: none open

    def line(self, text: str) -> str:
        """One line (its end, if any, kept) with every secret replaced."""
        for key in self.keys:
            if key in text:
                self.counts["endpoint_key"] += text.count(key)
                text = text.replace(key, MARKER.format("endpoint_key"))
        lowered = text.lower()
        if not self._block_lines and not any(anchor in lowered for anchor in ANCHORS):
            return text
        text = self._key_block(text)
        lowered = text.lower()
        for shape in SHAPES:
            if any(anchor in lowered for anchor in shape.anchors):
                text = shape.regex.sub(functools.partial(self._replace, shape), text)
        return text

    def lines(self, lines: Iterable[str]) -> Iterator[str]:
        """Lines in order, each redacted (a key block followed across them)."""
        return (self.line(line) for line in lines)

    def text(self, text: str) -> str:
        """A whole text (a key block across its lines too). The lines that hold no anchor and no
        key, nearly all of a log's, are found by searching the whole text and passed as they are."""
        lowered = text.lower()
        if len(lowered) != len(text):  # a character whose lower case is longer: line by line
            return "".join(self.lines(text.splitlines(keepends=True)))
        starts = sorted(self._lines_holding_anchors(text, lowered) | ({0} if self._block_lines else set()))
        out, done = [], 0
        for start in starts:
            if start < done:
                continue
            out.append(text[done:start])
            done = start
            while done < len(text):  # this line, and the rest of a key block it opens
                end = text.find("\n", done) + 1 or len(text)
                out.append(self.line(text[done:end]))
                done = end
                if not self._block_lines:
                    break
        out.append(text[done:])
        return "".join(out)

    def _lines_holding_anchors(self, text: str, lowered: str) -> set[int]:
        """Where each line that holds an anchor (or a key) starts."""
        starts = set()
        for needle, haystack in (*((a, lowered) for a in ANCHORS), *((k, text) for k in self.keys)):
            at = haystack.find(needle)
            while at != -1:
                starts.add(haystack.rfind("\n", 0, at) + 1)
                end = haystack.find("\n", at)
                at = haystack.find(needle, end) if end != -1 else -1
        return starts

    def _replace(self, shape: Shape, match: re.Match[str]) -> str:
        start, end = _secret_span(match)
        secret = match.string[start:end]
        if NOT_A_VALUE.fullmatch(secret) or (shape.named and not names_a_secret(match.group("name"))):
            return match.group(0)
        self.counts[shape.kind] += 1
        offset = match.start()
        whole = match.group(0)
        return whole[: start - offset] + MARKER.format(shape.kind) + whole[end - offset :]

    def _key_block(self, text: str) -> str:
        """Private-key armour (RFC 7468): the BEGIN line's armour replaced, then the key's text on
        each line up to the END line (a log's prefix on those lines kept); a block opened and
        closed on one line (a JSON string with `\\n` escapes) is replaced whole."""
        out, pos = [], 0
        if self._block_lines:
            stops = [m for m in (KEY_END.search(text), KEY_BEGIN.search(text)) if m is not None]
            if not stops:
                self._block_lines -= 1
                return _last_word_replaced(text)
            self._block_lines = 0  # the block ends here, at its END or at another's BEGIN
            pos = min(m.start() for m in stops)
            out.append(_glued_key_text_replaced(text[:pos]))
        while begin := KEY_BEGIN.search(text, pos):
            out.append(text[pos : begin.start()] + MARKER.format("private_key"))
            self.counts["private_key"] += 1
            end = KEY_END.search(text, begin.end())
            if end is None:
                self._block_lines = MAX_KEY_BLOCK_LINES
                return "".join(out) + text[len(text.rstrip("\r\n")) :]
            pos = end.end()
        out.append(text[pos:])
        return "".join(out)


def _last_word_replaced(text: str) -> str:
    """A line inside a key block: its last word (the base64) replaced, what stands before kept."""
    body = text.rstrip()
    cut = max(body.rfind(" "), body.rfind("\t")) + 1
    if cut == len(body):
        return text
    return body[:cut] + MARKER.format("private_key") + text[len(body) :]


def _glued_key_text_replaced(head: str) -> str:
    """What stands before an END armour: key text run into it replaced, a log's prefix kept."""
    cut = len(head)
    while cut and head[cut - 1] in BASE64:
        cut -= 1
    return head if cut == len(head) else head[:cut] + MARKER.format("private_key")


def _in_marker(key: str) -> bool:
    return any(key in MARKER.format(kind) for kind in KINDS)


def redact(text: str, keys: Iterable[str | None] = ()) -> str:
    """text with every secret replaced (the counts dropped: `Redactor` keeps them)."""
    return Redactor(keys).text(text)


def redact_file(source: Path, dest: Path, redactor: Redactor | None = None) -> Counter[str]:
    """A redacted copy of a log, written atomically, read and written a block of whole lines at a
    time (a line longer than a block is cut at its last space); what was replaced, by kind (also
    added to the redactor's counts)."""
    redactor = redactor or Redactor()
    before = Counter(redactor.counts)
    with open(source, encoding="utf-8", errors="replace", newline="") as handle:
        atomic.write_lines_atomic(dest, (redactor.text(block) for block in _blocks(handle)))
    return redactor.counts - before


def _blocks(handle: TextIO) -> Iterator[str]:
    """A text file in blocks of about FILE_BLOCK characters, each ending at a line's end."""
    rest = ""
    while chunk := handle.read(FILE_BLOCK):
        text = rest + chunk
        cut = text.rfind("\n") + 1
        if not cut and len(text) >= FILE_BLOCK:  # a line longer than a block: cut at its last space
            cut = text.rfind(" ") + 1 or len(text)
        if cut:
            yield text[:cut]
        rest = text[cut:]
    if rest:
        yield rest
