# SPDX-License-Identifier: Apache-2.0
"""Go's parsers where kube-apiserver's error text is theirs: strconv.ParseUint (a
resourceVersion, APIObjectVersioner.ParseResourceVersion), base64.RawURLEncoding and
encoding/json's syntax scanner (a continue token, a DeleteOptions body), and the continue
tokens of apiserver/pkg/storage/continue.go (EncodeContinue, DecodeContinue), which fakekube's
paged lists issue and read as etcd3's GetList does.
"""

import base64
import json

from .kselectors import go_quote

_B64URL = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def parse_uint(s):
    """strconv.ParseUint(s, 10, 64): the value, or ValueError with Go's message (no sign, no
    underscore, ASCII digits only)."""
    if not s or any(c not in "0123456789" for c in s):
        raise ValueError("strconv.ParseUint: parsing %s: invalid syntax" % go_quote(s))
    v = int(s)
    if v >= 1 << 64:
        raise ValueError("strconv.ParseUint: parsing %s: value out of range" % go_quote(s))
    return v


def raw_url_b64decode(s):
    """base64.RawURLEncoding.DecodeString(s): the bytes, or ValueError("illegal base64 data at
    input byte N") where Go's decoder stops (line breaks are skipped, '=' is illegal, a lone
    last character is an error at its offset)."""
    quantum, last = 0, 0
    for i, c in enumerate(s):
        if c in "\r\n":
            continue
        if c not in _B64URL:
            raise ValueError("illegal base64 data at input byte %d" % i)
        quantum = (quantum + 1) % 4
        last = i
    if quantum == 1:
        raise ValueError("illegal base64 data at input byte %d" % last)
    clean = "".join(c for c in s if c not in "\r\n")
    return base64.urlsafe_b64decode(clean + "=" * (-len(clean) % 4))


def _quote_char(c):
    """encoding/json's quoteChar: a byte as its scanner's errors show it."""
    if c == "'":
        return "'\\''"
    if c == '"':
        return "'\"'"
    return "'" + go_quote(c)[1:-1] + "'"


class _Syntax(Exception):
    pass


class _Scanner:
    """encoding/json's checkValid over the bytes of a document (each byte one character,
    latin-1), raising _Syntax with the message its scanner gives."""

    def __init__(self, text):
        self.s, self.i = text, 0

    def fail(self, context):
        if self.i >= len(self.s):
            raise _Syntax("unexpected end of JSON input")
        raise _Syntax("invalid character %s %s" % (_quote_char(self.s[self.i]), context))

    def ws(self):
        while self.i < len(self.s) and self.s[self.i] in " \t\r\n":
            self.i += 1

    def peek(self):
        return self.s[self.i] if self.i < len(self.s) else ""

    def document(self):
        self.value()
        self.ws()
        if self.i < len(self.s):
            self.fail("after top-level value")

    def value(self):
        self.ws()
        c = self.peek()
        if c == "{":
            self.i += 1
            self.ws()
            if self.peek() == "}":
                self.i += 1
                return
            while True:
                self.ws()
                if self.peek() != '"':
                    self.fail("looking for beginning of object key string")
                self.string()
                self.ws()
                if self.peek() != ":":
                    self.fail("after object key")
                self.i += 1
                self.value()
                self.ws()
                c = self.peek()
                if c == "}":
                    self.i += 1
                    return
                if c != ",":
                    self.fail("after object key:value pair")
                self.i += 1
        elif c == "[":
            self.i += 1
            self.ws()
            if self.peek() == "]":
                self.i += 1
                return
            while True:
                self.value()
                self.ws()
                c = self.peek()
                if c == "]":
                    self.i += 1
                    return
                if c != ",":
                    self.fail("after array element")
                self.i += 1
        elif c == '"':
            self.string()
        elif c == "-" or c.isdigit() and c.isascii():
            self.number()
        elif c in ("t", "f", "n"):
            word = {"t": "true", "f": "false", "n": "null"}[c]
            self.i += 1
            for want in word[1:]:
                if self.peek() != want:
                    self.fail("in literal %s (expecting %s)" % (word, _quote_char(want)))
                self.i += 1
        else:
            self.fail("looking for beginning of value")

    def string(self):
        self.i += 1
        while True:
            c = self.peek()
            if c == "":
                self.fail("")
            if c == '"':
                self.i += 1
                return
            if c == "\\":
                self.i += 1
                e = self.peek()
                if e == "u":
                    self.i += 1
                    for _ in range(4):
                        if self.peek() == "" or self.peek() not in "0123456789abcdefABCDEF":
                            self.fail("in \\u hexadecimal character escape")
                        self.i += 1
                    continue
                if e == "" or e not in '"\\/bfnrt':
                    self.fail("in string escape code")
            elif ord(c) < 0x20:
                self.fail("in string literal")
            self.i += 1

    def digits(self):
        if not ("0" <= self.peek() <= "9" and self.peek() != ""):
            self.fail("in numeric literal")
        while self.peek() != "" and "0" <= self.peek() <= "9":
            self.i += 1

    def number(self):
        if self.peek() == "-":
            self.i += 1
        if self.peek() == "0":
            self.i += 1
        else:
            self.digits()
        if self.peek() == ".":
            self.i += 1
            self.digits()
        if self.peek() in ("e", "E") and self.peek() != "":
            self.i += 1
            if self.peek() in ("+", "-") and self.peek() != "":
                self.i += 1
            self.digits()


def json_syntax_error(data):
    """The error encoding/json's Unmarshal gives for data (bytes) that is not one JSON value
    ("invalid character 'x' looking for beginning of value", "unexpected end of JSON input"),
    or None."""
    try:
        _Scanner(data.decode("latin-1")).document()
    except _Syntax as e:
        return str(e)
    return None


def json_kind(v):
    """How encoding/json's UnmarshalTypeError names a JSON value's kind."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (dict, _Pairs)):
        return "object"
    return "array"


# ---------------------------------------------------------------- continue tokens

ERR_GENERIC = "continue key is not valid"


def encode_continue(key, key_prefix, rv):
    """storage.EncodeContinue: the key the next page starts at (the last one returned plus
    NUL), relative to the list's key prefix, and the resourceVersion it reads at."""
    tok = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": key[len(key_prefix):]},
                     separators=(",", ":"))
    return base64.urlsafe_b64encode(tok.encode()).decode().rstrip("=")


def _clean(p):
    """path.Clean of a rooted path."""
    out = []
    for part in p.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if out:
                out.pop()
            continue
        out.append(part)
    return "/" + "/".join(out)


def decode_continue(value, key_prefix):
    """storage.DecodeContinue: (the key to start at, the resourceVersion) of a continue token,
    or ValueError with its message (wrapped by the caller in "invalid continue token: ")."""
    try:
        data = raw_url_b64decode(value)
    except ValueError as e:
        raise ValueError("%s: %s" % (ERR_GENERIC, e))
    err = json_syntax_error(data)
    if err:
        raise ValueError("%s: %s" % (ERR_GENERIC, err))
    tok = json.loads(data.decode("utf-8", "replace"), object_pairs_hook=_Pairs, parse_float=_Lit)
    if not isinstance(tok, _Pairs):
        if tok is not None:
            raise ValueError("%s: json: cannot unmarshal %s into Go value of type "
                             "storage.continueToken" % (ERR_GENERIC, json_kind(tok)))
        tok = []
    fields = {"v": "", "rv": 0, "start": ""}
    err = None
    for k, v in tok:
        # encoding/json: a key matches its field exactly, else without regard to case
        f = k if k in fields else next((n for n in fields if n.lower() == k.lower()), None)
        if f is None or v is None:
            continue
        if f == "rv":
            if isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < 1 << 63:
                fields[f] = v
                continue
            what = ("number " + (v.text if isinstance(v, _Lit) else str(v))
                    if isinstance(v, (int, float)) and not isinstance(v, bool)
                    else json_kind(v))
            err = err or "json: cannot unmarshal %s into Go struct field continueToken.rv " \
                         "of type int64" % what
        elif isinstance(v, str):
            fields[f] = v
        else:
            err = err or "json: cannot unmarshal %s into Go struct field continueToken.%s " \
                         "of type string" % (json_kind(v), f)
    if err:
        raise ValueError("%s: %s" % (ERR_GENERIC, err))
    if fields["v"] != "meta.k8s.io/v1":
        raise ValueError("%s: server does not recognize this encoded version %s"
                         % (ERR_GENERIC, fields["v"]))
    if fields["rv"] == 0:
        raise ValueError("continue key is not valid: incorrect encoded start resourceVersion "
                         "(version meta.k8s.io/v1)")
    if not fields["start"]:
        raise ValueError("continue key is not valid: encoded start key empty (version "
                         "meta.k8s.io/v1)")
    key = fields["start"] if fields["start"].startswith("/") else "/" + fields["start"]
    cleaned = _clean(key)
    if cleaned != key:
        raise ValueError("%s: %s" % (ERR_GENERIC, fields["start"]))
    return key_prefix + cleaned[1:], fields["rv"]


class _Pairs(list):
    """A JSON object as its (key, value) pairs, in order, repeats kept."""


class _Lit(float):
    """A JSON number that is not an integer, with its text (Go's errors quote it)."""

    def __new__(cls, text):
        f = super().__new__(cls, float(text))
        f.text = text
        return f
