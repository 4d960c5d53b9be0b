# SPDX-License-Identifier: Apache-2.0
"""Label and field selectors with the grammar and matching rules of k8s.io/apimachinery.

Label selectors: `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k>N`, `k<N`,
joined by commas.  `!=` and `notin` also match objects that lack the key, as upstream.
Field selectors: `path=v`, `path==v`, `path!=v` joined by commas (`\\,` escapes a comma).
Parse errors raise SelectorError; the server turns them into 400 BadRequest.
"""

import re

_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NAME_PART_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class SelectorError(ValueError):
    """A selector string that does not parse (HTTP 400 on the real server)."""


def qualified_name_error(key):
    """Return None if key is a valid label key (qualified name), else a message."""
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return "prefix part must be non-empty"
        if len(prefix) > 253 or not _DNS1123_SUBDOMAIN_RE.match(prefix):
            return "prefix part a lowercase RFC 1123 subdomain must consist of lower case " \
                   "alphanumeric characters, '-' or '.', and must start and end with an " \
                   "alphanumeric character"
    else:
        return ("a qualified name must consist of alphanumeric characters, '-', '_' or '.', and "
                "must start and end with an alphanumeric character (e.g. 'MyName',  or "
                "'my.name',  or '123-abc', regex used for validation is "
                "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain "
                "prefix and '/' (e.g. 'example.com/MyName')")
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _NAME_PART_RE.match(name):
        return ("name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
                "or '123-abc', regex used for validation is "
                "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
    return None


def label_value_error(value):
    """Return None if value is a valid label value, else a message."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _LABEL_VALUE_RE.match(value):
        return ("a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
    return None


# ---------------------------------------------------------------- label selectors

_SPECIAL = "!=(),<>"


def _lex(s):
    toks = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c.isspace():
            i += 1
            continue
        if c in _SPECIAL:
            two = s[i:i + 2]
            if two in ("!=", "=="):
                toks.append(two)
                i += 2
            else:
                toks.append(c)
                i += 1
            continue
        j = i
        while j < n and not s[j].isspace() and s[j] not in _SPECIAL:
            j += 1
        word = s[i:j]
        toks.append(("KW", word) if word in ("in", "notin") else ("ID", word))
        i = j
    return toks


def _tokstr(t):
    return t[1] if isinstance(t, tuple) else t


class Requirement:
    """One label requirement: key, operator, values (sorted, as upstream)."""

    def __init__(self, key, op, values=()):
        err = qualified_name_error(key)
        if err:
            raise SelectorError("unable to parse requirement: key: Invalid value: %s: %s"
                                % (_q(key), err))
        self.key = key
        self.op = op
        if op in ("in", "notin") and not values:
            raise SelectorError("unable to parse requirement: values: Invalid value: null: "
                                "for 'in', 'notin' operators, values set can't be empty")
        if op in ("=", "==", "!=") and len(values) != 1:
            raise SelectorError("unable to parse requirement: exact-match compatibility "
                                "requires one single value")
        if op in (">", "<"):
            try:
                int(values[0])
            except (ValueError, IndexError):
                raise SelectorError("unable to parse requirement: for 'Gt', 'Lt' operators, "
                                    "the value must be an integer")
        else:
            for v in values:
                verr = label_value_error(v)
                if verr:
                    raise SelectorError("unable to parse requirement: values[0][%s]: Invalid "
                                        "value: %s: %s" % (key, _q(v), verr))
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
                lv = int(val)
            except ValueError:
                return False
            rv = int(self.values[0])
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


def _q(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


class LabelSelector:
    """A parsed label selector; an empty one matches everything."""

    def __init__(self, requirements=()):
        self.requirements = sorted(requirements, key=lambda r: r.key)

    @classmethod
    def parse(cls, text):
        text = text or ""
        toks = _lex(text)
        reqs = []
        i = 0

        def expect_id(pos):
            if pos >= len(toks) or not isinstance(toks[pos], tuple):
                raise SelectorError("found '%s', expected: identifier"
                                    % (_tokstr(toks[pos]) if pos < len(toks) else "EOS"))
            return toks[pos][1]

        while i < len(toks):
            t = toks[i]
            if t == "!":
                key = expect_id(i + 1)
                reqs.append(Requirement(key, "!"))
                i += 2
            elif isinstance(t, tuple) and t[0] == "ID":
                key = t[1]
                i += 1
                if i >= len(toks) or toks[i] == ",":
                    reqs.append(Requirement(key, "exists"))
                else:
                    op = toks[i]
                    if op in ("=", "==", "!=", ">", "<"):
                        if i + 1 < len(toks) and isinstance(toks[i + 1], tuple):
                            val = toks[i + 1][1]
                            i += 2
                        else:
                            val = ""
                            i += 1
                        reqs.append(Requirement(key, "=" if op == "==" else op, [val]))
                    elif isinstance(op, tuple) and op[0] == "KW":
                        i += 1
                        if i >= len(toks) or toks[i] != "(":
                            raise SelectorError("found '%s', expected: '('" % (
                                _tokstr(toks[i]) if i < len(toks) else "EOS"))
                        i += 1
                        vals = []
                        expect_value = True
                        while True:
                            if i >= len(toks):
                                raise SelectorError("found 'EOS', expected: ')'")
                            tk = toks[i]
                            if tk == ")":
                                if expect_value and vals:
                                    vals.append("")
                                i += 1
                                break
                            if tk == ",":
                                if expect_value:
                                    vals.append("")
                                expect_value = True
                                i += 1
                                continue
                            if isinstance(tk, tuple):
                                vals.append(tk[1])
                                expect_value = False
                                i += 1
                                continue
                            raise SelectorError("found '%s', expected: ',', ')' or identifier" % tk)
                        reqs.append(Requirement(key, op[1], vals))
                    else:
                        raise SelectorError("found '%s', expected: in, notin, =, ==, !=, gt, lt"
                                            % (op if isinstance(op, str) else op[1]))
            else:
                raise SelectorError("found '%s', expected: !, identifier, or 'end of string'"
                                    % (t if isinstance(t, str) else t[1]))
            if i < len(toks):
                if toks[i] != ",":
                    tk = toks[i]
                    raise SelectorError("found '%s', expected: ',' or 'end of string'"
                                        % (tk if isinstance(tk, str) else tk[1]))
                i += 1
                if i >= len(toks):
                    raise SelectorError("found 'EOS', expected: identifier after ','")
        return cls(reqs)

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
                raise SelectorError("%s is not a valid label selector operator" % _q(str(op)))
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

class FieldSelector:
    """A parsed field selector: list of (path, op, value) with op '=' or '!='."""

    def __init__(self, terms=()):
        self.terms = list(terms)

    @classmethod
    def parse(cls, text):
        terms = []
        if not text:
            return cls(terms)
        parts, cur, i = [], "", 0
        while i < len(text):
            c = text[i]
            if c == "\\" and i + 1 < len(text):
                cur += c + text[i + 1]
                i += 2
                continue
            if c == ",":
                parts.append(cur)
                cur = ""
            else:
                cur += c
            i += 1
        parts.append(cur)
        for p in parts:
            if not p:
                continue
            m = re.match(r"^([^=!]+)(==|!=|=)(.*)$", p)
            if not m:
                raise SelectorError("invalid selector: '%s'; can't understand '%s'" % (text, p))
            key = m.group(1).strip()
            op = "!=" if m.group(2) == "!=" else "="
            val = re.sub(r"\\(.)", r"\1", m.group(3))
            terms.append((key, op, val))
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
