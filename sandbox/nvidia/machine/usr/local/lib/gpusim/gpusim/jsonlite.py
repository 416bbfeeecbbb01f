"""A small JSON reader/writer, because python3-minimal has no `json` module.

Covers what our files hold: objects, arrays, strings (with escapes), numbers, true,
false, null. `loads` raises ValueError with the line and column of the problem.
"""

_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_WS = " \t\r\n"


class _Reader:
    def __init__(self, text):
        self.text = text
        self.pos = 0

    def fail(self, what):
        line = self.text.count("\n", 0, self.pos) + 1
        col = self.pos - (self.text.rfind("\n", 0, self.pos) + 1) + 1
        raise ValueError(f"invalid JSON at line {line} column {col}: {what}")

    def skip(self):
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos] in _WS:
            pos += 1
        self.pos = pos

    def value(self):
        self.skip()
        if self.pos >= len(self.text):
            self.fail("unexpected end of text")
        ch = self.text[self.pos]
        if ch == "{":
            return self.obj()
        if ch == "[":
            return self.arr()
        if ch == '"':
            return self.string()
        for word, val in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return val
        return self.number()

    def obj(self):
        self.pos += 1
        out = {}
        self.skip()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return out
        while True:
            self.skip()
            if not self.text.startswith('"', self.pos):
                self.fail("expected a string key")
            key = self.string()
            self.skip()
            if not self.text.startswith(":", self.pos):
                self.fail("expected ':'")
            self.pos += 1
            out[key] = self.value()
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif self.text.startswith("}", self.pos):
                self.pos += 1
                return out
            else:
                self.fail("expected ',' or '}'")

    def arr(self):
        self.pos += 1
        out = []
        self.skip()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return out
        while True:
            out.append(self.value())
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif self.text.startswith("]", self.pos):
                self.pos += 1
                return out
            else:
                self.fail("expected ',' or ']'")

    def string(self):
        self.pos += 1
        parts = []
        text = self.text
        while True:
            if self.pos >= len(text):
                self.fail("unterminated string")
            ch = text[self.pos]
            if ch == '"':
                self.pos += 1
                return "".join(parts)
            if ch == "\\":
                esc = text[self.pos + 1:self.pos + 2]
                if esc in _ESCAPES:
                    parts.append(_ESCAPES[esc])
                    self.pos += 2
                elif esc == "u":
                    digits = text[self.pos + 2:self.pos + 6]
                    try:
                        parts.append(chr(int(digits, 16)))
                    except ValueError:
                        self.fail("bad \\u escape")
                    self.pos += 6
                else:
                    self.fail("bad escape")
            elif ch < " ":
                self.fail("control character in string")
            else:
                parts.append(ch)
                self.pos += 1

    def number(self):
        start = self.pos
        text = self.text
        while self.pos < len(text) and text[self.pos] in "+-0123456789.eE":
            self.pos += 1
        token = text[start:self.pos]
        if not token:
            self.fail(f"unexpected character {text[start]!r}")
        try:
            if any(c in token for c in ".eE"):
                return float(token)
            return int(token)
        except ValueError:
            self.pos = start
            self.fail(f"bad number {token!r}")


def loads(text):
    reader = _Reader(text)
    value = reader.value()
    reader.skip()
    if reader.pos != len(text):
        reader.fail("extra data after the value")
    return value


def _quote(s):
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def dumps(value, indent=2, _level=0):
    """Serialise like json.dumps(value, indent=2) (keys in insertion order)."""
    pad = " " * (indent * (_level + 1))
    end = " " * (indent * _level)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{pad}{_quote(str(k))}: {dumps(v, indent, _level + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + end + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        items = [pad + dumps(v, indent, _level + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + end + "]"
    raise TypeError(f"cannot serialise {type(value).__name__} to JSON")
