"""A small GBNF reader for tests, written apart from the grammar generator: it parses the
subset llama.cpp's grammars are made of (rules, string literals with ``\\`` escapes,
character classes, rule references, groups, alternation, ``?``/``*``/``+``) and, for a
grammar without recursion, gives the Python regular expression of exactly the strings the
grammar admits, and random strings drawn from it."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "[": "[", "]": "]"}


@dataclass
class Node:
    kind: str  # lit | cls | ref | seq | alt | rep
    value: object = None
    items: tuple[Node, ...] = ()
    op: str = ""


class Reader:
    def __init__(self, text: str) -> None:
        self.text, self.at = text, 0

    def blank(self) -> None:
        while self.at < len(self.text) and self.text[self.at] in " \t":
            self.at += 1

    def char(self, stop: str) -> str:
        c = self.text[self.at]
        if c == "\\":
            e = self.text[self.at + 1]
            if e == "x":
                self.at += 4
                return chr(int(self.text[self.at - 2 : self.at], 16))
            self.at += 2
            return _ESCAPES[e]
        if c == stop:
            raise ValueError("unexpected end")
        self.at += 1
        return c

    def alt(self) -> Node:
        options = [self.seq()]
        while self.peek() == "|":
            self.at += 1
            options.append(self.seq())
        return options[0] if len(options) == 1 else Node("alt", items=tuple(options))

    def peek(self) -> str:
        self.blank()
        return self.text[self.at] if self.at < len(self.text) else ""

    def seq(self) -> Node:
        items = []
        while self.peek() not in ("", "|", ")", "\n"):
            item = self.atom()
            while self.peek() in ("?", "*", "+"):
                item = Node("rep", items=(item,), op=self.text[self.at])
                self.at += 1
            items.append(item)
        return Node("seq", items=tuple(items))

    def atom(self) -> Node:
        c = self.peek()
        if c == '"':
            self.at += 1
            out = []
            while self.text[self.at] != '"':
                out.append(self.char('"'))
            self.at += 1
            return Node("lit", "".join(out))
        if c == "[":
            self.at += 1
            chars = []
            while self.text[self.at] != "]":
                first = self.char("]")
                if self.text[self.at] == "-" and self.text[self.at + 1] != "]":
                    self.at += 1
                    last = self.char("]")
                    chars.extend(chr(o) for o in range(ord(first), ord(last) + 1))
                else:
                    chars.append(first)
            self.at += 1
            return Node("cls", tuple(chars))
        if c == "(":
            self.at += 1
            inner = self.alt()
            assert self.peek() == ")"
            self.at += 1
            return inner
        name = re.match(r"[A-Za-z][A-Za-z0-9-]*", self.text[self.at :])
        assert name, self.text[self.at :]
        self.at += len(name.group(0))
        return Node("ref", name.group(0))


def parse(grammar: str) -> dict[str, Node]:
    rules = {}
    for line in grammar.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, body = line.split("::=", 1)
        reader = Reader(body)
        rules[name.strip()] = reader.alt()
        assert reader.peek() == "", f"unparsed: {body[reader.at :]!r}"
    return rules


def to_regex(rules: dict[str, Node], node: Node | None = None) -> str:
    node = node or rules["root"]
    if node.kind == "lit":
        return re.escape(str(node.value))
    if node.kind == "cls":
        return "[" + "".join(re.escape(c) for c in node.value) + "]"  # type: ignore[union-attr]
    if node.kind == "ref":
        return f"(?:{to_regex(rules, rules[str(node.value)])})"
    if node.kind == "seq":
        return "".join(to_regex(rules, item) for item in node.items)
    if node.kind == "alt":
        return "(?:" + "|".join(to_regex(rules, item) for item in node.items) + ")"
    return f"(?:{to_regex(rules, node.items[0])}){node.op}"


def accepts(grammar: str, text: str) -> bool:
    return re.fullmatch(to_regex(parse(grammar)), text, flags=re.S) is not None


def draw(rules: dict[str, Node], rng: random.Random, node: Node | None = None) -> str:
    """A random string the grammar admits."""
    node = node or rules["root"]
    if node.kind == "lit":
        return str(node.value)
    if node.kind == "cls":
        return rng.choice(node.value)  # type: ignore[arg-type]
    if node.kind == "ref":
        return draw(rules, rng, rules[str(node.value)])
    if node.kind == "seq":
        return "".join(draw(rules, rng, item) for item in node.items)
    if node.kind == "alt":
        return draw(rules, rng, rng.choice(node.items))
    low = 1 if node.op == "+" else 0
    high = 1 if node.op == "?" else 3
    return "".join(draw(rules, rng, node.items[0]) for _ in range(rng.randint(low, high)))
