"""Duplicate tasks: exact (hash of the normalised content) and near (MinHash LSH over shingles of
it, Jaccard >= threshold, confirmed on the exact shingle sets), grouped into clusters with one keeper.

Code is normalised first, so a renamed copy is still a copy: Python through `tokenize`
(identifiers -> ID, numbers and strings -> LIT, comments dropped; keywords and operators kept),
shell and other text by a small lexer ($var and var= -> ID, numbers and quoted strings -> LIT).
The instruction counts as the set of its content words, so a rewording keeps most of it.
"""

import hashlib
import io
import keyword
import re
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass

from datasketch import MinHash, MinHashLSH

_WORD = re.compile(r"[a-z0-9]+")
_SHELL = re.compile(r"""\$\{?\w+\}?|\w+(?==)|"(?:[^"\\]|\\.)*"|'[^']*'|\d+(?:\.\d+)?|\w+|[^\s\w]""")
_HEREDOC = re.compile(r"""<<-?\s*['"]?(\w+)['"]?[^\n]*\n(.*?)\n\1\b""", re.S)
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER,
         tokenize.ENCODING}


def python_tokens(code: str) -> list[str] | None:
    """Identifiers -> ID, literals -> LIT; None when it is not Python."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type in _SKIP:
                continue
            if tok.type == tokenize.NAME:
                out.append(tok.string if keyword.iskeyword(tok.string) else "ID")
            elif tok.type in (tokenize.NUMBER, tokenize.STRING) or tok.type in _FSTRING:
                out.append("LIT")
            else:
                out.append(tok.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return out


_FSTRING = {getattr(tokenize, n) for n in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END") if hasattr(tokenize, n)}


def shell_tokens(code: str) -> list[str]:
    """Shell: variables ($x, ${x}, and every name assigned with x=) -> ID, numbers and quotes -> LIT."""
    assigned = set(re.findall(r"\b([A-Za-z_]\w*)=", code))
    out = []
    for t in _SHELL.findall(code):
        if t.startswith("$") or t in assigned:
            out.append("ID")
        elif t[:1] in "\"'" or t[:1].isdigit():
            out.append("LIT")
        else:
            out.append(t)
    return out


def _shell_with_heredocs(code: str) -> list[str]:
    """Shell, with each here-document that is Python (python3 - <<'PY' ... PY) normalised as Python."""
    out, pos = [], 0
    for m in _HEREDOC.finditer(code):
        out += shell_tokens(code[pos:m.start(2)])
        body = m.group(2)
        out += python_tokens(body) or shell_tokens(body)
        pos = m.end(2)
    return out + shell_tokens(code[pos:])


def normalise_file(name: str, text: str) -> list[str]:
    if name.endswith(".py") and (toks := python_tokens(text)) is not None:
        return toks
    if name.endswith((".sh", ".bash")) or text.startswith("#!"):
        return _shell_with_heredocs(text)
    return _WORD.findall(text.lower())


_STOP = frozenset({"a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "if", "in",
                   "into", "is", "it", "its", "of", "on", "or", "so", "that", "the", "then", "this", "to", "was",
                   "when", "which", "with"})


@dataclass
class Doc:
    digest: str  # hash of the normalised content: equal for exact (and renamed-identifier) copies
    shingles: set[str]


def normalise(instruction: str, files: dict[str, str], n: int = 5) -> Doc:
    """Instruction: its content words as a set (a rewording keeps most of them, whatever their order);
    files: n-token shingles of their normalised tokens, in path order."""
    words = [w for w in _WORD.findall(instruction.lower()) if w not in _STOP]
    toks: list[str] = []
    for name in sorted(files):
        toks += ["FILE", *normalise_file(name, files[name])]
    digest = hashlib.sha256(" ".join([*words, "INSTRUCTION", *toks]).encode()).hexdigest()
    return Doc(digest, {f"w:{w}" for w in words} | shingles(toks, n))


def shingles(tokens: Sequence[str], n: int) -> set[str]:
    if not tokens:
        return set()
    if len(tokens) <= n:
        return {" ".join(tokens)}
    return {" ".join(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


@dataclass
class Cluster:
    keeper: str
    members: list[str]  # keeper first
    kind: str  # "exact" when every member has the same normalised content, else "near"
    similarity: float  # lowest pairwise Jaccard that joined the cluster
    exact: list[str]  # members with the keeper's normalised content (the rest are near copies)


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def find_duplicates(docs: dict[str, Doc], threshold: float = 0.8, num_perm: int = 128,
                    order: Sequence[str] | None = None) -> list[Cluster]:
    """docs: key -> normalised doc. Clusters of two or more; the keeper is the first in `order`."""
    order = list(order or docs)
    rank = {k: i for i, k in enumerate(order)}
    sets = {k: v.shingles for k, v in docs.items()}
    digests = {k: v.digest for k, v in docs.items()}
    parent = {k: k for k in docs}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    lowest: dict[str, float] = {}
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    for key in sorted(docs, key=lambda k: rank.get(k, len(rank))):
        mh = MinHash(num_perm=num_perm, seed=1)
        mh.update_batch([s.encode() for s in sets[key]])
        for other in lsh.query(mh):
            sim = 1.0 if digests[other] == digests[key] else jaccard(sets[key], sets[other])
            if sim >= threshold:
                a, b = find(key), find(other)
                if a != b:
                    parent[max(a, b, key=rank.__getitem__)] = min(a, b, key=rank.__getitem__)
                root = find(key)
                lowest[root] = min(lowest.get(root, 1.0), lowest.pop(a, 1.0), lowest.pop(b, 1.0), sim)
        lsh.insert(key, mh)
    groups: dict[str, list[str]] = {}
    for key in docs:
        groups.setdefault(find(key), []).append(key)
    clusters = []
    for members in groups.values():
        if len(members) < 2:
            continue
        members.sort(key=rank.__getitem__)
        kind = "exact" if len({digests[m] for m in members}) == 1 else "near"
        exact = [m for m in members[1:] if digests[m] == digests[members[0]]]
        clusters.append(Cluster(members[0], members, kind, round(lowest.get(find(members[0]), 1.0), 4), exact))
    return sorted(clusters, key=lambda c: rank[c.keeper])
