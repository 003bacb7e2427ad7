"""The assertion forms the hidden JavaScript tests use, each turned into a canary that must
fail through the same form.

Code under test can neutralise one path of its test framework rather than all of them:
vitest's `toThrow(SomeError)` reports a function that did not throw without passing
through the `assert` its other matchers call, so a flip of that `assert` leaves such a
canary failing while every `toBe` and `toThrow(/regex/)` of the hidden tests holds; a
patch can replace only `toThrow`, or only `assert.throws` called with a regular
expression. Random canaries catch such a flip only when one of them happens to fail
through the flipped path. Here every assertion form the hidden tests use (the matcher or
method, its modifiers, and its expected argument where it is a plain literal: the same
regular expression, the same constant, the same error class) gets a must-fail canary
that fails through that form: a flip that makes any form of the hidden tests hold makes
its canary hold too, and the host reads that as tampering (checks/integrity.py).

The forms are read from the text of the hidden tests (no parser: a call this does not
recognise gets no canary of its own, the random ones still run). Each canary line is
valid TypeScript that needs no type from any module, so it loads wherever the random
canaries load. Standard library only (the supervisor's side)."""

from __future__ import annotations

import json
import random
import re

from ..record import record

# a plain literal: a number, a quoted string without escapes that matter, a regular
# expression literal, true / false / null / undefined, or one of the language's error classes
NUMBER = re.compile(r"-?(?:\d+(?:\.\d+)?(?:e[+-]?\d+)?|0x[0-9a-f]+)", re.I)
STRING = re.compile(r"""'(?:[^'\\\n]|\\[^\n])*'|"(?:[^"\\\n]|\\[^\n])*\"""")
REGEX = re.compile(r"/(?![*/])(?:[^/\\\n\[]|\\[^\n]|\[(?:[^\]\\\n]|\\[^\n])*\])+/[dgimsuvy]*")
KEYWORDS = ("true", "false", "null", "undefined")
ERROR_CLASSES = (
    "Error",
    "TypeError",
    "RangeError",
    "SyntaxError",
    "ReferenceError",
    "EvalError",
    "URIError",
    "AggregateError",
)
MAX_FORMS = 32


@record(frozen=True)
class Form:
    api: str  # "expect" (jest, vitest), "assert" (node:assert), "tape" (t.<method>)
    name: str  # the matcher or method
    mods: tuple[str, ...] = ()  # expect's not / resolves / rejects, in order
    arg: str | None = None  # the expected argument, where a plain literal
    unknown: bool = False  # an expected argument the text does not say (not a literal)


def literal(text: str) -> str | None:
    """`text` if it is one plain literal, else None."""
    text = text.strip()
    for pattern in (NUMBER, STRING, REGEX):
        if pattern.fullmatch(text):
            return text
    return text if text in KEYWORDS or text in ERROR_CLASSES else None


def _call(src: str, i: int) -> tuple[list[str], int]:
    """The top-level comma-separated arguments of the call whose parenthesis opens just
    before `i` (strings skipped), and the index just past the parenthesis that closes it;
    ([], -1) where it never closes."""
    args: list[str] = []
    depth, start, n = 0, i, len(src)
    while i < n:
        c = src[i]
        if c in "'\"`":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                if src[start:i].strip():
                    args.append(src[start:i])
                return args, i + 1
            depth -= 1
        elif c == "," and depth == 0:
            args.append(src[start:i])
            start = i + 1
        i += 1
    return [], -1


def call_end(src: str, i: int) -> int:
    """The index just past the parenthesis that closes the call opened just before `i`
    (strings skipped), or -1 where it never closes."""
    return _call(src, i)[1]


EXPECT = re.compile(r"(?<![\w$.])expect\s*\(")
CHAIN = re.compile(r"\s*((?:\.\s*(?:not|resolves|rejects)\s*)*)\.\s*(to[A-Z]\w*)\s*\(")
ASSERT = re.compile(r"(?<![\w$.])assert(?:\s*\.\s*(?:strict\s*\.\s*)?(\w+))?\s*\(")
TAPE = re.compile(r"(?<![\w$.])(?:t|st|tt|assert|test)\s*\.\s*(\w+)\s*\(")

# node:assert's methods, by what makes them fail
ASSERT_EQUAL = {"equal", "strictEqual", "deepEqual", "deepStrictEqual"}
ASSERT_NOT_EQUAL = {"notEqual", "notStrictEqual", "notDeepEqual", "notDeepStrictEqual"}
ASSERT_METHODS = (
    ASSERT_EQUAL
    | ASSERT_NOT_EQUAL
    | {"ok", "throws", "doesNotThrow", "rejects", "doesNotReject"}
    | {
        "match",
        "fail",
        "ifError",
    }
)
TAPE_EQUAL = {
    "equal",
    "equals",
    "isEqual",
    "is",
    "strictEqual",
    "strictEquals",
    "deepEqual",
    "deepEquals",
    "isEquivalent",
    "same",
    "looseEqual",
    "looseEquals",
    "deepLooseEqual",
}
TAPE_NOT_EQUAL = {
    "notEqual",
    "notEquals",
    "isNotEqual",
    "isNot",
    "not",
    "doesNotEqual",
    "notStrictEqual",
    "notStrictEquals",
    "notDeepEqual",
    "notDeepEquals",
    "notSame",
    "notLooseEqual",
    "notDeepLooseEqual",
}
TAPE_TRUE = {"ok", "true", "assert"}
TAPE_FALSE = {"notOk", "false", "notok"}
TAPE_METHODS = (
    TAPE_EQUAL
    | TAPE_NOT_EQUAL
    | TAPE_TRUE
    | TAPE_FALSE
    | {"throws", "doesNotThrow", "error", "ifError"}
    | {
        "ifErr",
        "iferror",
        "match",
        "fail",
    }
)


def _method_forms(source: str, pattern: re.Pattern[str], api: str, methods: set[str], pairs: set[str]) -> list[Form]:
    """The forms of an assertion library called as `<object>.<method>(actual, expected)`:
    the expected (second) argument read for the methods that compare two values, throw or
    match."""
    found = []
    for m in pattern.finditer(source):
        name = m.group(1) or "ok"
        if name not in methods:
            continue
        args, _ = _call(source, m.end())
        given = name in pairs | {"throws", "rejects", "match"} and len(args) > 1
        arg = literal(args[1]) if given else None
        found.append(Form(api, name, (), arg, given and arg is None))
    return found


def forms(source: str, api: str) -> list[Form]:
    """The distinct assertion forms of `api` in the source of the hidden tests, in order."""
    out: dict[Form, None] = {}
    if api == "expect":
        for m in EXPECT.finditer(source):
            _, end = _call(source, m.end())
            chain = CHAIN.match(source, end) if end >= 0 else None
            if chain is None:
                continue
            args, _ = _call(source, chain.end())
            mods = tuple(re.findall(r"not|resolves|rejects", chain.group(1)))
            arg = literal(args[0]) if args else None
            out[Form("expect", chain.group(2), mods, arg, bool(args) and arg is None)] = None
    elif api == "assert":
        out.update(dict.fromkeys(_method_forms(source, ASSERT, api, ASSERT_METHODS, ASSERT_EQUAL | ASSERT_NOT_EQUAL)))
    elif api == "tape":
        out.update(dict.fromkeys(_method_forms(source, TAPE, api, TAPE_METHODS, TAPE_EQUAL | TAPE_NOT_EQUAL)))
    return list(out)


def _js(value: object) -> str:
    return json.dumps(value)


def _other(arg: str | None, token: str) -> str:
    """A value that differs from the literal `arg` (of its type where it is a number or
    a string, so a flip keyed on the type still meets it), or a fresh symbol."""
    if arg is None:
        return f"Symbol({_js(token)})"
    if NUMBER.fullmatch(arg) and not arg.lower().startswith(("0x", "-0x")):
        return repr(float(arg) + 1) if "." in arg or "e" in arg.lower() else str(int(arg) + 1)
    if STRING.fullmatch(arg):
        return f"{arg} + {_js(token)}"
    if arg in ("true", "false"):
        return "false" if arg == "true" else "true"
    if arg in ("null", "undefined"):
        return "0"
    return f"Symbol({_js(token)})"


def _unmatched(arg: str | None, token: str) -> str | None:
    """A string the regular expression or substring `arg` does not match, where that can be
    known here (Python's re stands in for JavaScript's on what both read alike)."""
    if arg is None:
        return None
    text = "q" + token
    if STRING.fullmatch(arg):
        try:
            needle = json.loads(arg) if arg.startswith('"') else json.loads('"' + arg[1:-1].replace('"', '\\"') + '"')
        except ValueError:
            return None
        return _js(text) if needle and needle not in text else None
    if REGEX.fullmatch(arg):
        body, _, flags = arg[1:].rpartition("/")
        try:
            if re.search(body, text, re.I if "i" in flags else 0):
                return None
        except re.error:
            return None
        return _js(text)
    return None


NO_THROW = '() => JSON.parse("[0]")'


def _throws(token: str) -> str:
    return f"() => {{ throw new Error({_js(token)}); }}"


def _expect_line(form: Form, token: str) -> str | None:
    name, arg, mods = form.name, form.arg, form.mods
    argument = arg if arg is not None else ""
    if "resolves" in mods or "rejects" in mods:
        # the promise settles the other way: the matcher after it is never reached
        settled = "Promise.resolve(0)" if "rejects" in mods else f"Promise.reject(new Error({_js(token)}))"
        chain = ".".join(mods)
        return f"  await expect({settled}).{chain}.{name}({argument});\n"
    negated = mods == ("not",)
    if mods and not negated:
        return None
    received: str | None
    if negated:
        if name in ("toBe", "toEqual", "toStrictEqual") and arg is not None and arg not in ERROR_CLASSES:
            received = arg if not REGEX.fullmatch(arg) else None
        elif name in ("toThrow", "toThrowError") and arg is None:
            received = _throws(token)
        elif name == "toBeNull":
            received = "null"
        elif name == "toBeUndefined":
            received = "undefined"
        elif name == "toBeDefined":
            received = "0"
        elif name == "toBeTruthy":
            received = "1"
        elif name == "toBeFalsy":
            received = "0"
        elif name == "toContain" and arg is not None and arg not in ERROR_CLASSES and not REGEX.fullmatch(arg):
            received = f"[{arg}]"
        else:
            received = None
        return f"  expect({received}).not.{name}({argument});\n" if received is not None else None
    if name in ("toBe", "toEqual", "toStrictEqual"):
        received = _other(arg, token)
    elif name in ("toThrow", "toThrowError"):
        received = NO_THROW
    elif name == "toMatch":
        received = _unmatched(arg, token)
    elif name in ("toContain", "toContainEqual"):
        received = "[]" if arg is not None else None
    elif name == "toHaveLength":
        received = f"new Array({int(arg) + 1}).fill(0)" if arg and arg.isdigit() else None
    elif name in ("toBeTruthy", "toBeNull", "toBeUndefined", "toBeNaN"):
        received = "0"
    elif name == "toBeFalsy":
        received = "1"
    elif name == "toBeDefined":
        received = "undefined"
    elif name in ("toBeGreaterThan", "toBeGreaterThanOrEqual", "toBeLessThan", "toBeLessThanOrEqual", "toBeCloseTo"):
        if arg is None or not NUMBER.fullmatch(arg) or arg.lower().startswith(("0x", "-0x")):
            return None
        step = -100 if "Greater" in name else 100
        received = repr(float(arg) + step)
    elif name == "toBeInstanceOf":
        received = "Object.create(null)" if arg in ERROR_CLASSES else None
    elif name == "toMatchObject":
        # a key the object lacks (vitest holds null to match {})
        received = "{}"
        argument = "{" + _js("k" + token) + ": 0}"
    elif name == "toHaveProperty":
        received = "{}"
        argument = arg if arg is not None and STRING.fullmatch(arg) else _js("k" + token)
    else:
        return None
    return f"  expect({received}).{name}({argument});\n" if received is not None else None


def _assert_line(form: Form, token: str, obj: str) -> str | None:
    name, arg = form.name, form.arg
    api = form.api
    equal = ASSERT_EQUAL if api == "assert" else TAPE_EQUAL
    not_equal = ASSERT_NOT_EQUAL if api == "assert" else TAPE_NOT_EQUAL
    if name in equal:
        expected = arg if arg is not None and arg not in ERROR_CLASSES and not REGEX.fullmatch(arg) else "1"
        return f"  {obj}.{name}({_other(arg if expected != '1' else None, token)}, {expected});\n"
    if name in not_equal:
        return f"  {obj}.{name}(1, 1);\n"
    if name == "throws":
        return f"  {obj}.throws({NO_THROW}{', ' + arg if arg is not None and not NUMBER.fullmatch(arg) else ''});\n"
    if name == "doesNotThrow":
        return f"  {obj}.doesNotThrow({_throws(token)});\n"
    if name == "rejects":
        return f"  await {obj}.rejects(Promise.resolve(0){', ' + arg if arg and not NUMBER.fullmatch(arg) else ''});\n"
    if name == "doesNotReject":
        return f"  await {obj}.doesNotReject(Promise.reject(new Error({_js(token)})));\n"
    if name == "match":
        text = _unmatched(arg, token)
        return f"  {obj}.match({text}, {arg});\n" if text is not None and arg and REGEX.fullmatch(arg) else None
    if name == "fail":
        return f"  {obj}.fail({_js(token)});\n"
    if name in ("ifError", "error", "ifErr", "iferror"):
        return f"  {obj}.{name}(new Error({_js(token)}));\n"
    if name in ("ok", "true", "assert"):
        return f"  {obj}.{name}(0);\n" if api == "tape" or name == "ok" else None
    if name in ("notOk", "false", "notok"):
        return f"  {obj}.{name}(1);\n"
    return None


THROWS = {"toThrow", "toThrowError", "throws", "rejects"}
EQUALS = {"toBe", "toEqual", "toStrictEqual"} | ASSERT_EQUAL | TAPE_EQUAL


def stand_ins(form: Form, token: str) -> list[Form]:
    """`form` itself where its expected argument is known; where it is not (a variable, an
    expression), the form with an argument of each kind it is commonly given, so that a
    flip keyed on the kind of the argument (a regular expression, a string, an error
    class; a number, a string) still meets one."""
    if not form.unknown:
        return [form]
    if form.name in THROWS:
        kinds: list[str | None] = [None, f"/{token}/", _js(token), "Error"]
    elif form.name in EQUALS:
        kinds = [None, str(int(token[:6], 16)), _js(token)]
    else:
        kinds = [None]
    return [Form(form.api, form.name, form.mods, kind) for kind in kinds]


def failing_checks(source: str, style: str, rng: random.Random) -> list[str]:
    """One must-fail canary body for each assertion form of the hidden tests that `style`'s
    canary file can write (jest and vitest: expect; tape: t; node:test and mocha: node's
    assert), at most MAX_FORMS of them (drawn), each failing through its form alone."""
    api = {"jest": "expect", "vitest": "expect", "tape": "tape"}.get(style, "assert")
    lines: list[str] = []
    token = f"{rng.getrandbits(40):010x}"
    for form in (f for found in forms(source, api) for f in stand_ins(found, token)):
        token = f"{rng.getrandbits(40):010x}"
        line = (
            _expect_line(form, token)
            if api == "expect"
            else _assert_line(form, token, "t" if api == "tape" else "assert")
        )
        if line is not None and line not in lines:
            lines.append(line)
    if len(lines) > MAX_FORMS:
        lines = rng.sample(lines, MAX_FORMS)
    return lines
