# SPDX-License-Identifier: Apache-2.0
"""Label and field selectors with the grammar, matching rules and error texts of
k8s.io/apimachinery (labels/selector.go, fields/selector.go).

Label selectors: `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k>N`, `k<N`,
joined by commas.  `!=` and `notin` also match objects that lack the key, as upstream.
Field selectors: `path=v`, `path==v`, `path!=v` joined by commas (`\\,` `\\=` `\\\\` escape).
Parse errors raise SelectorError with upstream's message; the server turns them into 400
BadRequest.
"""

import re
import unicodedata

_LABEL_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_NAME_PART_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN_RE = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_INT_RE = re.compile(r"[+-]?[0-9]+")

# util/validation/validation.go: qualifiedNameErrMsg, RegexError's forms
_QNAME = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
          "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
          "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
_SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
              "'-' or '.', and must start and end with an alphanumeric character (e.g. "
              "'example.com', regex used for validation is "
              "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_LABEL_VALUE = ("a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


class SelectorError(ValueError):
    """A selector string that does not parse (HTTP 400 on the real server)."""


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
               "\v": "\\v", '"': '\\"', "\\": "\\\\"}


# The code points Unicode 15.0 assigned (DerivedAge.txt, "; 15.0": 4,489 of them) that are
# letters, marks, numbers, punctuation or symbols: all but the Egyptian format controls
# U+13439..1343F (Cf). kube-apiserver 1.31 is built with Go 1.22, whose unicode and strconv
# tables are Unicode 15.0.0; a Python with older tables (3.11: 14.0.0) has them unassigned.
_UNICODE_15_0_PRINT = (
    (0x0CF3, 0x0CF3), (0x0ECE, 0x0ECE), (0x10EFD, 0x10EFF), (0x1123F, 0x11241),
    (0x11B00, 0x11B09), (0x11F00, 0x11F10), (0x11F12, 0x11F3A), (0x11F3E, 0x11F59),
    (0x1342F, 0x1342F), (0x13440, 0x13455), (0x1B132, 0x1B132), (0x1B155, 0x1B155),
    (0x1D2C0, 0x1D2D3), (0x1DF25, 0x1DF2A), (0x1E030, 0x1E06D), (0x1E08F, 0x1E08F),
    (0x1E4D0, 0x1E4F9), (0x1F6DC, 0x1F6DC), (0x1F774, 0x1F776), (0x1F77B, 0x1F77F),
    (0x1F7D9, 0x1F7D9), (0x1FA75, 0x1FA77), (0x1FA87, 0x1FA88), (0x1FAAD, 0x1FAAF),
    (0x1FABB, 0x1FABD), (0x1FABF, 0x1FABF), (0x1FACE, 0x1FACF), (0x1FADA, 0x1FADB),
    (0x1FAE8, 0x1FAE8), (0x1FAF7, 0x1FAF8), (0x2B739, 0x2B739), (0x31350, 0x323AF))
# What Unicode 15.1 assigned (all printable: CJK Ext I, ideographic description characters),
# for a Python with newer tables. (16.0 and later are not listed: the fake runs on 3.11/3.12.)
_UNICODE_15_1 = ((0x2FFC, 0x2FFF), (0x31EF, 0x31EF), (0x2EBF0, 0x2EE5D))
_UNIDATA = tuple(int(x) for x in unicodedata.unidata_version.split("."))


def _in(ranges, c):
    return any(lo <= c <= hi for lo, hi in ranges)


def go_is_print(ch):
    """Go 1.22's unicode.IsPrint (and strconv.IsPrint) of one rune: a letter, mark, number,
    punctuation, symbol or U+0020 in Unicode 15.0.0 (Python's isprintable() is the same
    rule on its own Unicode version's tables)."""
    c = ord(ch)
    if _UNIDATA < (15, 0) and _in(_UNICODE_15_0_PRINT, c):
        return True
    if _UNIDATA > (15, 0) and _in(_UNICODE_15_1, c):
        return False
    return ch.isprintable()


def go_quote(s):
    """strconv.Quote (Go's %q of a string): printable runes kept, the rest escaped."""
    out = []
    for ch in s:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif go_is_print(ch):
            out.append(ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7f:
            out.append("\\x%02x" % ord(ch))
        elif ord(ch) < 0x10000:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append("\\U%08x" % ord(ch))
    return '"' + "".join(out) + '"'


def go_parse_int(s):
    """strconv.ParseInt(s, 10, 64), as the query parameter conversion calls it
    (runtime.Convert_Slice_string_To_int64): the int, or ValueError with Go's message."""
    if not _INT_RE.fullmatch(s):
        raise ValueError("strconv.ParseInt: parsing %s: invalid syntax" % go_quote(s))
    v = int(s)
    if not -(1 << 63) <= v < (1 << 63):
        raise ValueError("strconv.ParseInt: parsing %s: value out of range" % go_quote(s))
    return v


def qualified_name_errors(key):
    """validation.IsQualifiedName's messages for key (none when it is a valid label key).
    Lengths are Go's len(), in bytes."""
    parts = key.split("/")
    errs = []
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix.encode()) > 253:
                errs.append("prefix part must be no more than 253 characters")
            if not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
                errs.append("prefix part " + _SUBDOMAIN)
    else:
        return ["a qualified name " + _QNAME + " with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name.encode()) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _NAME_PART_RE.fullmatch(name):
        errs.append("name part " + _QNAME)
    return errs


def qualified_name_error(key):
    """The first of qualified_name_errors(key), or None."""
    errs = qualified_name_errors(key)
    return errs[0] if errs else None


def label_value_errors(value):
    """validation.IsValidLabelValue's messages for value."""
    errs = []
    if len(value.encode()) > 63:
        errs.append("must be no more than 63 characters")
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(_LABEL_VALUE)
    return errs


def label_value_error(value):
    """The first of label_value_errors(value), or None."""
    errs = label_value_errors(value)
    return errs[0] if errs else None


def aggregate(msgs):
    """field.ErrorList.ToAggregate().Error(): one message alone, several in brackets, a
    message already given not repeated."""
    out = []
    for m in msgs:
        if m not in out:
            out.append(m)
    return out[0] if len(out) == 1 else "[" + ", ".join(out) + "]"


# ---------------------------------------------------------------- label selectors

class Requirement:
    """One label requirement: key, operator, values (sorted, as upstream)."""

    def __init__(self, key, op, values=()):
        """labels.NewRequirement: every rule checked, the errors aggregated (their paths are
        those of a Requirement with no path: key, values[i], values[i][key])."""
        errs = []
        kerrs = qualified_name_errors(key)
        if kerrs:
            errs.append("key: Invalid value: %s: %s" % (go_quote(key), "; ".join(kerrs)))
        values = list(values)
        if op in ("in", "notin") and not values:
            errs.append("values: Invalid value: []string{}: for 'in', 'notin' operators, "
                        "values set can't be empty")
        if op in ("=", "==", "!=") and len(values) != 1:
            errs.append("values: Invalid value: []string{}: exact-match compatibility "
                        "requires one single value")
        if op in (">", "<"):
            for i, v in enumerate(values):
                try:
                    go_parse_int(v)
                except ValueError:
                    errs.append("values[%d]: Invalid value: %s: for 'Gt', 'Lt' operators, the "
                                "value must be an integer" % (i, go_quote(v)))
        for i, v in enumerate(values):
            verrs = label_value_errors(v)
            if verrs:
                errs.append("values[%d][%s]: Invalid value: %s: %s"
                            % (i, key, go_quote(v), "; ".join(verrs)))
        if errs:
            raise SelectorError(aggregate(errs))
        self.key = key
        self.op = op
        self.values = sorted(set(values))

    def matches(self, labels):
        has = self.key in labels
        val = labels.get(self.key)
        if self.op in ("=", "==", "in"):
            return has and val in self.values
        if self.op in ("!=", "notin"):
            return not has or val not in self.values
        if self.op == "exists":
            return has
        if self.op == "!":
            return not has
        if self.op in (">", "<"):
            if not has:
                return False
            try:
                lv = go_parse_int(val)
            except (ValueError, TypeError):
                return False
            rv = go_parse_int(self.values[0])
            return lv > rv if self.op == ">" else lv < rv
        return False

    def __str__(self):
        if self.op == "exists":
            return self.key
        if self.op == "!":
            return "!" + self.key
        if self.op in ("in", "notin"):
            return "%s %s (%s)" % (self.key, self.op, ",".join(self.values))
        return "%s%s%s" % (self.key, self.op, self.values[0])


# labels.Lexer: whitespace, the symbols that make operators, and the tokens (string2token)
_WHITESPACE = " \t\r\n"
_SPECIAL = "=!(),><"
_TOKENS = (")", ",", "!", "==", "=", ">", "in", "<", "!=", "notin", "(")


def _lex(s):
    """labels.Lexer over s: (token, literal) pairs ending with ("EOS", ""). The token of an
    operator or keyword is its literal, an identifier's "ID". As Go reads bytes, a NUL ends
    the string."""
    toks, i, n = [], 0, len(s)
    while True:
        while i < n and s[i] in _WHITESPACE:
            i += 1
        if i >= n or s[i] == "\0":
            toks.append(("EOS", ""))
            return toks
        if s[i] in _SPECIAL:
            # scanSpecialSymbol: the longest run of symbols that is still a token
            j, lit = i, ""
            while j < n and s[j] in _SPECIAL:
                if s[i:j + 1] in _TOKENS:
                    lit = s[i:j + 1]
                elif lit:
                    break
                j += 1
            toks.append((lit, lit))
            i += len(lit)
            continue
        j = i
        while j < n and s[j] not in _SPECIAL and s[j] not in _WHITESPACE and s[j] != "\0":
            j += 1
        word = s[i:j]
        toks.append((word if word in _TOKENS else "ID", word))
        i = j


class _Parser:
    """labels.Parser: a recursive descent over the lexer's tokens, with upstream's errors. In
    the Values context the keywords in and notin are identifiers."""

    def __init__(self, text):
        self.toks = _lex(text)
        self.pos = 0

    def lookahead(self, values=True):
        tok, lit = self.toks[self.pos]
        if values and tok in ("in", "notin"):
            tok = "ID"
        return tok, lit

    def consume(self, values=True):
        r = self.lookahead(values)
        self.pos = min(self.pos + 1, len(self.toks) - 1)
        return r

    def parse(self):
        reqs = []
        while True:
            tok, lit = self.lookahead()
            if tok == "EOS":
                return reqs
            if tok not in ("ID", "!"):
                raise SelectorError("found '%s', expected: !, identifier, or 'end of string'"
                                    % lit)
            try:
                reqs.append(self.requirement())
            except SelectorError as e:
                raise SelectorError("unable to parse requirement: %s" % e)
            tok, lit = self.consume()
            if tok == "EOS":
                return reqs
            if tok != ",":
                raise SelectorError("found '%s', expected: ',' or 'end of string'" % lit)
            tok, lit = self.lookahead()
            if tok not in ("ID", "!"):
                raise SelectorError("found '%s', expected: identifier after ','" % lit)

    def requirement(self):
        """parseRequirement: the key (validated at once, with no field path: "<nil>"), then
        the operator and its values."""
        op = None
        tok, key = self.consume()
        if tok == "!":
            op = "!"
            tok, key = self.consume()
        if tok != "ID":
            raise SelectorError("found '%s', expected: identifier" % key)
        errs = qualified_name_errors(key)
        if errs:
            raise SelectorError("<nil>: Invalid value: %s: %s" % (go_quote(key), "; ".join(errs)))
        if self.lookahead()[0] in ("EOS", ","):
            op = op or "exists"
        if op in ("exists", "!"):
            return Requirement(key, op)
        op = self.operator()
        values = self.values() if op in ("in", "notin") else self.exact_value()
        return Requirement(key, op, sorted(values))

    def operator(self):
        tok, lit = self.consume(values=False)
        if tok not in ("in", "notin", "=", "==", "!=", ">", "<"):
            raise SelectorError("found '%s', expected: in, notin, =, ==, !=, gt, lt" % lit)
        return tok

    def values(self):
        tok, lit = self.consume()
        if tok != "(":
            raise SelectorError("found '%s' expected: '('" % lit)
        tok, lit = self.lookahead()
        if tok in ("ID", ","):
            s = self.identifiers()
            if self.consume()[0] != ")":
                raise SelectorError("found '%s', expected: ')'" % lit)
            return s
        if tok == ")":
            self.consume()
            return {""}
        raise SelectorError("found '%s', expected: ',', ')' or identifier" % lit)

    def identifiers(self):
        """parseIdentifiersList: comma-separated, possibly empty, identifiers."""
        s = set()
        while True:
            tok, lit = self.consume()
            if tok == "ID":
                s.add(lit)
                tok, lit = self.lookahead()
                if tok == ")":
                    return s
                if tok != ",":
                    raise SelectorError("found '%s', expected: ',' or ')'" % lit)
            elif tok == ",":
                if not s:
                    s.add("")
                tok, _ = self.lookahead()
                if tok == ")":
                    s.add("")
                    return s
                if tok == ",":
                    s.add("")
            else:
                raise SelectorError("found '%s', expected: ',', or identifier" % lit)

    def exact_value(self):
        if self.lookahead()[0] in ("EOS", ","):
            return {""}
        tok, lit = self.consume()
        if tok != "ID":
            raise SelectorError("found '%s', expected: identifier" % lit)
        return {lit}


class LabelSelector:
    """A parsed label selector; an empty one matches everything."""

    def __init__(self, requirements=()):
        self.requirements = sorted(requirements, key=lambda r: r.key)

    @classmethod
    def parse(cls, text):
        """labels.Parse, with its errors."""
        return cls(_Parser(text or "").parse())

    @classmethod
    def from_label_selector(cls, sel):
        """Convert a metav1.LabelSelector dict; raise SelectorError if invalid."""
        if sel is None:
            return None
        reqs = []
        for k, v in sorted((sel.get("matchLabels") or {}).items()):
            reqs.append(Requirement(k, "=", [str(v)]))
        for e in sel.get("matchExpressions") or []:
            op = e.get("operator")
            vals = [str(x) for x in (e.get("values") or [])]
            m = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
            if op not in m:
                raise SelectorError("%s is not a valid label selector operator" % go_quote(str(op)))
            if op in ("Exists", "DoesNotExist") and vals:
                raise SelectorError("values: Invalid value: must be empty for Exists/DoesNotExist")
            reqs.append(Requirement(e.get("key", ""), m[op], vals))
        return cls(reqs)

    def empty(self):
        return not self.requirements

    def matches(self, labels):
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self):
        return ",".join(str(r) for r in self.requirements)


# ---------------------------------------------------------------- field selectors

def _split_terms(text):
    """fields.splitTerms: the comma-separated terms, an escaped comma kept with its backslash."""
    if not text:
        return []
    terms, start, slash = [], 0, False
    for i, c in enumerate(text):
        if slash:
            slash = False
        elif c == "\\":
            slash = True
        elif c == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term):
    """fields.splitTerm: at the first operator (!=, ==, then = at each position); the left
    side is taken as it is, spaces and all."""
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
    return None


def _unescape(value):
    """fields.UnescapeValue, with its errors (an unescaped rune is printed as Go's %v of a
    rune: its number)."""
    if not any(c in value for c in "\\,="):
        return value
    out, slash = [], False
    for c in value:
        if slash:
            if c not in "\\,=":
                raise SelectorError("invalid field selector: invalid escape sequence: \\" + c)
            out.append(c)
            slash = False
        elif c == "\\":
            slash = True
        elif c in ",=":
            raise SelectorError("invalid field selector: unescaped character in value: %d"
                                % ord(c))
        else:
            out.append(c)
    if slash:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


class FieldSelector:
    """A parsed field selector: a list of (path, op, value) with op '=' or '!=', in the sorted
    order of its terms, as fields.ParseSelector keeps them."""

    def __init__(self, terms=()):
        self.terms = list(terms)

    @classmethod
    def parse(cls, text):
        """fields.ParseSelector: the terms sorted, each split at its operator and its value
        unescaped; the first failure in that order is the error. A term with neither a field
        nor a value selects everything (Transform drops it)."""
        terms = []
        for part in sorted(_split_terms(text or "")):
            if not part:
                continue
            split = _split_term(part)
            if split is None:
                raise SelectorError("invalid selector: '%s'; can't understand '%s'" % (text, part))
            lhs, op, rhs = split
            value = _unescape(rhs)
            if lhs or value:
                terms.append((lhs, "!=" if op == "!=" else "=", value))
        return cls(terms)

    def keys(self):
        return [t[0] for t in self.terms]

    def matches(self, fields):
        for key, op, val in self.terms:
            have = fields.get(key, "")
            if op == "=" and have != val:
                return False
            if op == "!=" and have == val:
                return False
        return True

    def __str__(self):
        return ",".join("%s%s%s" % t for t in self.terms)
