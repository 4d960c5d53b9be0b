# SPDX-License-Identifier: Apache-2.0
"""Go's time.Parse for the two layouts the API's times use, and their JSON forms.

metav1.Time decodes a JSON string with time.Parse(time.RFC3339, s) and encodes UTC at whole
seconds; metav1.MicroTime parses RFC3339Micro (exactly six fractional digits) and encodes UTC
with six. parse() accepts what Go's general parser accepts for those layouts (a one-digit hour,
any fraction after the seconds of RFC3339, a zone of Z or +hh:mm) and fails with Go's
ParseError text: `parsing time "x" as "2006-01-02T15:04:05Z07:00": cannot parse "x" as
"2006"`, or for a value out of range `parsing time "2026-02-30T00:00:00Z": day out of range`.
An instant is (seconds since 1970-01-01 UTC, nanoseconds), so years 0 and 9999 with any offset
fit."""

RFC3339 = "2006-01-02T15:04:05Z07:00"
RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"

# a layout as Go's nextStdChunk splits it: (literal prefix, element) pairs
_CHUNKS = {
    RFC3339: [("", "2006"), ("-", "01"), ("-", "02"), ("T", "15"), (":", "04"), (":", "05"),
              ("", "Z07:00")],
    RFC3339_MICRO: [("", "2006"), ("-", "01"), ("-", "02"), ("T", "15"), (":", "04"),
                    (":", "05"), ("", ".000000"), ("", "Z07:00")],
}
_ZERO_UNIX = -62135596800       # Go's zero Time, 0001-01-01T00:00:00Z


class _Bad(Exception):
    pass


def quote(s):
    """Go time's quote(): ASCII printable kept ('"' and '\\' escaped), other bytes as \\xNN."""
    out = ['"']
    for c in s:
        if c < " " or ord(c) >= 0x80:
            out.extend("\\x%02x" % b for b in c.encode("utf-8", "surrogatepass"))
        else:
            out.append("\\" + c if c in '"\\' else c)
    out.append('"')
    return "".join(out)


def _digit(s, i):
    return i < len(s) and "0" <= s[i] <= "9"


def _getnum(s, fixed):
    if not _digit(s, 0):
        raise _Bad
    if not _digit(s, 1):
        if fixed:
            raise _Bad
        return int(s[0]), s[1:]
    return int(s[:2]), s[2:]


def _atoi(s):
    """Go's time.atoi: an optional sign, then only digits."""
    neg = s[:1] in ("-", "+")
    body = s[1:] if neg else s
    if not body or not all("0" <= c <= "9" for c in body):
        raise _Bad
    n = int(body)
    return -n if s[:1] == "-" else n


def _nanos(value, nbytes):
    """(nanoseconds, out-of-range) of a fraction of nbytes bytes, its '.' or ',' first."""
    if value[0] not in ".,":
        raise _Bad
    nbytes = min(nbytes, 10)
    ns = _atoi(value[1:nbytes])
    if ns < 0:
        return 0, "fractional second"
    return ns * 10 ** (10 - nbytes), ""


def _days_in(month, year):
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _days_from_civil(y, m, d):
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def _civil_from_days(z):
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (m <= 2), m, d


def parse(layout, value):
    """((unix seconds, nanoseconds), None) for value parsed with layout (RFC3339 or
    RFC3339_MICRO), or (None, Go's error text)."""
    def fail(layout_elem, value_elem):
        return None, "parsing time %s as %s: cannot parse %s as %s" % (
            quote(value), quote(layout), quote(value_elem), quote(layout_elem))

    def out_of_range(what):
        return None, "parsing time %s: %s out of range" % (quote(value), what)

    chunks = _CHUNKS[layout]
    rest = value
    year = month = day = hour = minute = sec = ns = offset = 0
    for i, (prefix, std) in enumerate(chunks):
        if not rest.startswith(prefix):
            return fail(prefix, rest)   # the prefixes are one byte: skip() stops at it
        rest = rest[len(prefix):]
        hold, rng = rest, ""
        try:
            if std == "2006":
                if len(rest) < 4 or not _digit(rest, 0):
                    raise _Bad
                year, rest = _atoi(rest[:4]), rest[4:]
            elif std == "01":
                month, rest = _getnum(rest, True)
                rng = "month" if not 1 <= month <= 12 else ""
            elif std == "02":
                day, rest = _getnum(rest, True)
            elif std == "15":
                hour, rest = _getnum(rest, False)
                rng = "hour" if hour >= 24 else ""
            elif std == "04":
                minute, rest = _getnum(rest, True)
                rng = "minute" if minute >= 60 else ""
            elif std == "05":
                sec, rest = _getnum(rest, True)
                if sec >= 60:
                    rng = "second"
                elif len(rest) >= 2 and rest[0] in ".," and _digit(rest, 1) and \
                        chunks[i + 1][1] != ".000000":
                    # a fraction the layout does not have: any number of digits
                    n = 2
                    while _digit(rest, n):
                        n += 1
                    ns, rng = _nanos(rest, n)
                    rest = rest[n:]
            elif std == ".000000":
                if len(rest) < 7:
                    raise _Bad
                ns, rng = _nanos(rest, 7)
                rest = rest[7:]
            else:   # Z07:00
                if rest[:1] == "Z":
                    rest, offset = rest[1:], 0
                else:
                    if len(rest) < 6 or rest[3] != ":":
                        raise _Bad
                    sign, hh, mm, rest = rest[0], rest[1:3], rest[4:6], rest[6:]
                    # as Go: both numbers read before any error, a range error first
                    hr = mi = 0
                    bad = not (_digit(hh, 0) and _digit(hh, 1))
                    if not bad:
                        hr = int(hh)
                        bad = not (_digit(mm, 0) and _digit(mm, 1))
                        mi = 0 if bad else int(mm)
                    if hr > 24:
                        rng = "time zone offset hour"
                    if mi > 60:
                        rng = "time zone offset minute"
                    if not rng and (bad or sign not in "+-"):
                        raise _Bad
                    offset = (hr * 60 + mi) * 60 * (-1 if sign == "-" else 1)
        except _Bad:
            return fail(std, hold)
        if rng:
            return out_of_range(rng)
    if rest:
        return None, "parsing time %s: extra text: %s" % (quote(value), quote(rest))
    if not 1 <= day <= _days_in(month, year):
        return out_of_range("day")
    days = _days_from_civil(year, month, day)
    return (days * 86400 + hour * 3600 + minute * 60 + sec - offset, ns), None


def is_zero(instant):
    """Whether an instant is Go's zero Time (which metav1 encodes as null)."""
    return instant == (_ZERO_UNIX, 0)


def format_utc(instant, micro=False):
    """An instant as metav1.Time (micro: MicroTime) encodes it: UTC, whole seconds (or six
    fractional digits, truncated), years of four digits ("-0001" before year 0)."""
    secs, ns = instant
    days, s = divmod(secs, 86400)
    y, m, d = _civil_from_days(days)
    year = "-%04d" % -y if y < 0 else "%04d" % y
    frac = ".%06d" % (ns // 1000) if micro else ""
    return "%s-%02d-%02dT%02d:%02d:%02d%sZ" % (year, m, d, s // 3600, s // 60 % 60, s % 60, frac)
