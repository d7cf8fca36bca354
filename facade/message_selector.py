"""RocketMQ's message selectors: by tag (``"TagA || TagB"``) and by SQL92 over message properties.

:class:`MessageSelector` is RocketMQ's ``MessageSelector``::

    >>> s = MessageSelector.by_sql("region = 'eu' AND amount > 100 AND TAGS IN ('paid', 'refund')")
    >>> s.matches({"region": "eu", "amount": "250"}, "paid")
    True
    >>> s.matches({"region": "eu", "amount": "abc"}, "paid")  # not a number: no match, no error
    False
    >>> MessageSelector.by_tag("TagA || TagB").matches({}, "TagB")
    True

The SQL92 grammar and its meaning are those of RocketMQ's ``org.apache.rocketmq.filter``
(``SelectorParser.jj``, ``ComparisonExpression``, ``LogicExpression``, ``UnaryExpression``,
``ConstantExpression``; the broker's ``ExpressionMessageFilter`` decides the match):

- ``> >= < <=``, ``[NOT] BETWEEN a AND b``: numbers. ``= <>``: numbers, strings, ``TRUE``/``FALSE``.
  ``[NOT] IN ('a', 'b')``: strings, the left side a property. ``IS [NOT] NULL``. ``AND``, ``OR``,
  ``NOT``, parentheses. ``[NOT] CONTAINS | STARTSWITH | ENDSWITH 'text'`` (RocketMQ 5).
- Literals: ``'it''s'`` (a doubled quote is one quote), ``42`` / ``42L`` (a Java int if it
  fits, else a long), ``1.5`` / ``.5`` / ``5E3`` (a double), ``TRUE``, ``FALSE``, ``NULL``.
  ``--`` line comments (up to a line end) and ``/* */`` comments are skipped.
- Keywords are case-insensitive; property names (``[A-Za-z_$][A-Za-z0-9_$]*``) are not.
  ``TAGS`` is the message's tag (the ``tags`` argument; ``None`` is no tag).
- SQL's three values: a property that is absent is NULL (unknown), a comparison with it is
  unknown, ``NOT`` unknown is unknown, and only TRUE matches. ``x IS NULL`` is how to ask.
- Property values are strings; a comparison reads one as the literal beside it is typed:
  next to ``5`` with Java's ``Integer.valueOf``, next to ``5000000000`` with ``Long.valueOf``,
  next to ``5.0`` with ``Double.valueOf`` (which also takes ``' 5 '``, ``5f``, ``0x1p3``,
  ``NaN``, ``Infinity``), next to ``TRUE`` with ``Boolean.valueOf``; two properties are
  compared as doubles by ``> >= < <=`` and as strings by ``=``.
- When a value cannot be read so (``amount > 100`` with ``amount = '12.5'`` or ``'abc'``),
  RocketMQ's evaluation throws and its broker does not deliver the message: here
  :meth:`MessageSelector.matches` returns False for the whole expression, whatever the
  other clauses say (``NOT``, ``OR`` included), unless ``AND``/``OR`` decided before reaching
  that clause (they evaluate left to right and stop at the first FALSE/TRUE).

Quirks kept on purpose, since a subscription must select here what it selects on RocketMQ:
``NOT`` binds tighter than comparisons (``NOT a = 1`` is ``(NOT a) = 1``, which never
matches: write ``NOT (a = 1)``); ``CONTAINS``/``STARTSWITH``/``ENDSWITH`` and their ``NOT``
forms are FALSE (not unknown) on an absent property and on an empty search text;
``a = b`` is TRUE when both properties are absent; a double literal must lie in
``[Double.MIN_VALUE, Double.MAX_VALUE]``, so ``0.0`` is refused (write ``0``); ``BETWEEN``
with two literal bounds refuses ``BETWEEN 10 AND 0`` (``NOT BETWEEN`` does not check).
RocketMQ's NOW and computed expressions are not part of its grammar, nor of this one.

Bad expressions raise :class:`~rocketkafka.errors.SelectorSyntaxError` at construction,
with the 0-based ``position`` and what was expected there.

Parser: hand-written recursive descent, no dependency. lark (1.3, well kept) was the
candidate from PyPI; it was not taken because the grammar is ten LL(2) productions that
map one to one onto RocketMQ's JavaCC ``SelectorParser.jj``, so RocketMQ's checks made
while the tree is built (``BETWEEN`` bound order, ``>`` on a string literal, ``IN`` needing
a property, a value where a condition belongs) sit at the same points, and the errors name
what was expected in our words at an exact character; JavaCC's longest-match lexing
(``5L``, ``.5``, ``07`` being two tokens, ``--`` needing a line end) is a few lines by hand;
and the core install stays small. Parsing happens once (and is cached); evaluation does
not use the parser at all: the tree is compiled into nested closures over
``(properties, tags)``, with the usual leaves (a property against a literal, ``IN``,
``IS NULL``) specialised, so a message costs a few dict lookups and comparisons -- no
regular expression, no re-parsing.
"""

from __future__ import annotations

import math
import operator
import string
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, Final, NamedTuple, NoReturn

from rocketkafka.errors import SelectorSyntaxError
from rocketkafka.tags import TagFilter

__all__ = ["MessageSelector"]

#: ``(properties, tags) -> value``: a compiled (sub)expression. Values are Java's as Python
#: objects: None (NULL), bool, int (Integer), _Long (Long), float (Double), str (String).
_Eval = Callable[[Mapping[str, str], "str | None"], Any]

TAGS: Final = "TAGS"  # the property name that means the message's tag

_INT_RANGE: Final = (-(1 << 31), (1 << 31) - 1)
_LONG_RANGE: Final = (-(1 << 63), (1 << 63) - 1)
_DOUBLE_MIN_VALUE: Final = 5e-324  # Java's Double.MIN_VALUE: the smallest positive double
_JAVA_TRIM: Final = "".join(map(chr, range(0x21)))  # String.trim() drops every char <= ' '
_EMPTY: Final[Mapping[str, str]] = {}


class _Long(int):
    """A Java long: a literal outside the int range (a property beside it is read with ``Long.valueOf``)."""

    __slots__ = ()


class _Unmatched(Exception):
    """RocketMQ's evaluation would throw here; its broker then does not deliver the message."""


# -- reading property values as Java does ------------------------------------------------

def _java_int(text: str, bounds: tuple[int, int] = _INT_RANGE) -> int:
    """``Integer.valueOf`` (``Long.valueOf`` with the long bounds): sign, then decimal digits, nothing else."""
    if not (text.isascii() and text.isdigit()):  # the slow path: a sign, non-ASCII digits or junk
        body = text[1:] if text[:1] in ("+", "-") else text
        if not body.isdecimal():  # Character.digit takes every Unicode decimal digit, as int() does
            raise _Unmatched
    try:
        number = int(text)
    except ValueError:
        raise _Unmatched from None
    if not bounds[0] <= number <= bounds[1]:
        raise _Unmatched
    return number


def _java_long(text: str) -> _Long:
    return _Long(_java_int(text, _LONG_RANGE))


def _java_double(text: str) -> float:
    """``Double.valueOf``: trimmed, decimal or hex, optional f/d suffix, exactly ``NaN``/``Infinity``."""
    try:
        value = float(text)
    except ValueError:
        return _java_double_unusual(text)
    if value - value == 0.0:  # finite: float() took it; Java also does unless it has '_' or non-ASCII
        if "_" in text or not text.isascii():
            raise _Unmatched
        return value
    body = text.strip(_JAVA_TRIM).lstrip("+-")[:9]  # inf or nan: only Java's spellings, or an overflow
    if body in ("Infinity", "NaN") or (body[:1].isdigit() or body[:1] == ".") and value == value:
        if "_" in text or not text.isascii():
            raise _Unmatched
        return value
    raise _Unmatched


def _java_double_unusual(text: str) -> float:
    """What float() refuses and Java reads: a ``f``/``F``/``d``/``D`` suffix, hex, control characters around."""
    text = text.strip(_JAVA_TRIM)
    if not text.isascii() or "_" in text or not text:
        raise _Unmatched
    body = text[:-1] if text[-1] in "fFdD" and len(text) > 1 else text
    unsigned = body.lstrip("+-")
    if len(body) - len(unsigned) > 1:
        raise _Unmatched
    try:
        if unsigned[:2] in ("0x", "0X"):
            if "p" not in unsigned.lower():  # Java's hex form needs its binary exponent
                raise _Unmatched
            return float.fromhex(body)
        if unsigned[:1].isdigit() or unsigned[:1] == ".":  # not NaN/Infinity: those take no suffix
            return float(body)
    except ValueError:
        pass
    raise _Unmatched


def _java_boolean(text: str) -> bool:
    """``Boolean.valueOf``: true for "true" in any case, false for anything else."""
    return text.lower() == "true"


_READERS: Final[dict[type, Callable[[str], int | float]]] = {int: _java_int, _Long: _java_long, float: _java_double}
#: ASCII digit strings shorter than this always fit the type: read them with int() directly.
_SHORT_DIGITS: Final[dict[type, int]] = {int: 10, _Long: 19}


def _double_compare(x: float, y: float) -> int:
    """Java's ``Double.compare``: -0.0 < 0.0, NaN equals NaN and is above everything else."""
    if x < y:
        return -1
    if x > y:
        return 1
    if x == y:
        if x == 0.0:
            sx, sy = math.copysign(1.0, x), math.copysign(1.0, y)
            return (sx > sy) - (sx < sy)
        return 0
    x_nan, y_nan = x != x, y != y
    return (x_nan > y_nan) - (x_nan < y_nan)


def _compare(lv: Any, rv: Any) -> int:
    """RocketMQ's ``ComparisonExpression.__compare`` (string conversion on), both values non-null."""
    lt, rt = type(lv), type(rv)
    if lt is not rt:
        if lt is bool:
            if rt is str:  # RocketMQ casts the Boolean to String here: ClassCastException
                raise _Unmatched
            return -1
        if rt is bool:
            if lt is not str:
                return -1
            lv = _java_boolean(lv)
        elif lt is str:
            lv = _READERS[rt](lv)
        elif rt is str:
            rv = _READERS[lt](rv)
        if type(lv) is float or type(rv) is float:
            return _double_compare(float(lv), float(rv))
    elif lt is float:
        return _double_compare(lv, rv)
    return int(lv > rv) - int(lv < rv)


def _negate(value: Any) -> Any:
    """``UnaryExpression.createNegate``: numbers change sign, anything else is NULL."""
    kind = type(value)
    if kind is int or kind is float:
        return -value
    if kind is _Long:
        return _Long(-value)
    return None


# -- tokens -------------------------------------------------------------------------------

_KEYWORDS: Final = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS",
                              "CONTAINS", "STARTSWITH", "ENDSWITH"})
_TEXT_OPERATORS: Final = ("CONTAINS", "STARTSWITH", "ENDSWITH")
_ID_START: Final = frozenset(string.ascii_letters + "_$")
_ID_PART: Final = _ID_START | frozenset(string.digits)
_DIGITS: Final = frozenset(string.digits)
_SPACE: Final = frozenset(" \t\n\r\f")
_SYMBOLS: Final = ("<>", ">=", "<=", "=", ">", "<", "(", ")", ",", "+", "-")  # longest first


class _Token(NamedTuple):
    kind: str  # a keyword (upper case), ID, INT, FLOAT, STRING, a symbol's text, or EOF
    text: str
    pos: int
    value: Any = None


def _describe(token: _Token) -> str:
    if token.kind == "EOF":
        return "the end of the expression"
    if token.kind == "ID":
        return f"the name {token.text}"
    if token.kind in ("INT", "FLOAT"):
        return f"the number {token.text}"
    if token.kind == "STRING":
        return f"the string {token.text}"
    if token.kind in _KEYWORDS:
        return token.kind
    return f"'{token.text}'"


def _tokenize(expression: str) -> list[_Token]:
    """JavaCC's lexing of ``SelectorParser.jj``: the longest match, keywords before names."""
    tokens: list[_Token] = []
    i, n = 0, len(expression)
    while i < n:
        c = expression[i]
        if c in _SPACE:
            i += 1
            continue
        if c == "-" and expression.startswith("--", i):  # a line comment needs its line end
            ends = [e for e in (expression.find("\n", i), expression.find("\r", i)) if e >= 0]
            if ends:
                end = min(ends)
                i = end + (2 if expression.startswith("\r\n", end) else 1)
                continue
        if c == "/" and expression.startswith("/*", i):
            end = expression.find("*/", i + 2)
            if end < 0:
                raise SelectorSyntaxError(expression, i, "the comment '/*' is not closed with '*/'")
            i = end + 2
            continue
        if c == "'":
            token = _string_token(expression, i)
        elif c in _DIGITS or (c == "." and i + 1 < n and expression[i + 1] in _DIGITS):
            token = _number_token(expression, i)
        elif c in _ID_START:
            j = i + 1
            while j < n and expression[j] in _ID_PART:
                j += 1
            word = expression[i:j]
            token = _Token(word.upper() if word.upper() in _KEYWORDS else "ID", word, i)
        else:
            symbol = next((s for s in _SYMBOLS if expression.startswith(s, i)), None)
            if symbol is None:
                raise SelectorSyntaxError(expression, i, f"unexpected character {c!r}")
            token = _Token(symbol, symbol, i)
        tokens.append(token)
        i += len(token.text)
    tokens.append(_Token("EOF", "", n))
    return tokens


def _string_token(expression: str, start: int) -> _Token:
    parts, j = [], start + 1
    while True:
        k = expression.find("'", j)
        if k < 0:
            raise SelectorSyntaxError(expression, start, "the string is never closed (a ' is missing at its end)")
        parts.append(expression[j:k])
        if not expression.startswith("'", k + 1):
            return _Token("STRING", expression[start:k + 1], start, "".join(parts))
        parts.append("'")  # '' inside a string is one quote
        j = k + 2


def _number_token(expression: str, start: int) -> _Token:
    n = len(expression)
    j = start
    while j < n and expression[j] in _DIGITS:
        j += 1
    digits_end, is_float = j, False
    if j < n and expression[j] == ".":
        j, is_float = j + 1, True
        while j < n and expression[j] in _DIGITS:
            j += 1
    k = j + 1  # an exponent: [eE][+-]?[0-9]+
    if j < n and expression[j] in "eE":
        if k < n and expression[k] in "+-":
            k += 1
        if k < n and expression[k] in _DIGITS:
            while k < n and expression[k] in _DIGITS:
                k += 1
            j, is_float = k, True
    if is_float:
        return _Token("FLOAT", expression[start:j], start)
    j = start + 1 if expression[start] == "0" else digits_end  # "0" | [1-9][0-9]*: "07" is 0 then 7
    if j < n and expression[j] in "lL":
        j += 1
    return _Token("INT", expression[start:j], start)


# -- the tree, compiled as it is parsed ------------------------------------------------------

class _Node(NamedTuple):
    pos: int
    fn: _Eval
    condition: bool = False  # RocketMQ's BooleanExpression: gives TRUE/FALSE/NULL (TRUE, FALSE, NULL included)
    literal: bool = False  # RocketMQ's ConstantExpression: a literal as written (not a negated one)
    known: bool = False  # the value is known without a message: `value`
    value: Any = None
    prop: str | None = None  # a property reference


def _constant(pos: int, value: Any, *, literal: bool, condition: bool = False) -> _Node:
    return _Node(pos, lambda p, t: value, condition=condition, literal=literal, known=True, value=value)


def _property(pos: int, name: str) -> _Node:
    if name == TAGS:
        return _Node(pos, lambda p, t: t, prop=name)
    return _Node(pos, lambda p, t: p.get(name), prop=name)


_ORDERINGS: Final[dict[str, Callable[[Any, Any], bool]]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
_FLIPPED: Final = {">": "<", ">=": "<=", "<": ">", "<=": ">="}


def _is_plain_number(value: Any) -> bool:
    """A known int/long/double that compares like Python's (not NaN, not ±0.0 double)."""
    kind = type(value)
    return kind is int or kind is _Long or (kind is float and value == value and value != 0.0)


def _ordering(op: str, left: _Node, right: _Node) -> _Eval:
    """``> >= < <=``: ComparisonExpression.evaluate (two strings are compared as doubles)."""
    test = _ORDERINGS[op]
    if right.prop is not None and left.known and _is_plain_number(left.value):  # 5 < a is a > 5
        op, left, right, test = _FLIPPED[op], right, left, _ORDERINGS[_FLIPPED[op]]
    if left.prop is not None and left.prop != TAGS and right.known and _is_plain_number(right.value):
        name, c, read = left.prop, right.value, _READERS[type(right.value)]
        if type(c) is float and op in (">", ">="):  # Double.compare puts NaN above everything
            def nan_aware(p: Mapping[str, str], t: str | None) -> bool | None:
                v = p.get(name)
                if v is None:
                    return None
                x = read(v)
                return test(x, c) or x != x
            return nan_aware

        if type(c) is float:
            def double(p: Mapping[str, str], t: str | None) -> bool | None:
                v = p.get(name)
                return None if v is None else test(read(v), c)
            return double
        short = _SHORT_DIGITS[type(c)]

        def integer(p: Mapping[str, str], t: str | None) -> bool | None:
            v = p.get(name)
            if v is None:
                return None
            if v.isdigit() and len(v) < short and v.isascii():  # the usual case, read without the checks
                return test(int(v), c)
            return test(read(v), c)
        return integer
    lf, rf = left.fn, right.fn

    def generic(p: Mapping[str, str], t: str | None) -> bool | None:
        lv = lf(p, t)
        if lv is None:
            return None
        rv = rf(p, t)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:
            return test(_double_compare(_java_double(lv), _java_double(rv)), 0)
        return test(_compare(lv, rv), 0)
    return generic


def _equality(left: _Node, right: _Node) -> _Eval:
    """``=``: doCreateEqual. NULL = x is NULL, x = NULL is FALSE, NULL = NULL is TRUE."""
    prop, const, missing = left, right, None
    if right.prop is not None and left.known and type(left.value) is not bool:
        prop, const, missing = right, left, False  # 'x' = a: a NULL on the right gives FALSE
    if prop.prop is not None and prop.prop != TAGS and const.known and const.value is not None:
        name, c = prop.prop, const.value  # type: str, object
        if type(c) is str:
            def text(p: Mapping[str, str], t: str | None) -> bool | None:
                v = p.get(name)
                return missing if v is None else v == c
            return text
        if type(c) is bool:
            def flag(p: Mapping[str, str], t: str | None) -> bool | None:
                v = p.get(name)
                return missing if v is None else _java_boolean(v) is c
            return flag
        if _is_plain_number(c):
            read, short = _READERS[type(c)], _SHORT_DIGITS.get(type(c), 0)

            def number(p: Mapping[str, str], t: str | None) -> bool | None:
                v = p.get(name)
                if v is None:
                    return missing
                if v.isdigit() and len(v) < short and v.isascii():  # an int or long, read without the checks
                    return int(v) == c
                return read(v) == c
            return number
    lf, rf = left.fn, right.fn

    def generic(p: Mapping[str, str], t: str | None) -> bool | None:
        lv, rv = lf(p, t), rf(p, t)
        if lv is None:
            return True if rv is None else None
        if rv is None:
            return False
        return _compare(lv, rv) == 0
    return generic


def _is_null(node: _Node, negated: bool) -> _Eval:
    if node.prop is not None and node.prop != TAGS:
        name = node.prop
        if negated:
            return lambda p, t: p.get(name) is not None
        return lambda p, t: p.get(name) is None
    fn = node.fn
    if negated:
        return lambda p, t: fn(p, t) is not None
    return lambda p, t: fn(p, t) is None


def _negation(fn: _Eval) -> _Eval:
    def negated(p: Mapping[str, str], t: str | None) -> bool | None:
        v = fn(p, t)
        return None if v is None else not v
    return negated


def _membership(node: _Node, values: frozenset[str], negated: bool) -> _Eval:
    """``[NOT] IN``: NULL for an absent property (or a non-string), else membership."""
    if node.prop is not None and node.prop != TAGS:
        name = node.prop

        def member(p: Mapping[str, str], t: str | None) -> bool | None:
            v = p.get(name)
            return None if v is None else (v in values) is not negated
        return member
    fn = node.fn

    def generic(p: Mapping[str, str], t: str | None) -> bool | None:
        v = fn(p, t)
        return None if type(v) is not str else (v in values) is not negated
    return generic


_TEXT_TESTS: Final[dict[str, Callable[[str, str], bool]]] = {
    "CONTAINS": str.__contains__, "STARTSWITH": str.startswith, "ENDSWITH": str.endswith}


def _text_test(op: str, node: _Node, search: str, negated: bool) -> _Eval:
    """``[NOT] CONTAINS|STARTSWITH|ENDSWITH``: FALSE for an empty search, an absent property or a non-string."""
    if not search:
        return lambda p, t: False
    test, fn = _TEXT_TESTS[op], node.fn

    def text(p: Mapping[str, str], t: str | None) -> bool:
        v = fn(p, t)
        return type(v) is str and test(v, search) is not negated
    return text


def _conjunction(fns: list[_Eval]) -> _Eval:
    """``AND`` of LogicExpression: stops at the first FALSE; NULL unless every operand is TRUE."""
    def all_of(p: Mapping[str, str], t: str | None) -> bool | None:
        result: bool | None = True
        for fn in fns:
            r = fn(p, t)
            if r is not True:
                if r is False:
                    return False
                result = None
        return result
    return all_of


def _disjunction(fns: list[_Eval]) -> _Eval:
    """``OR`` of LogicExpression: stops at the first TRUE; NULL unless every operand is FALSE."""
    def any_of(p: Mapping[str, str], t: str | None) -> bool | None:
        result: bool | None = False
        for fn in fns:
            r = fn(p, t)
            if r is not False:
                if r is True:
                    return True
                result = None
        return result
    return any_of


_VALUE_START: Final = "a property name, a number, a 'string', TRUE, FALSE, NULL, '(', NOT, '+' or '-'"


class _Parser:
    """Recursive descent over the productions of RocketMQ's ``SelectorParser.jj``, one method each."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.tokens = _tokenize(expression)
        self.i = 0

    # -- plumbing --------------------------------------------------------------------------
    @property
    def token(self) -> _Token:
        return self.tokens[self.i]

    def peek(self) -> _Token:
        return self.tokens[min(self.i + 1, len(self.tokens) - 1)]

    def advance(self) -> _Token:
        token = self.tokens[self.i]
        self.i = min(self.i + 1, len(self.tokens) - 1)
        return token

    def fail(self, pos: int, reason: str) -> NoReturn:
        raise SelectorSyntaxError(self.expression, pos, reason)

    def expected(self, what: str) -> NoReturn:
        self.fail(self.token.pos, f"expected {what}, found {_describe(self.token)}")

    def expect(self, kind: str, what: str) -> _Token:
        if self.token.kind != kind:
            self.expected(what)
        return self.advance()

    # -- RocketMQ's checks while building the tree ---------------------------------------------
    def condition(self, node: _Node) -> _Node:
        """asBooleanExpression: a condition as is, a property cast (a string is never TRUE), else refused."""
        if node.condition:
            return node
        if node.prop is not None:
            fn = node.fn
            return _Node(node.pos, lambda p, t: None if (v := fn(p, t)) is None else v if type(v) is bool else False,
                         condition=True)
        self.fail(node.pos, "expected a condition (a comparison, IS NULL, IN, ..., TRUE or FALSE), "
                            "found a value that is neither TRUE nor FALSE")

    def orderable(self, node: _Node, op: str) -> None:
        """checkLessThanOperand: no string/boolean/NULL literal and no condition beside > >= < <= BETWEEN."""
        if node.literal and not _is_number(node.value):
            self.fail(node.pos, f"{op} compares numbers; {_literal_text(node.value)} cannot be compared with it")
        if node.condition:
            self.fail(node.pos, f"{op} compares numbers, not conditions (a condition is TRUE or FALSE)")

    def equatable(self, left: _Node, right: _Node, op: str) -> None:
        """checkEqualOperand and checkEqualOperandCompatability."""
        for node in (left, right):
            if node.literal and node.value is None:
                self.fail(node.pos, f"NULL cannot be compared with {op}; use IS NULL or IS NOT NULL")
        if left.literal and right.literal and type(left.value) is bool and type(right.value) is not bool:
            self.fail(right.pos, f"{_literal_text(left.value)} cannot be compared with {_literal_text(right.value)}")

    # -- productions ---------------------------------------------------------------------------
    def parse(self) -> _Eval:
        node = self.or_expression()
        if self.token.kind != "EOF":
            self.expected("an operator, AND, OR or the end of the expression")
        return self.condition(node).fn

    def or_expression(self) -> _Node:
        operands = [self.and_expression()]
        while self.token.kind == "OR":
            self.advance()
            right = self.and_expression()
            if len(operands) == 1:
                operands[0] = self.condition(operands[0])
            operands.append(self.condition(right))
        if len(operands) == 1:
            return operands[0]
        return _Node(operands[0].pos, _disjunction([o.fn for o in operands]), condition=True)

    def and_expression(self) -> _Node:
        operands = [self.equality_expression()]
        while self.token.kind == "AND":
            self.advance()
            right = self.equality_expression()
            if len(operands) == 1:
                operands[0] = self.condition(operands[0])
            operands.append(self.condition(right))
        if len(operands) == 1:
            return operands[0]
        return _Node(operands[0].pos, _conjunction([o.fn for o in operands]), condition=True)

    def equality_expression(self) -> _Node:
        left = self.comparison_expression()
        while True:
            kind = self.token.kind
            if kind in ("=", "<>"):
                self.advance()
                right = self.comparison_expression()
                self.equatable(left, right, kind)
                fn = _equality(left, right)
                left = _Node(left.pos, fn if kind == "=" else _negation(fn), condition=True)
            elif kind == "IS":
                self.advance()
                negated = self.token.kind == "NOT"
                if negated:
                    self.advance()
                    self.expect("NULL", "NULL after IS NOT")
                else:
                    self.expect("NULL", "NULL or NOT NULL after IS")
                left = _Node(left.pos, _is_null(left, negated), condition=True)
            else:
                return left

    def comparison_expression(self) -> _Node:
        left = self.unary_expression()
        while True:
            kind = self.token.kind
            negated = kind == "NOT"
            if negated:
                follower = self.peek().kind
                if follower not in ("BETWEEN", "IN", *_TEXT_OPERATORS):
                    self.advance()
                    self.expected("BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT")
                self.advance()
                kind = follower
            if kind in _ORDERINGS:
                self.advance()
                right = self.unary_expression()
                self.orderable(left, kind)
                self.orderable(right, kind)
                left = _Node(left.pos, _ordering(kind, left, right), condition=True)
            elif kind == "BETWEEN":
                left = self.between(left, negated)
            elif kind == "IN":
                left = self.in_list(left, negated)
            elif kind in _TEXT_OPERATORS:
                self.advance()
                search = self.expect("STRING", f"a 'string' after {kind}").value
                left = _Node(left.pos, _text_test(kind, left, search, negated), condition=True)
            else:
                return left

    def between(self, value: _Node, negated: bool) -> _Node:
        op = "NOT BETWEEN" if negated else "BETWEEN"
        self.advance()
        low = self.unary_expression()
        self.expect("AND", f"AND between the bounds of {op}")
        high = self.unary_expression()
        if negated:  # createNotBetween: value < low OR value > high, bounds unchecked
            for node in (value, low, value, high):
                self.orderable(node, op)
            fn = _disjunction([_ordering("<", value, low), _ordering(">", value, high)])
        else:  # createBetween: literal bounds must be non-NULL and in order, then value >= low AND value <= high
            if low.literal and high.literal:
                self.ordered_bounds(low, high)
            for node in (value, low, value, high):
                self.orderable(node, op)
            fn = _conjunction([_ordering(">=", value, low), _ordering("<=", value, high)])
        return _Node(value.pos, fn, condition=True)

    def ordered_bounds(self, low: _Node, high: _Node) -> None:
        if low.value is None or high.value is None:
            self.fail(low.pos if low.value is None else high.pos, "the bounds of BETWEEN cannot be NULL")
        try:
            order = _compare(high.value, low.value)
        except _Unmatched:
            self.fail(low.pos, f"the bounds of BETWEEN, {_literal_text(low.value)} and "
                               f"{_literal_text(high.value)}, cannot be compared")
        if order < 0:
            self.fail(low.pos, f"the lower bound of BETWEEN comes first: {_literal_text(low.value)} "
                               f"is greater than {_literal_text(high.value)}")

    def in_list(self, value: _Node, negated: bool) -> _Node:
        op = "NOT IN" if negated else "IN"
        self.advance()
        self.expect("(", f"'(' after {op}")
        values = [self.expect("STRING", f"a 'string' in the {op} list").value]
        while self.token.kind == ",":
            self.advance()
            values.append(self.expect("STRING", f"a 'string' in the {op} list").value)
        self.expect(")", f"',' or ')' in the {op} list")
        if value.prop is None:
            self.fail(value.pos, f"{op} needs a property name on its left")
        return _Node(value.pos, _membership(value, frozenset(values), negated), condition=True)

    def unary_expression(self) -> _Node:
        token = self.token
        if token.kind == "+":
            self.advance()
            return self.unary_expression()
        if token.kind == "-":
            self.advance()
            operand = self.unary_expression()
            if operand.known:
                return _constant(token.pos, _negate(operand.value), literal=False)
            fn = operand.fn
            return _Node(token.pos, lambda p, t: _negate(fn(p, t)))
        if token.kind == "NOT":
            self.advance()
            operand = self.condition(self.unary_expression())
            return _Node(token.pos, _negation(operand.fn), condition=True)
        return self.primary_expression()

    def primary_expression(self) -> _Node:
        token = self.token
        kind = token.kind
        if kind == "ID":
            self.advance()
            return _property(token.pos, token.text)
        if kind == "(":
            self.advance()
            node = self.or_expression()
            if self.token.kind != ")":
                self.expected(f"')' to close the '(' at position {token.pos}")
            self.advance()
            return node
        if kind in ("TRUE", "FALSE", "NULL"):
            self.advance()
            return _constant(token.pos, {"TRUE": True, "FALSE": False, "NULL": None}[kind], literal=True,
                             condition=True)
        if kind == "STRING":
            self.advance()
            return _constant(token.pos, token.value, literal=True)
        if kind == "INT":
            self.advance()
            return _constant(token.pos, self.integer(token), literal=True)
        if kind == "FLOAT":
            self.advance()
            return _constant(token.pos, self.double(token), literal=True)
        self.expected(_VALUE_START)

    def integer(self, token: _Token) -> int:
        """ConstantExpression.createFromDecimal: a Java long; an int when it fits."""
        try:
            number = int(token.text.rstrip("lL"))
        except ValueError:  # more digits than int() reads: far beyond a long anyway
            number = _LONG_RANGE[1] + 1
        if number > _LONG_RANGE[1]:
            self.fail(token.pos, f"the integer {token.text} is beyond a Java long (at most {_LONG_RANGE[1]})")
        return number if number <= _INT_RANGE[1] else _Long(number)

    def double(self, token: _Token) -> float:
        """ConstantExpression.createFloat: finite and at least Double.MIN_VALUE (so 0.0 is refused)."""
        number = float(token.text)
        if number == math.inf:
            self.fail(token.pos, f"the number {token.text[:40]} is beyond a Java double")
        if number < _DOUBLE_MIN_VALUE:
            self.fail(token.pos, f"the number {token.text[:40]} is below Double.MIN_VALUE (RocketMQ refuses "
                                 "0.0 and its like; write 0 for zero)")
        return number


def _is_number(value: Any) -> bool:
    kind = type(value)
    return kind is int or kind is _Long or kind is float


def _literal_text(value: Any) -> str:
    if value is None:
        return "NULL"
    if type(value) is bool:
        return "TRUE" if value else "FALSE"
    if type(value) is str:
        return "'" + value.replace("'", "''") + "'"
    return repr(value) if type(value) is float else str(int(value))


@lru_cache(maxsize=256)
def _compile_sql(expression: str) -> _Eval:
    """The evaluator of ``expression`` (RocketMQ caches its parses too)."""
    return _Parser(expression).parse()


class MessageSelector:
    """A subscription's filter, as RocketMQ's ``MessageSelector``: by tag or by SQL92.

    Build one with :meth:`by_tag` or :meth:`by_sql`; :meth:`matches` tells whether a
    message with these properties and this tag belongs to the subscription. Immutable,
    hashable, safe to share between threads.

    >>> s = MessageSelector.by_sql("a BETWEEN 1 AND 3 AND b IS NOT NULL")
    >>> s.kind, s.expression
    ('SQL92', 'a BETWEEN 1 AND 3 AND b IS NOT NULL')
    >>> s.matches({"a": "2", "b": ""}), s.matches({"a": "2"})
    (True, False)
    """

    __slots__ = ("_kind", "_expression", "_test")

    #: :attr:`kind` of :meth:`by_tag` selectors (RocketMQ's ``ExpressionType.TAG``).
    TAG: Final = "TAG"
    #: :attr:`kind` of :meth:`by_sql` selectors (RocketMQ's ``ExpressionType.SQL92``).
    SQL92: Final = "SQL92"

    def __init__(self, kind: str, expression: str, test: _Eval) -> None:
        """Not for direct use: call :meth:`by_tag` or :meth:`by_sql`."""
        self._kind, self._expression, self._test = kind, expression, test

    @classmethod
    def by_tag(cls, expression: str | None) -> MessageSelector:
        """Select by tag: ``"*"`` (or ``None``, ``""``) for every message, else ``"TagA || TagB"``.

        The semantics are :class:`~rocketkafka.tags.TagFilter`'s; properties are not read.

        Raises:
            TagExpressionError: the expression does not parse (``"A ||"``, ``"A | B"``).

        >>> MessageSelector.by_tag("A || B").matches({}, "C")
        False
        """
        tag_filter = TagFilter.parse(expression)
        return cls(cls.TAG, "*" if expression is None else expression, lambda p, t: tag_filter.matches(t))

    @classmethod
    def by_sql(cls, expression: str) -> MessageSelector:
        """Select by a SQL92 condition over the message properties (and ``TAGS``, the tag).

        See the module docstring for the grammar and RocketMQ's semantics.

        Raises:
            SelectorSyntaxError: the expression does not parse, or RocketMQ would refuse it
                (``a > 'x'``, ``a = NULL``, ``a BETWEEN 10 AND 0``, ``3``); ``position`` is the
                0-based character index of the problem.

        >>> MessageSelector.by_sql("TAGS = 'A' OR color IN ('red', 'blue')").matches({"color": "red"}, "B")
        True
        """
        if not isinstance(expression, str):
            raise SelectorSyntaxError(repr(expression), 0, f"must be a string, got {type(expression).__name__}")
        try:
            test = _compile_sql(expression)
        except RecursionError:
            raise SelectorSyntaxError(expression, 0, "the expression is nested too deeply") from None
        return cls(cls.SQL92, expression, test)

    @property
    def kind(self) -> str:
        """``"TAG"`` or ``"SQL92"``."""
        return self._kind

    @property
    def expression(self) -> str:
        """The expression as given (``"*"`` for a tag selector built from ``None``)."""
        return self._expression

    def matches(self, properties: Mapping[str, str] | None, tags: str | None = None) -> bool:
        """True when a message with ``properties`` (string values) and tag ``tags`` is selected.

        Only TRUE selects: FALSE, unknown (NULL) and a value RocketMQ cannot read (it
        throws, and its broker does not deliver) all give False. Never raises for a message.

        >>> MessageSelector.by_sql("n > 2").matches({"n": "3"}), MessageSelector.by_sql("n > 2").matches({})
        (True, False)
        """
        try:
            return self._test(_EMPTY if properties is None else properties, tags) is True
        except _Unmatched:
            return False

    def __repr__(self) -> str:
        return f"MessageSelector.{'by_tag' if self._kind == self.TAG else 'by_sql'}({self._expression!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageSelector):
            return NotImplemented
        return (self._kind, self._expression) == (other._kind, other._expression)

    def __hash__(self) -> int:
        return hash((self._kind, self._expression))
