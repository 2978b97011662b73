"""Personal data and secrets in a task's instruction and files: e-mail addresses, phone numbers,
card numbers (Luhn-checked), API keys (OpenAI/Anthropic, AWS, GitHub, Slack, Google, Stripe) and
PEM private keys. Each finding names the file and line; the matched value is masked in the report.

Addresses at reserved example domains (RFC 2606/6761: example.com/.org/.net, *.example, *.test,
*.invalid, *.localhost) are placeholders, not personal data.
"""

import re
from dataclasses import asdict, dataclass
from typing import Any

_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})\b")
_RESERVED = re.compile(r"(^|\.)(example\.(com|org|net)|example|test|invalid|localhost)$", re.I)
# International (+CC ...) or North-American (xxx) xxx-xxxx / xxx-xxx-xxxx shapes: dates, IPs and plain
# numbers of a data file do not match.
_PHONE = re.compile(r"(?<![\w+.-])(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]\d{2,4}){1,4}"
                    r"|\(\d{3}\)[ .-]?\d{3}[ .-]\d{4}|\d{3}[.-]\d{3}[.-]\d{4})(?![\w.-]*\d)")
_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")
_SECRETS = {
    "api-key (OpenAI/Anthropic)": re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}"),
    "api-key (AWS access key)": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "api-key (GitHub)": re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    "api-key (Slack)": re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    "api-key (Google)": re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),
    "api-key (Stripe)": re.compile(r"\b[rs]k_live_[0-9A-Za-z]{16,}"),
    "private-key (PEM)": re.compile(r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----"),
}


@dataclass
class Finding:
    kind: str
    location: str  # file:line
    excerpt: str  # masked


def luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _mask(value: str) -> str:
    return value[:4] + "*" * max(0, len(value) - 6) + value[-2:] if len(value) > 6 else "*" * len(value)


def scan_text(name: str, text: str) -> list[Finding]:
    found = []
    for lineno, line in enumerate(text.splitlines(), 1):
        where = f"{name}:{lineno}"
        for m in _EMAIL.finditer(line):
            if not _RESERVED.search(m.group(1)):
                found.append(Finding("email", where, _mask(m.group())))
        for m in _PHONE.finditer(line):
            if sum(c.isdigit() for c in m.group()) >= 9:
                found.append(Finding("phone", where, _mask(m.group())))
        for m in _CARD.finditer(line):
            digits = re.sub(r"\D", "", m.group())
            if 13 <= len(digits) <= 19 and digits[0] in "3456" and luhn(digits):
                found.append(Finding("card-number", where, _mask(digits)))
        for kind, rx in _SECRETS.items():
            for m in rx.finditer(line):
                found.append(Finding(kind, where, _mask(m.group())))
    return found


def scan_task(texts: dict[str, str]) -> list[dict[str, Any]]:
    """texts: display name (e.g. instruction.md, environment/users.csv) -> text."""
    return [asdict(f) for name in sorted(texts) for f in scan_text(name, texts[name])]
