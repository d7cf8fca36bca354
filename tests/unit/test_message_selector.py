"""MessageSelector: RocketMQ's TAG and SQL92 selectors, table-driven.

Where the cases come from (repository apache/rocketmq, read at these commits):

- ``filter/src/test/java/org/apache/rocketmq/filter/ExpressionTest.java``
  @ ba45c2cd951d9b4ac73ca1b1e4c22090ed869310 -> EXPRESSION_TEST (every ``testEvaluate_*``
  except ``testEvaluate_now``, which builds a NOW node through the Java API: NOW is not in the
  grammar). Property values are given as strings, as a broker sees them; the Java test also
  feeds Integer values in a few contexts, whose string twins it checks as well.
  ``testEvaluate_stringCompare`` is declared ``expected = RuntimeException``: Java stops at the
  first throw (the second context), so its later contexts never ran there; they are kept here
  with the outcome the Java classes below give.
- ``filter/src/test/java/org/apache/rocketmq/filter/ParserTest.java``
  @ a409d0ce2d15fa9f0612ff4e7efb18aedf46eda8 -> PARSER_VALID, PARSER_INVALID, and
  ``testEquals`` as test_parser_test_equals_blank_insensitive.
- ``filter/src/test/java/org/apache/rocketmq/filter/LogicExpressionTest.java``
  @ 06542cc905180b461bf4d34523b58324d26c8263 -> LOGIC_TRUTH_TABLE and the short-circuit tests,
  observed through SQL: UNKNOWN is a comparison with an absent property, and an operand that
  would throw (a non-number beside ``>``) shows whether it was evaluated.
- SEMANTICS and SYNTAX_ERRORS are ours, each case read off RocketMQ's classes:
  ``filter/src/main/java/org/apache/rocketmq/filter/expression/ComparisonExpression.java``
  @ 25db942e014b9149db3954abf25c250697eac448 (comparisons, CONTAINS/STARTSWITH/ENDSWITH and
  their NOT forms), ``UnaryExpression.java`` @ 14e24ca2b92f962b042dc732ca22c4084120699a (NOT,
  IN, negation, property as condition), ``ConstantExpression.java``
  @ bc692b408d9725bf81dbe59c9aae4b4f2b304572 (literal ranges), ``BooleanConstantExpression.java``
  @ 188e635240dca0bb8235130516580ddaa5a168aa, the grammar
  ``filter/src/main/java/org/apache/rocketmq/filter/parser/SelectorParser.jj``
  @ 0732b2c7d4c5820f07478b7c5459a4a1e0cc92dd with the STARTSWITH/ENDSWITH tokens of
  ``SelectorParserConstants.java`` @ 43b27d00d8239a749ba95f53976f86c07ab919ad, and the broker's
  ``broker/src/main/java/org/apache/rocketmq/broker/filter/ExpressionMessageFilter.java``
  @ 188e635240dca0bb8235130516580ddaa5a168aa (an evaluation that throws: not delivered).
"""

from __future__ import annotations

import doctest

import pytest

import rocketkafka.message_selector as selector_module
from rocketkafka.errors import RocketKafkaError, SelectorSyntaxError, TagExpressionError
from rocketkafka.message_selector import MessageSelector

# -- ExpressionTest.java ---------------------------------------------------------------------

AND_EXPRESSION = "a=3 and b<>4 And c>5 AND d<=4"
OR_EXPRESSION = "a=3 or b<>4 Or c>5 OR d<=4"
IN_EXPRESSION = "a in ('3', '4', '5')"
NOT_IN_EXPRESSION = "a not in ('3', '4', '5')"
BETWEEN_EXPRESSION = "a between 2 and 10"
NOT_BETWEEN_EXPRESSION = "a not between 2 and 10"
IS_NULL_EXPRESSION = "a is null"
IS_NOT_NULL_EXPRESSION = "a is not null"
EQUAL_EXPRESSION = "a is not null and a='hello'"
BOOLEAN_EXPRESSION = "a=TRUE OR b=FALSE"
NULL_OR_EXPRESSION = "a is null OR a='hello'"
STRING_HAS_STRING = "TAGS is not null and TAGS='''''tag'''''"

#: (Java test, expression, properties, tag, selected)
EXPRESSION_TEST = [
    ("stringHasString", STRING_HAS_STRING, {}, "''tag''", True),
    ("stringCompare: bounds absent", "a between up and low", {"a": "3.14"}, None, False),
    ("stringCompare: bounds not numbers (Java throws)", "a between up and low",
     {"a": "3.14", "up": "up", "low": "low"}, None, False),
    ("stringCompare: key not a number", "key is not null and key between 0 and 100", {"key": "con"}, None, False),
    ("stringCompare: a not a number", "a between 0 and 100", {"a": "abc"}, None, False),
    ("stringCompare: a=b", "a=b", {"a": "3.14", "b": "3.14"}, None, True),
    ("stringCompare: a<>b equal", "a<>b", {"a": "3.14", "b": "3.14"}, None, False),
    ("stringCompare: a<>b differ", "a<>b", {"a": "3.14", "b": "3.141"}, None, True),
    ("exponent", "a > 3.1E10", {"a": "3.1415E10"}, None, True),  # String.valueOf(3.1415 * 10^10)
    ("floatNumber", "a > 3.14", {"a": "3.1415"}, None, True),
    ("twoVariable", "a > b", {"a": "10", "b": "20"}, None, False),
    ("twoVariableGt", "a > b", {"b": "10", "a": "20"}, None, True),
    ("nullOr: absent", NULL_OR_EXPRESSION, {}, None, True),
    ("nullOr: hello", NULL_OR_EXPRESSION, {"a": "hello"}, None, True),
    ("nullOr: abc", NULL_OR_EXPRESSION, {"a": "abc"}, None, False),
    ("boolean: true/false", BOOLEAN_EXPRESSION, {"a": "true", "b": "false"}, None, True),
    ("boolean: false/true", BOOLEAN_EXPRESSION, {"a": "false", "b": "true"}, None, False),
    ("equal: hello", EQUAL_EXPRESSION, {"a": "hello"}, None, True),
    ("equal: absent", EQUAL_EXPRESSION, {}, None, False),
    ("andTrue", AND_EXPRESSION, {"a": "3", "b": "5", "c": "6", "d": "1"}, None, True),
    ("andFalse", AND_EXPRESSION, {"a": "4", "b": "5", "c": "6", "d": "1"}, None, False),
    ("orTrue: first", OR_EXPRESSION, {"a": "3"}, None, True),
    ("orTrue: second", OR_EXPRESSION, {"a": "4", "b": "5"}, None, True),
    ("orTrue: third", OR_EXPRESSION, {"a": "4", "b": "4", "c": "6"}, None, True),
    ("orTrue: fourth", OR_EXPRESSION, {"a": "4", "b": "4", "c": "3", "d": "2"}, None, True),
    ("orFalse", OR_EXPRESSION, {"a": "4", "b": "4", "c": "3", "d": "10"}, None, False),
    ("inTrue: 3", IN_EXPRESSION, {"a": "3"}, None, True),
    ("inTrue: 4", IN_EXPRESSION, {"a": "4"}, None, True),
    ("inTrue: 5", IN_EXPRESSION, {"a": "5"}, None, True),
    ("inFalse", IN_EXPRESSION, {"a": "8"}, None, False),
    ("notInTrue", NOT_IN_EXPRESSION, {"a": "8"}, None, True),
    ("notInFalse: 3", NOT_IN_EXPRESSION, {"a": "3"}, None, False),
    ("notInFalse: 4", NOT_IN_EXPRESSION, {"a": "4"}, None, False),
    ("notInFalse: 5", NOT_IN_EXPRESSION, {"a": "5"}, None, False),
    ("betweenTrue: 2", BETWEEN_EXPRESSION, {"a": "2"}, None, True),
    ("betweenTrue: 10", BETWEEN_EXPRESSION, {"a": "10"}, None, True),
    ("betweenTrue: 3", BETWEEN_EXPRESSION, {"a": "3"}, None, True),
    ("betweenFalse: 1", BETWEEN_EXPRESSION, {"a": "1"}, None, False),
    ("betweenFalse: 11", BETWEEN_EXPRESSION, {"a": "11"}, None, False),
    ("notBetweenTrue: 1", NOT_BETWEEN_EXPRESSION, {"a": "1"}, None, True),
    ("notBetweenTrue: 11", NOT_BETWEEN_EXPRESSION, {"a": "11"}, None, True),
    ("notBetweenFalse: 2", NOT_BETWEEN_EXPRESSION, {"a": "2"}, None, False),
    ("notBetweenFalse: 10", NOT_BETWEEN_EXPRESSION, {"a": "10"}, None, False),
    ("notBetweenFalse: 3", NOT_BETWEEN_EXPRESSION, {"a": "3"}, None, False),
    ("isNullTrue", IS_NULL_EXPRESSION, {"abc": "2"}, None, True),
    ("isNullFalse", IS_NULL_EXPRESSION, {"a": "2"}, None, False),
    ("isNotNullTrue", IS_NOT_NULL_EXPRESSION, {"a": "2"}, None, True),
    ("isNotNullFalse", IS_NOT_NULL_EXPRESSION, {"abc": "2"}, None, False),
]


@pytest.mark.parametrize("case,expression,properties,tag,selected", EXPRESSION_TEST, ids=[c[0] for c in EXPRESSION_TEST])
def test_rocketmq_expression_test(case, expression, properties, tag, selected):
    assert MessageSelector.by_sql(expression).matches(properties, tag) is selected


# -- ParserTest.java -------------------------------------------------------------------------

PARSER_VALID = [
    AND_EXPRESSION, OR_EXPRESSION, IN_EXPRESSION,
    "(a not in ('6', '4', '5')) or (b in ('3', '4', '5'))",
    "(a between 2 and 10) AND (b not between 6 and 9)",
    "a is null", "a is not null",
    "a <= now",  # NOW is no keyword of the grammar: a property named now
    "a=3 and b contains 'xxx' and c not contains 'xxx'",
]

_HUGE_FLOAT = "1" + "1" * 51 * 2048 + "." + "1" * 51 * 2048  # testParse_floatOverFlow's literal

#: (Java test, expression, position of the problem)
PARSER_INVALID = [
    ("testParse_invalid", "a and between 2 and 10", 6),
    ("testParse_decimalOverFlow", "a > 100000000000000000000000", 4),
    ("testParse_floatOverFlow", "a > " + _HUGE_FLOAT, 4),
    ("testParse_illegalBetween", " a between 10 and 0", 11),
]


@pytest.mark.parametrize("expression", PARSER_VALID)
def test_rocketmq_parser_test_valid(expression):
    assert MessageSelector.by_sql(expression).kind == "SQL92"


@pytest.mark.parametrize("case,expression,position", PARSER_INVALID, ids=[c[0] for c in PARSER_INVALID])
def test_rocketmq_parser_test_invalid(case, expression, position):
    with pytest.raises(SelectorSyntaxError) as caught:
        MessageSelector.by_sql(expression)
    assert caught.value.position == position


def test_parser_test_equals_blank_insensitive():
    """testEquals: extra blanks make the same expression (here: the same selections)."""
    spaced, other = MessageSelector.by_sql("a=3  and    b<>4 And c>5 AND d<=4"), MessageSelector.by_sql(OR_EXPRESSION)
    plain = MessageSelector.by_sql(AND_EXPRESSION)
    contexts = [{"a": "3", "b": "5", "c": "6", "d": "1"}, {"a": "3", "b": "4", "c": "6", "d": "1"},
                {"a": "4", "b": "5", "c": "6", "d": "1"}, {"a": "3", "b": "5", "c": "6"}, {}]
    assert [spaced.matches(c) for c in contexts] == [plain.matches(c) for c in contexts] == [True, False, False, False, False]
    assert [other.matches(c) for c in contexts] != [plain.matches(c) for c in contexts]


# -- LogicExpressionTest.java ---------------------------------------------------------------

#: (left, right, AND, OR); None is SQL's UNKNOWN
LOGIC_TRUTH_TABLE = [
    (True, True, True, True), (True, False, False, True), (True, None, None, True),
    (False, True, False, True), (False, False, False, False), (False, None, False, None),
    (None, True, None, True), (None, False, False, None), (None, None, None, None),
]


def _operand(name: str, value: bool | None) -> dict[str, str]:
    """``name = '1'`` is TRUE, FALSE or UNKNOWN (the property absent)."""
    return {} if value is None else {name: "1" if value else "0"}


@pytest.mark.parametrize("left,right,expected_and,expected_or", LOGIC_TRUTH_TABLE)
def test_rocketmq_logic_truth_table(left, right, expected_and, expected_or):
    context = {**_operand("l", left), **_operand("r", right)}
    for op, expected in (("AND", expected_and), ("OR", expected_or)):
        condition = f"l = '1' {op} r = '1'"
        # only TRUE selects (testMatchesTreatsUnknownAsFalse); NOT tells FALSE (-> TRUE) from UNKNOWN (-> UNKNOWN)
        assert MessageSelector.by_sql(condition).matches(context) is (expected is True)
        assert MessageSelector.by_sql(f"NOT ({condition})").matches(context) is (expected is False)


def test_rocketmq_logic_short_circuits():
    """A right operand that would throw is not evaluated after a deciding left operand."""
    throws = {"x": "not a number"}  # x > 1 throws in RocketMQ: the message is not delivered
    assert MessageSelector.by_sql("NOT (l = '1' AND x > 1)").matches({"l": "0", **throws})  # testAndShortCircuitsOnFalseLeft
    assert MessageSelector.by_sql("l = '1' OR x > 1").matches({"l": "1", **throws})  # testOrShortCircuitsOnTrueLeft
    # testAndEvaluatesRightWhenLeftNotFalse / testOrEvaluatesRightWhenLeftNotTrue: the throw decides
    assert not MessageSelector.by_sql("NOT (l = '1' AND x > 1)").matches({"l": "1", **throws})
    assert not MessageSelector.by_sql("l = '1' OR x > 1 OR TRUE").matches({"l": "0", **throws})
    assert MessageSelector.by_sql("l = '1' OR x > 1").matches({"l": "0", "x": "5"})


# -- RocketMQ's semantics, read off its classes ------------------------------------------------

#: (rule, expression, properties, tag, selected)
SEMANTICS = [
    # ComparisonExpression.evaluate / doCreateEqual: NULL handling
    ("absent property: comparison unknown", "NOT (a > 1)", {}, None, False),
    ("absent property: <> unknown", "a <> 'x'", {}, None, False),
    ("absent property: = unknown", "NOT (a = 'x')", {}, None, False),
    ("literal = absent property is FALSE", "NOT ('x' = a)", {}, None, True),
    ("both properties absent are equal", "a = b", {}, None, True),
    ("present <> absent is TRUE", "a <> b", {"a": "1"}, None, True),
    # __compare: a property is read as the literal beside it is typed
    ("int literal: property read with Integer.valueOf", "a > 3", {"a": "3.5"}, None, False),
    ("int literal: unreadable value throws, NOT does not help", "NOT (a > 3)", {"a": "3.5"}, None, False),
    ("double literal: Double.valueOf", "a > 3.0", {"a": "3.5"}, None, True),
    ("int literal: beyond an int throws", "a > 5", {"a": "3000000000"}, None, False),
    ("long literal: Long.valueOf", "a > 3000000000", {"a": "4000000000"}, None, True),
    ("L suffix", "a = 5L", {"a": "5"}, None, True),
    ("int: sign allowed", "a > 5", {"a": "+7"}, None, True),
    ("int: no blanks", "a > 5", {"a": " 7"}, None, False),
    ("int: no underscores", "a > 5", {"a": "1_0"}, None, False),
    ("int: Unicode decimal digits (Character.digit)", "a > 5", {"a": "\u0667"}, None, True),
    ("double: trimmed", "a > 1.5", {"a": " 2.5 "}, None, True),
    ("double: f suffix", "a > 1.5", {"a": "2.5f"}, None, True),
    ("double: hex", "a > 1.5", {"a": "0x1p3"}, None, True),
    ("double: Infinity", "a > 1.5", {"a": "Infinity"}, None, True),
    ("double: not Python's inf", "a > 1.5", {"a": "inf"}, None, False),
    ("double: no underscores", "a > 1.5", {"a": "1_0.5"}, None, False),
    ("double: NaN is above everything (Double.compare)", "a > 1.5", {"a": "NaN"}, None, True),
    ("double: NaN is not below", "a < 1.5", {"a": "NaN"}, None, False),
    ("double: NaN is not equal", "a = 1.5", {"a": "NaN"}, None, False),
    ("two properties: > compares doubles", "a > b", {"a": "10", "b": "9"}, None, True),
    ("two properties: = compares strings", "a = b", {"a": "1.0", "b": "1"}, None, False),
    ("two properties: > throws on a non-number", "a > b", {"a": "x", "b": "1"}, None, False),
    ("literal first: 5 < a is a > 5", "5 < a", {"a": "7"}, None, True),
    ("literal first: 'x' = a", "'x' = a", {"a": "x"}, None, True),
    ("Boolean.valueOf: any case", "a = TRUE", {"a": "TRUE"}, None, True),
    ("Boolean.valueOf: other text is false", "a = TRUE", {"a": "yes"}, None, False),
    ("Boolean.valueOf: other text equals FALSE", "a = FALSE", {"a": "yes"}, None, True),
    ("Boolean.valueOf: <>", "a <> TRUE", {"a": "True"}, None, False),
    ("Boolean.valueOf: against a condition", "a = (b = '1')", {"a": "TRUE", "b": "1"}, None, True),
    ("Boolean.valueOf: TAGS", "TAGS = FALSE", {}, "tRuE", False),
    ("TRUE = property throws (ClassCastException)", "TRUE = a", {"a": "true"}, None, False),
    ("TRUE = absent property is FALSE", "NOT (TRUE = a)", {}, None, True),
    ("negative literal", "a > -5", {"a": "-3"}, None, True),
    ("negative bounds", "a BETWEEN -5 AND 5", {"a": "0"}, None, True),
    ("negated string is NULL", "NOT (a > -'x')", {"a": "1"}, None, False),
    ("NOT BETWEEN does not check its bounds' order", "a NOT BETWEEN 10 AND 0", {"a": "5"}, None, True),
    ("mixed bounds: int then double", "a BETWEEN 1 AND 2.5", {"a": "2"}, None, True),
    ("mixed bounds: the int side throws on a decimal", "a BETWEEN 1 AND 2.5", {"a": "1.5"}, None, False),
    # UnaryExpression: NOT, IN, property as a condition
    ("NOT binds tighter than = ((NOT a) = '1')", "NOT a = '1'", {"a": "2"}, None, False),
    ("NOT over a parenthesised comparison", "NOT (a = '1')", {"a": "2"}, None, True),
    ("a property alone is never TRUE", "a", {"a": "true"}, None, False),
    ("NOT property: FALSE negated", "NOT a", {"a": "true"}, None, True),
    ("NOT absent property: unknown", "NOT a", {}, None, False),
    ("IN: absent property unknown", "NOT (a IN ('x'))", {}, None, False),
    ("NOT IN: absent property unknown", "a NOT IN ('x')", {}, None, False),
    ("IN: strings only, exact", "a IN ('1')", {"a": "1.0"}, None, False),
    # ComparisonExpression: CONTAINS / STARTSWITH / ENDSWITH
    ("CONTAINS", "a CONTAINS 'b'", {"a": "abc"}, None, True),
    ("CONTAINS: no", "a CONTAINS 'b'", {"a": "xyz"}, None, False),
    ("CONTAINS: absent property is FALSE", "NOT (a CONTAINS 'b')", {}, None, True),
    ("NOT CONTAINS", "a NOT CONTAINS 'b'", {"a": "xyz"}, None, True),
    ("NOT CONTAINS: absent property is FALSE", "a NOT CONTAINS 'b'", {}, None, False),
    ("CONTAINS '' is FALSE", "a CONTAINS ''", {"a": "abc"}, None, False),
    ("NOT CONTAINS '' is FALSE", "a NOT CONTAINS ''", {"a": "abc"}, None, False),
    ("STARTSWITH", "a STARTSWITH 'ab'", {"a": "abc"}, None, True),
    ("STARTSWITH: no", "a STARTSWITH 'ab'", {"a": "cab"}, None, False),
    ("NOT STARTSWITH", "a NOT STARTSWITH 'ab'", {"a": "cab"}, None, True),
    ("ENDSWITH", "a ENDSWITH 'bc'", {"a": "abc"}, None, True),
    ("NOT ENDSWITH", "a NOT ENDSWITH 'bc'", {"a": "abc"}, None, False),
    ("ENDSWITH: case-sensitive", "a endswith 'BC'", {"a": "abc"}, None, False),
    ("TAGS STARTSWITH", "TAGS STARTSWITH 'order'", {}, "order-paid", True),
    # BooleanConstantExpression
    ("TRUE selects all", "TRUE", {}, None, True),
    ("FALSE selects none", "FALSE", {"a": "1"}, None, False),
    ("NULL selects none", "NULL", {}, None, False),
    ("NOT NULL is unknown", "NOT NULL", {}, None, False),
    ("NOT FALSE", "NOT FALSE", {}, None, True),
    # the grammar and its lexer
    ("keywords in any case", "a iS nOt NuLl AnD b In ('1')", {"a": "x", "b": "1"}, None, True),
    ("names are case-sensitive", "A = '1'", {"a": "1"}, None, False),
    ("comments skipped", "a = '1' /* note */ AND b = '2' -- trailing\n", {"a": "1", "b": "2"}, None, True),
    ("names with $ and _", "$a_1 = 'x'", {"$a_1": "x"}, None, True),
    ("'' is one quote", "a = 'it''s'", {"a": "it's"}, None, True),
    ("leading-dot and exponent doubles", "a > .5 AND b < 5E3", {"a": "0.75", "b": "4999"}, None, True),
    ("unary plus", "a > +5", {"a": "6"}, None, True),
    # TAGS is the message's tag
    ("TAGS IN", "TAGS IN ('A', 'B')", {}, "B", True),
    ("TAGS IN: no tag", "TAGS IN ('A', 'B')", {}, None, False),
    ("TAGS IS NULL: no tag", "TAGS IS NULL", {}, None, True),
    ("TAGS ignores a property of that name", "TAGS = 'A'", {"TAGS": "A"}, None, False),
    ("tags (lower case) is a plain property", "tags = 'A'", {"tags": "A"}, None, True),
]


@pytest.mark.parametrize("rule,expression,properties,tag,selected", SEMANTICS, ids=[c[0] for c in SEMANTICS])
def test_rocketmq_semantics(rule, expression, properties, tag, selected):
    assert MessageSelector.by_sql(expression).matches(properties, tag) is selected


# -- refused expressions: where and what -----------------------------------------------------------

#: (expression, position, words the message must contain)
SYNTAX_ERRORS = [
    ("", 0, "expected a property name"),
    ("   ", 3, "found the end of the expression"),
    ("a = ", 4, "expected a property name"),
    ("a > 'x'", 4, "compares numbers"),
    ("a >= TRUE", 5, "compares numbers"),
    ("a < NULL", 4, "compares numbers"),
    ("(a = 1) > 2", 1, "not conditions"),
    ("a > 1 > 2", 0, "not conditions"),
    ("a = NULL", 4, "use IS NULL"),
    ("NULL <> a", 0, "use IS NULL"),
    ("TRUE = 1", 7, "TRUE cannot be compared with 1"),
    ("a BETWEEN 'x' AND 'y'", 10, "compares numbers"),
    ("a BETWEEN 1 AND 'y'", 10, "cannot be compared"),
    ("a BETWEEN NULL AND 3", 10, "cannot be NULL"),
    ("a BETWEEN 2", 11, "expected AND between the bounds of BETWEEN"),
    ("3", 0, "expected a condition"),
    ("'x'", 0, "expected a condition"),
    ("a = 1 AND 3", 10, "expected a condition"),
    ("NOT 3", 4, "expected a condition"),
    ("-a", 0, "expected a condition"),
    ("a IN ()", 6, "expected a 'string' in the IN list"),
    ("a IN (1)", 6, "expected a 'string' in the IN list"),
    ("a IN 'x'", 5, "expected '(' after IN"),
    ("a NOT IN ('x' 'y')", 14, "expected ',' or ')' in the NOT IN list"),
    ("'x' IN ('x')", 0, "IN needs a property name"),
    ("a CONTAINS 1", 11, "expected a 'string' after CONTAINS"),
    ("a NOT STARTSWITH b", 17, "expected a 'string' after STARTSWITH"),
    ("a NOT LIKE 'x'", 6, "expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT"),
    ("a IS 1", 5, "expected NULL or NOT NULL after IS"),
    ("a IS NOT 1", 9, "expected NULL after IS NOT"),
    ("(a = 1", 6, "expected ')' to close the '(' at position 0"),
    ("a = 1)", 5, "expected an operator, AND, OR or the end of the expression"),
    ("a b", 2, "found the name b"),
    ("a = 07", 5, "found the number 7"),  # JavaCC lexes 07 as 0 then 7
    ("a = 1 -- no line end", 6, "found '-'"),
    ("a = 1 /* open", 6, "comment '/*' is not closed"),
    ("a = 'open", 4, "string is never closed"),
    ("a ! 1", 2, "unexpected character '!'"),
    ("a.b = 1", 1, "unexpected character '.'"),
    ("a = \"x\"", 4, "unexpected character '\"'"),
    ("a > 1e400", 4, "beyond a Java double"),
    ("a > 0.0", 4, "below Double.MIN_VALUE"),
    ("a > 1e-400", 4, "below Double.MIN_VALUE"),
    ("a > 9223372036854775808", 4, "beyond a Java long"),
    ("a AND OR b", 6, "found OR"),
]


@pytest.mark.parametrize("expression,position,words", SYNTAX_ERRORS, ids=[repr(c[0]) for c in SYNTAX_ERRORS])
def test_refused_expressions_name_the_position_and_the_expectation(expression, position, words):
    with pytest.raises(SelectorSyntaxError) as caught:
        MessageSelector.by_sql(expression)
    error = caught.value
    assert (error.expression, error.position) == (expression, position)
    assert words in error.reason and f"at position {position}, " in str(error)


def test_longest_values_still_parse():
    assert MessageSelector.by_sql("a = 9223372036854775807").matches({"a": "9223372036854775807"})
    assert MessageSelector.by_sql("a > 4.9E-324").matches({"a": "1"})  # Double.MIN_VALUE itself is accepted


def test_deep_nesting_is_refused_not_a_crash():
    with pytest.raises(SelectorSyntaxError, match="nested too deeply"):
        MessageSelector.by_sql("(" * 5000 + "a = 1" + ")" * 5000)


def test_selector_syntax_error_is_a_subscription_expression_error():
    with pytest.raises(SelectorSyntaxError) as caught:
        MessageSelector.by_sql("a >")
    assert isinstance(caught.value, TagExpressionError)
    assert isinstance(caught.value, RocketKafkaError) and isinstance(caught.value, ValueError)
    assert str(caught.value).startswith("bad SQL92 expression 'a >': at position 3, expected")


def test_non_string_expression_is_refused():
    with pytest.raises(SelectorSyntaxError, match="must be a string"):
        MessageSelector.by_sql(42)  # type: ignore[arg-type]


# -- the API ------------------------------------------------------------------------------------

def test_by_tag_keeps_tag_filter_semantics_and_ignores_properties():
    both = MessageSelector.by_tag("TagA || TagB")
    assert (both.kind, both.expression) == ("TAG", "TagA || TagB")
    assert [both.matches({"TAGS": "TagA"}, tag) for tag in ("TagA", "TagB", "TagC", None)] == [True, True, False, False]
    every = MessageSelector.by_tag("*")
    assert every.matches({}, None) and every.matches({}, "X")
    assert MessageSelector.by_tag(None).expression == "*" and MessageSelector.by_tag(None).matches(None)
    with pytest.raises(TagExpressionError, match="bad tag expression") as caught:
        MessageSelector.by_tag("A ||")
    assert not isinstance(caught.value, SelectorSyntaxError)


def test_by_sql_keeps_the_expression_as_given():
    s = MessageSelector.by_sql("  a IS NULL ")
    assert (s.kind, s.expression) == ("SQL92", "  a IS NULL ")
    assert repr(s) == "MessageSelector.by_sql('  a IS NULL ')"
    assert s.matches(None) and s.matches({}, None)


def test_selectors_compare_by_kind_and_expression():
    assert MessageSelector.by_sql("a = '1'") == MessageSelector.by_sql("a = '1'")
    assert hash(MessageSelector.by_sql("a = '1'")) == hash(MessageSelector.by_sql("a = '1'"))
    assert MessageSelector.by_sql("TRUE") != MessageSelector.by_tag("TRUE")
    assert len({MessageSelector.by_tag("A"), MessageSelector.by_tag("A"), MessageSelector.by_sql("TRUE")}) == 2


def test_evaluation_never_parses(monkeypatch):
    s = MessageSelector.by_sql("a > 5 AND b = 'x' AND c IN ('p', 'q') AND TAGS STARTSWITH 'T'")

    def no_lexing(expression):
        raise AssertionError("a message was evaluated by parsing the expression again")
    monkeypatch.setattr(selector_module, "_tokenize", no_lexing)
    assert s.matches({"a": "7", "b": "x", "c": "q"}, "Tag")
    assert not s.matches({"a": "7", "b": "y", "c": "q"}, "Tag")


WEIRD_VALUES = ["", " ", "-", "+", ".", "e5", "1e", "0x", "0x1", "NaN ", "nan", "Infinityd", "\x00", "\u00a01",
                "\ud800", "9" * 5000, "1" * 30, "--1", "١٢", "true", "0.0", "-0.0", "1,5"]
PROBES = ["a > 5", "a >= 5.5", "a = 3000000000", "a <= b", "a = TRUE", "a BETWEEN -1 AND 1", "a IN ('x')",
          "a CONTAINS 'x'", "a IS NULL", "NOT (a < 2.5)", "a = b"]


@pytest.mark.parametrize("probe", PROBES)
def test_matches_never_raises_on_property_values(probe):
    s = MessageSelector.by_sql(probe)
    for value in WEIRD_VALUES:
        assert s.matches({"a": value, "b": value}, value) in (True, False)


def test_negative_zero_and_nan_order_as_java_doubles():
    """Two properties compared by > use Double.compare: -0.0 < 0.0 and NaN above +Infinity."""
    greater = MessageSelector.by_sql("a > b")
    assert greater.matches({"a": "0.0", "b": "-0.0"}) and not greater.matches({"a": "-0.0", "b": "0.0"})
    assert greater.matches({"a": "NaN", "b": "Infinity"}) and not greater.matches({"a": "NaN", "b": "NaN"})


def test_docstring_examples_hold():
    assert doctest.testmod(selector_module).failed == 0
