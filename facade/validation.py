"""One-line validation errors: every refused field and why, never the value given (it may be a secret).

pydantic's own message spans several lines and quotes the input -- a Redis URL with its
password, a SASL setting -- so settings and options errors are summarised here instead.
"""

from __future__ import annotations

from pydantic import ValidationError

from rocketkafka.logs import redact_url


def validation_summary(exc: ValidationError, what: str) -> str:
    """One line naming every field pydantic refused and why (never the values given, which may be secrets).

    >>> from pydantic import BaseModel
    >>> class M(BaseModel): port: int
    >>> try: M(port="x")
    ... except ValidationError as e: print(validation_summary(e, "bad M"))
    bad M: port: Input should be a valid integer, unable to parse string as an integer
    """
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in error["loc"])  # empty for a check of several fields together
        problem = redact_url(str(error["msg"]).removeprefix("Value error, "))
        problems.append(f"{where}: {problem}" if where else problem)
    return f"{what}: {'; '.join(problems)}"
