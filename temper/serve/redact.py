"""Redaction of personal data and secrets before any prompt or output is written to a log.

Covered: e-mail addresses, phone numbers, payment card numbers (Luhn-checked, so order ids
and timestamps survive), and API keys / tokens (OpenAI, Anthropic, AWS, GitHub, Slack, Google,
Stripe, bearer tokens, JWTs, and `key=value` assignments of secret-looking names).
"""

import re

_SECRETS = [
    r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}",  # OpenAI / Anthropic
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key id
    r"\bgh[pousr]_[A-Za-z0-9]{30,}\b",  # GitHub
    r"\bgithub_pat_[A-Za-z0-9_]{40,}\b",
    r"\bxox[abprs]-[A-Za-z0-9\-]{10,}\b",  # Slack
    r"\bAIza[0-9A-Za-z_\-]{35}\b",  # Google
    r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}\b",  # Stripe
    r"\bhf_[A-Za-z0-9]{30,}\b",  # Hugging Face
    r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\b",  # JWT
    r"\b[Bb]earer\s+[A-Za-z0-9._\-+/=]{16,}",
]
SECRET = re.compile("|".join(f"(?:{p})" for p in _SECRETS))
# `api_key = "..."`, `password: ...`, `token=...`: keep the name, drop the value.
ASSIGNED = re.compile(r"(?i)\b((?:api[_-]?key|secret|token|passw(?:or)?d|access[_-]?key)[\w-]*\s*[:=]\s*)"
                      r"(['\"]?)[^\s'\"]{6,}\2")
EMAIL = re.compile(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b")
CARD = re.compile(r"\b(?:\d[ \-]?){12,18}\d\b")
# International (+CC ...) or North-American style numbers with separators; 7+ digits in all.
PHONE = re.compile(r"(?<![\w.])(?:\+\d{1,3}[\s.\-]?)?(?:\(\d{2,4}\)[\s.\-]?|\d{2,4}[\s.\-])\d{2,4}[\s.\-]?\d{3,4}\b"
                   r"|(?<![\w.])\+\d{8,14}\b")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card(m: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", m.group(0))
    return "[CARD]" if 13 <= len(digits) <= 19 and _luhn(digits) else m.group(0)


def redact(text: str) -> str:
    text = SECRET.sub("[SECRET]", text)
    text = ASSIGNED.sub(lambda m: f"{m.group(1)}[SECRET]", text)
    text = EMAIL.sub("[EMAIL]", text)
    text = CARD.sub(_card, text)
    text = PHONE.sub(lambda m: "[PHONE]" if sum(c.isdigit() for c in m.group(0)) >= 7 else m.group(0), text)
    return text
