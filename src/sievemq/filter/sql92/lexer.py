"""Tokens of a SQL92 selector, following RocketMQ's JavaCC lexer exactly (docs/protocol/sql92.md §2).

* whitespace: space, ``\\t``, ``\\n``, ``\\r``, ``\\f`` only;
* comments: ``/* ... */`` and ``-- ...`` up to and including a line end; a ``--`` with no line end
  after it is *not* a comment (it lexes as two ``-``);
* keywords (case-insensitive): NOT AND OR BETWEEN IN TRUE FALSE NULL IS CONTAINS STARTSWITH ENDSWITH;
* identifiers: ASCII ``[A-Za-z_$][A-Za-z0-9_$]*``, spelling kept;
* integers ``0 | [1-9][0-9]*[lL]?``, floats ``D+.D*[exp] | .D+[exp] | D+exp``; longest match wins,
  so ``007`` is ``0`` ``0`` ``7`` and ``0x10`` is ``0`` ``x10``;
* strings in single quotes with ``''`` for a quote, nothing else escaped;
* punctuation ``= <> > >= < <= ( ) , + -``.

Tokens are produced on demand (with look-ahead), so an error is reported where the parser reaches
it, left to right.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, TypeAlias

from sievemq.filter.sql92.errors import SqlError

__all__ = ["KEYWORDS", "Lexer", "Token", "TokenKind"]

KEYWORDS = frozenset(
    {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS", "STARTSWITH", "ENDSWITH"}
)
"""RocketMQ's reserved words. ``LIKE``, ``ESCAPE`` and ``EXISTS`` are *not* reserved: sievemq
recognises them only where RocketMQ could never accept an identifier."""

TokenKind: TypeAlias = Literal["KEYWORD", "IDENT", "INT", "FLOAT", "STRING", "OP", "EOF"]

_WHITESPACE = " \t\n\r\f"
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_DECIMAL = re.compile(r"0|[1-9][0-9]*[lL]?")
# The three FLOATING_POINT_LITERAL alternatives are mutually exclusive at any start position, so
# this ordered alternation finds the longest float match.
_FLOAT = re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
_TWO_CHAR_OPS = ("<>", "<=", ">=")
_ONE_CHAR_OPS = "=<>(),+-"

_HINTS = {
    "!": "use <> for 'not equal' and NOT for negation",
    '"': "string literals use single quotes ('like this')",
    "&": "use AND",
    "|": "use OR",
    "*": "there is no arithmetic and no '*' (subscribe-all is a TAG expression, not SQL92)",
    "/": "there is no arithmetic ('/*' starts a comment)",
    "%": "there is no arithmetic ('%' is a wildcard only inside a LIKE pattern)",
    ".": "property names cannot contain '.'",
    ";": "a selector is one expression; remove the ';'",
    "[": "IN lists use parentheses: a IN ('x', 'y')",
    "`": "property names are not quoted",
}


@dataclass(frozen=True, slots=True)
class Token:
    """One token: ``kind``, the exact source ``text``, its 1-based ``pos`` and, for keywords, the
    upper-cased keyword in ``value`` (for strings: the decoded value; otherwise the text)."""

    kind: TokenKind
    text: str
    pos: int
    value: str

    def describe(self) -> str:
        """How error messages name this token."""
        if self.kind == "EOF":
            return "the end of the expression"
        text = self.text if len(self.text) <= 32 else self.text[:29] + "..."
        return text

    def is_keyword(self, *words: str) -> bool:
        """True if this token is one of the given (upper-case) keywords."""
        return self.kind == "KEYWORD" and self.value in words

    def is_op(self, *ops: str) -> bool:
        """True if this token is one of the given punctuation tokens."""
        return self.kind == "OP" and self.value in ops

    def is_word(self, word: str) -> bool:
        """True for an identifier spelled ``word`` in any letter case (contextual keywords)."""
        return self.kind == "IDENT" and self.text.upper() == word


class Lexer:
    """On-demand tokenizer with unbounded look-ahead (:meth:`peek`)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._i = 0
        self._buffer: list[Token] = []

    def peek(self, k: int = 0) -> Token:
        """The token ``k`` positions ahead of the next one, without consuming anything."""
        while len(self._buffer) <= k:
            if self._buffer and self._buffer[-1].kind == "EOF":
                return self._buffer[-1]
            self._buffer.append(self._scan())
        return self._buffer[k]

    def next(self) -> Token:
        """Consume and return the next token."""
        token = self.peek()
        if token.kind != "EOF":
            self._buffer.pop(0)
        return token

    def _error(self, message: str, index: int) -> SqlError:
        return SqlError(message, index + 1, self.text)

    def _skip_blanks(self) -> None:
        text = self.text
        n = len(text)
        i = self._i
        while i < n:
            c = text[i]
            if c in _WHITESPACE:
                i += 1
            elif c == "-" and text.startswith("--", i):
                ends = [j for j in (text.find("\n", i + 2), text.find("\r", i + 2)) if j >= 0]
                if not ends:
                    break  # not a comment: no line end follows; lexes as '-' '-'
                end = min(ends)
                i = end + (2 if text.startswith("\r\n", end) else 1)
            elif c == "/" and text.startswith("/*", i):
                end = text.find("*/", i + 2)
                if end < 0:
                    raise self._error("unterminated /* comment", i)
                i = end + 2
            else:
                break
        self._i = i

    def _scan(self) -> Token:
        self._skip_blanks()
        text = self.text
        i = self._i
        if i >= len(text):
            return Token("EOF", "", i + 1, "")
        c = text[i]
        if c == "'":
            return self._scan_string(i)
        if c.isascii() and (c.isdigit() or (c == "." and text[i + 1 : i + 2].isdigit() and text[i + 1].isascii())):
            return self._scan_number(i)
        if c.isascii() and (c.isalpha() or c in "_$"):
            match = _IDENT.match(text, i)
            assert match is not None
            word = match.group()
            self._i = match.end()
            upper = word.upper()
            if upper in KEYWORDS:
                return Token("KEYWORD", word, i + 1, upper)
            return Token("IDENT", word, i + 1, word)
        for op in _TWO_CHAR_OPS:
            if text.startswith(op, i):
                self._i = i + 2
                return Token("OP", op, i + 1, op)
        if c in _ONE_CHAR_OPS:
            self._i = i + 1
            return Token("OP", c, i + 1, c)
        raise self._error(self._bad_char_message(c), i)

    def _bad_char_message(self, c: str) -> str:
        shown = repr(c) if c.isprintable() else "a control character"
        message = f"unexpected character {shown} (U+{ord(c):04X})"
        if c in _HINTS:
            return f"{message}: {_HINTS[c]}"
        if c.isspace():
            return f"{message}: only space, tab, CR, LF and form feed count as whitespace"
        if not c.isascii() and (c.isalnum() or c == "_"):
            return f"{message}: property names are ASCII only ([A-Za-z_$][A-Za-z0-9_$]*)"
        return message

    def _scan_string(self, i: int) -> Token:
        text = self.text
        j = i + 1
        while True:
            close = text.find("'", j)
            if close < 0:
                raise self._error("unterminated string literal (a quote inside a string is written '')", i)
            if text.startswith("''", close):
                j = close + 2
                continue
            self._i = close + 1
            raw = text[i : close + 1]
            return Token("STRING", raw, i + 1, raw[1:-1].replace("''", "'"))

    def _scan_number(self, i: int) -> Token:
        text = self.text
        dec = _DECIMAL.match(text, i)
        flt = _FLOAT.match(text, i)
        dec_end = dec.end() if dec else i
        flt_end = flt.end() if flt else i
        if flt_end > dec_end:
            self._i = flt_end
            return Token("FLOAT", text[i:flt_end], i + 1, text[i:flt_end])
        self._i = dec_end
        return Token("INT", text[i:dec_end], i + 1, text[i:dec_end])
