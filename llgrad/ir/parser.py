"""Read the IR text form (see `printer`) back into a `Graph`.

Every node goes through `make_node`, so the parser re-runs each op's attribute check and
shape rule and then checks that the printed type is the inferred one: text that parses is
a well-typed graph. Errors are `ParseError`s that give the line and column, quote the line
and point at the offending token.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from . import registry
from .dtypes import ALL as ALL_DTYPES
from .dtypes import DType, from_name
from .graph import Graph, Node, make_node
from .printer import format_value
from .registry import Attr, AttrKind, OpDef
from .types import TensorType

__all__ = ["parse", "ParseError"]


class ParseError(ValueError):
    """Malformed or ill-typed IR text; `line` and `column` are 1-based."""

    def __init__(self, reason: str, line: int, column: int, source_line: str | None = None):
        self.reason = reason
        self.line = line
        self.column = column
        message = f"line {line}, column {column}: {reason}"
        if source_line is not None:
            message += f"\n    {source_line}\n    {' ' * (column - 1)}^"
        super().__init__(message)


# --------------------------------------------------------------------------------------
# Tokens
# --------------------------------------------------------------------------------------

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_STRING = r'"(?:[^"\\\n]|\\.)*"'
_REAL = r"(?:\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+|inf|nan)"
_TOKEN = re.compile(
    "|".join(
        [
            r"(?P<NEWLINE>\n)",
            r"(?P<SPACE>[ \t\r]+)",
            r"(?P<COMMENT>#[^\n]*)",
            rf"(?P<REF>%(?:{_IDENT}|\d+)(?![A-Za-z0-9_]))",
            rf"(?P<GLOBAL>@(?:{_IDENT}|{_STRING}))",
            rf"(?P<STRING>{_STRING})",
            r'(?P<BADSTRING>"[^\n]*)',
            rf"(?P<NUMBER>[+-]?{_REAL}(?:[+-]{_REAL}j|j)?(?![A-Za-z0-9_.]))",
            rf"(?P<IDENT>{_IDENT})",
            r"(?P<PUNCT>[()\[\]{},=:])",
        ]
    )
)
_COMPLEX = re.compile(rf"(?:(?P<re>[+-]?{_REAL})(?P<im>[+-]{_REAL})|(?P<imag>[+-]?{_REAL}))j\Z")


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # NEWLINE COMMENT REF GLOBAL STRING NUMBER IDENT PUNCT EOF
    text: str
    line: int
    column: int


def tokenize(text: str) -> list[Token]:
    """Split `text` into tokens; newlines and comments are tokens (they carry meaning)."""
    lines = text.split("\n")
    tokens: list[Token] = []
    line, line_start, pos = 1, 0, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        column = pos - line_start + 1
        if m is None:
            raise ParseError(f"unexpected character {text[pos]!r}", line, column, lines[line - 1])
        kind = m.lastgroup
        assert kind is not None
        if kind == "BADSTRING":
            raise ParseError("unterminated string", line, column, lines[line - 1])
        if kind != "SPACE":
            tokens.append(Token(kind, m.group(), line, column))
        pos = m.end()
        if kind == "NEWLINE":
            line, line_start = line + 1, pos
    tokens.append(Token("EOF", "", line, pos - line_start + 1))
    return tokens


# --------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------


def parse(text: str) -> Graph:
    """Parse one graph; the result prints back to the same text if `text` came from
    `print_graph` (hand-written text is renumbered into graph order)."""
    return _Parser(text).graph()


_KIND_NAMES = {
    AttrKind.INT: "an int",
    AttrKind.INTS: "a list of ints",
    AttrKind.FLOAT: "a float",
    AttrKind.BOOL: "true or false",
    AttrKind.DTYPE: "a dtype",
    AttrKind.STR: "a string",
    AttrKind.SCALAR: "a number or true/false",
    AttrKind.VALUE: "a number or nested list",
    AttrKind.OPT_INT: "an int or none",
    AttrKind.OPT_INTS: "a list of ints or none",
}
_DTYPE_NAMES = {d.short for d in ALL_DTYPES} | {d.name for d in ALL_DTYPES}


class _Parser:
    def __init__(self, text: str):
        self.lines = text.split("\n")
        self.tokens = tokenize(text)
        self.pos = 0
        self.values: dict[str, Node] = {}  # "%x" -> node
        self.defined_at: dict[str, Token] = {}
        self.body: list[tuple[Node, Token]] = []

    # -- token helpers ------------------------------------------------------------------
    def peek(self) -> Token:
        return self.tokens[self.pos]

    def advance(self) -> Token:
        tok = self.tokens[self.pos]
        if tok.kind != "EOF":
            self.pos += 1
        return tok

    def error(self, tok: Token, reason: str) -> ParseError:
        source = self.lines[tok.line - 1] if tok.line <= len(self.lines) else None
        return ParseError(reason, tok.line, tok.column, source)

    def at(self, kind: str, text: str | None = None) -> bool:
        tok = self.peek()
        return tok.kind == kind and (text is None or tok.text == text)

    def expect(self, kind: str, text: str | None = None, what: str | None = None) -> Token:
        if not self.at(kind, text):
            wanted = what or (repr(text) if text else kind.lower())
            raise self.error(self.peek(), f"expected {wanted}, found {_describe(self.peek())}")
        return self.advance()

    def skip_blank(self) -> None:
        """Skip empty lines and whole-line comments (only a trailing comment is a loc)."""
        while self.at("NEWLINE") or self.at("COMMENT"):
            self.advance()

    def end_of_line(self) -> str | None:
        """An optional trailing `# loc` comment, then the end of the line."""
        loc = None
        if self.at("COMMENT"):
            loc = self.loc(self.advance())
        self.expect("NEWLINE", what="the end of the line")
        return loc

    def loc(self, tok: Token) -> str:
        body = tok.text[1:].strip()
        if body.startswith('"'):
            return self.string(Token("STRING", body, tok.line, tok.column))
        return body

    def string(self, tok: Token) -> str:
        try:
            value = json.loads(tok.text)
        except json.JSONDecodeError as e:
            raise self.error(tok, f"invalid string literal {tok.text}: {e.msg}") from None
        if not isinstance(value, str):
            raise self.error(tok, f"invalid string literal {tok.text}")
        return value

    # -- graph --------------------------------------------------------------------------
    def graph(self) -> Graph:
        self.skip_blank()
        self.expect("IDENT", "graph", what="'graph'")
        name_tok = self.expect("GLOBAL", what="a graph name '@name'")
        name = name_tok.text[1:]
        if name.startswith('"'):
            name = self.string(Token("STRING", name, name_tok.line, name_tok.column + 1))
        params = self.params()
        self.expect("PUNCT", "{")
        if self.at("COMMENT"):
            self.advance()
        self.expect("NEWLINE", what="the end of the line after '{'")
        outputs = self.statements()
        self.expect("PUNCT", "}")
        self.skip_blank()
        if not self.at("EOF"):
            raise self.error(
                self.peek(), f"unexpected {_describe(self.peek())} after the graph's closing '}}'"
            )
        g = Graph(name, params, outputs)
        self.check_all_used(g)
        return g

    def params(self) -> list[Node]:
        self.expect("PUNCT", "(")
        params: list[Node] = []
        while True:
            self.skip_blank()
            if self.at("PUNCT", ")"):
                break
            tok = self.expect("REF", what="a parameter '%name' or ')'")
            if tok.text[1:].isdigit():
                raise self.error(
                    tok,
                    f"parameter {tok.text} needs a name that is an "
                    f"identifier (numbers name the graph's other values)",
                )
            self.define(tok)
            self.expect("PUNCT", ":", what="':' and the parameter's type")
            type_ = self.type()[0]
            more = self.at("PUNCT", ",")
            if more:
                self.advance()
            loc = self.loc(self.advance()) if self.at("COMMENT") else None
            node = Node("param", (), (("name", tok.text[1:]),), type_, loc)
            self.values[tok.text] = node
            params.append(node)
            if not more:
                self.skip_blank()
                if not self.at("PUNCT", ")"):
                    raise self.error(
                        self.peek(),
                        f"expected ',' or ')' after a parameter, found {_describe(self.peek())}",
                    )
        self.advance()
        return params

    def define(self, tok: Token) -> None:
        if tok.text in self.defined_at:
            first = self.defined_at[tok.text]
            raise self.error(tok, f"{tok.text} is defined twice (first on line {first.line})")
        self.defined_at[tok.text] = tok

    def statements(self) -> tuple[Node, ...]:
        outputs: tuple[Node, ...] | None = None
        while True:
            self.skip_blank()
            tok = self.peek()
            if tok.kind == "PUNCT" and tok.text == "}":
                if outputs is None:
                    raise self.error(tok, "the graph has no 'return' statement")
                return outputs
            if outputs is not None:
                raise self.error(
                    tok, f"expected '}}' after the return statement, found {_describe(tok)}"
                )
            if tok.kind == "IDENT" and tok.text == "return":
                self.advance()
                outputs = self.returned()
            elif tok.kind == "REF":
                self.node()
            else:
                raise self.error(
                    tok,
                    f"expected a node '%n = op(...) : type' or 'return', found {_describe(tok)}",
                )

    def returned(self) -> tuple[Node, ...]:
        if self.at("PUNCT", "("):
            self.advance()
            refs = []
            while not self.at("PUNCT", ")"):
                refs.append(self.use(self.expect("REF", what="a value '%name'")))
                if not self.at("PUNCT", ")"):
                    self.expect("PUNCT", ",", what="',' or ')'")
            self.advance()
        else:
            refs = [self.use(self.expect("REF", what="a value '%name' or '(' after return"))]
        self.end_of_line()
        return tuple(refs)

    def use(self, tok: Token) -> Node:
        try:
            return self.values[tok.text]
        except KeyError:
            raise self.error(tok, f"unknown value {tok.text}") from None

    # -- nodes --------------------------------------------------------------------------
    def node(self) -> None:
        ref = self.advance()
        self.define(ref)
        self.expect("PUNCT", "=")
        op_tok = self.expect("IDENT", what="an op name")
        opdef = self.opdef(op_tok)
        inputs, attrs = self.arguments(opdef)
        self.expect("PUNCT", ":", what="':' and the node's type")
        type_, type_tok = self.type()
        loc = self.end_of_line()
        if opdef.infer is None:
            raise self.error(
                op_tok, f"{opdef.name}: the op has no shape rule, so it cannot appear in a graph"
            )
        try:
            node = make_node(opdef.name, tuple(inputs), attrs, loc)
        except (TypeError, ValueError, RuntimeError, IndexError, KeyError, OverflowError) as e:
            raise self.error(op_tok, _rule_message(opdef.name, e)) from None
        if node.type != type_:
            raise self.error(
                type_tok,
                f"{opdef.name}: the printed type {type_} does not "
                f"match the type {node.type} that its shape rule "
                f"infers from its inputs",
            )
        self.values[ref.text] = node
        self.body.append((node, ref))

    def opdef(self, tok: Token) -> OpDef:
        if tok.text in registry.OPS:
            return registry.OPS[tok.text]
        close = difflib.get_close_matches(tok.text, list(registry.OPS), n=3)
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        raise self.error(tok, f"unknown op {tok.text!r}{hint}")

    def arguments(self, opdef: OpDef) -> tuple[list[Node], dict[str, Any]]:
        self.expect("PUNCT", "(", what="'(' after the op name")
        inputs: list[Node] = []
        attrs: dict[str, Any] = {}
        specs = {a.name: a for a in opdef.attrs}
        seen: set[str] = set()
        while not self.at("PUNCT", ")"):
            tok = self.peek()
            if tok.kind == "REF":
                if seen:
                    raise self.error(tok, "inputs must come before attributes")
                inputs.append(self.use(self.advance()))
            elif tok.kind == "IDENT":
                self.advance()
                spec = specs.get(tok.text)
                if spec is None:
                    known = ", ".join(specs) or "none"
                    raise self.error(
                        tok, f"{opdef.name} has no attribute {tok.text!r} (its attributes: {known})"
                    )
                if tok.text in seen:
                    raise self.error(tok, f"attribute {tok.text!r} is given twice")
                seen.add(tok.text)
                self.expect("PUNCT", "=", what=f"'=' after {tok.text}")
                value_tok = self.peek()
                value = self.check_kind(opdef, spec, self.literal(), value_tok)
                if value is not None or spec.kind in (AttrKind.OPT_INT, AttrKind.OPT_INTS):
                    attrs[spec.name] = value
            else:
                raise self.error(
                    tok,
                    f"expected an input '%name' or an attribute "
                    f"'name=value', found {_describe(tok)}",
                )
            if not self.at("PUNCT", ")"):
                self.expect("PUNCT", ",", what="',' or ')'")
        self.advance()
        return inputs, attrs

    def type(self) -> tuple[TensorType, Token]:
        tok = self.expect("IDENT", what="a type such as f32[2,3]")
        if tok.text not in _DTYPE_NAMES:
            raise self.error(tok, f"unknown dtype {tok.text!r}")
        dims: list[int] = []
        self.expect("PUNCT", "[", what="'[' and the shape")
        while not self.at("PUNCT", "]"):
            d = self.expect("NUMBER", what="a dimension size")
            if not d.text.isdigit():
                raise self.error(d, f"a dimension size must be a non-negative int, got {d.text}")
            dims.append(int(d.text))
            if not self.at("PUNCT", "]"):
                self.expect("PUNCT", ",", what="',' or ']'")
        self.advance()
        return TensorType(from_name(tok.text), tuple(dims)), tok

    # -- attribute values ---------------------------------------------------------------
    def literal(self) -> Any:
        tok = self.advance()
        if tok.kind == "NUMBER":
            return _number(tok.text)
        if tok.kind == "STRING":
            return self.string(tok)
        if tok.kind == "IDENT":
            if tok.text in ("true", "false"):
                return tok.text == "true"
            if tok.text == "none":
                return None
            if tok.text in _DTYPE_NAMES:
                return from_name(tok.text)
            raise self.error(
                tok,
                f"unknown name {tok.text!r} (a value is a number, "
                f"true/false, none, a string, a dtype or a list)",
            )
        if tok.kind == "PUNCT" and tok.text == "[":
            items = []
            while not self.at("PUNCT", "]"):
                items.append(self.literal())
                if not self.at("PUNCT", "]"):
                    self.expect("PUNCT", ",", what="',' or ']'")
            self.advance()
            return items
        raise self.error(tok, f"expected a value, found {_describe(tok)}")

    def check_kind(self, opdef: OpDef, spec: Attr, v: Any, tok: Token) -> Any:
        """The literal if it has the attribute's kind; None (omit) for a `none` default."""
        k = spec.kind
        if v is None and spec.default is None and not spec.required:
            return None  # an optional attribute left unset prints as `none`
        ok = {
            AttrKind.INT: _is_int(v),
            AttrKind.OPT_INT: v is None or _is_int(v),
            AttrKind.INTS: isinstance(v, list) and all(_is_int(x) for x in v),
            AttrKind.OPT_INTS: v is None or (isinstance(v, list) and all(_is_int(x) for x in v)),
            AttrKind.FLOAT: _is_int(v) or isinstance(v, float),
            AttrKind.BOOL: isinstance(v, bool),
            AttrKind.DTYPE: isinstance(v, DType),
            AttrKind.STR: isinstance(v, str),
            AttrKind.SCALAR: _is_scalar(v),
            AttrKind.VALUE: _is_payload(v),
        }[k]
        if not ok:
            raise self.error(
                tok,
                f"attribute {spec.name!r} of {opdef.name} expects "
                f"{_KIND_NAMES[k]}, got {_spell(v)}",
            )
        return float(v) if k is AttrKind.FLOAT else v

    def check_all_used(self, g: Graph) -> None:
        """A Graph holds only what reaches its outputs; dead text would vanish silently."""
        reached = {id(n) for n in g.nodes}
        for node, ref in self.body:
            if id(node) not in reached:
                raise self.error(
                    ref,
                    f"{ref.text} is not used by any output (a graph holds "
                    f"only nodes that its outputs depend on)",
                )


def _rule_message(op: str, e: Exception) -> str:
    """An op rule's complaint, prefixed with the op's name unless it already says it."""
    reason = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
    return reason if reason.startswith(op) else f"{op}: {reason}"


def _number(text: str) -> int | float | complex:
    if text.endswith("j"):
        m = _COMPLEX.match(text)
        assert m is not None, text
        if m.group("imag") is not None:
            return complex(0.0, _real(m.group("imag")))
        return complex(_real(m.group("re")), _real(m.group("im")))
    if any(c in text for c in ".eEn"):  # 'n' covers inf and nan
        return _real(text)
    return int(text)


def _real(text: str) -> float:
    x = float(text)
    return math.nan if math.isnan(x) else x  # one NaN object, so attrs tuples compare equal


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (bool, int, float, complex))


def _is_payload(v: Any) -> bool:
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, list):
            stack.extend(x)
        elif not _is_scalar(x):
            return False
    return True


def _spell(v: Any) -> str:
    try:
        return format_value(v)
    except TypeError:
        return repr(v)


def _describe(tok: Token) -> str:
    if tok.kind == "EOF":
        return "the end of the text"
    if tok.kind == "NEWLINE":
        return "the end of the line"
    return repr(tok.text)
