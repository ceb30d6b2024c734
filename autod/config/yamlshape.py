"""What a config's YAML may look like before its values are built: nested at most MAX_DEPTH levels (PyYAML
builds a document recursively: a file nested thousands deep would end in RecursionError), every key a
name (a date, number or boolean as a key is what an unquoted `2024-01-01:` or `on:` becomes), no key
given twice (YAML keeps the last silently), no NUL character in any text, and no number too long to read
(Python refuses integers past 4300 digits). Each problem comes back as (line, field, what is wrong); key
names the operator wrote are shown through `autod.config.keynames`."""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from autod.config.keynames import shown_key

__all__ = ["MAX_DEPTH", "MAX_DIGITS", "Shape", "depth_problem", "node_problem"]

MAX_DEPTH = 32  # the deepest real config nests under 8 levels
MAX_DIGITS = 100  # far past any count, size or timeout; far below Python's int-from-text limit
_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_KIND = {"tag:yaml.org,2002:timestamp": "a date", "tag:yaml.org,2002:int": "a number",
         "tag:yaml.org,2002:float": "a number", "tag:yaml.org,2002:bool": "a boolean (yes/no/on/off)",
         "tag:yaml.org,2002:null": "null (~ or nothing)"}

_SHOWN = {"tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null"}

Shape = tuple[int, str, str]  # (line, field, what is wrong)


@dataclass
class _Level:
    mapping: bool
    name: str
    expect_key: bool = True
    index: int = 0
    key: str = ""
    names: list[str] = field(default_factory=list)


def _field(stack: list[_Level]) -> str:
    names = [lv.name for lv in stack[1:] if lv.name]
    return ".".join(names[:4]) + ("…" if len(names) > 4 else "") or "(top level)"


def depth_problem(text: str) -> Shape | None:
    """The first collection nested past MAX_DEPTH, read from the parser's events (which keep their own
    stack: no recursion), or None. A file that does not parse is the loader's to report."""
    stack: list[_Level] = []
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                stack.pop()
                continue
            if not isinstance(event, yaml.NodeEvent):
                continue
            name = ""
            if stack:
                top = stack[-1]
                if top.mapping:
                    if top.expect_key:
                        top.key = str(getattr(event, "value", "?"))
                    name = shown_key(top.key)
                    top.expect_key = not top.expect_key
                else:
                    name, top.index = str(top.index), top.index + 1
            if isinstance(event, yaml.CollectionStartEvent):
                stack.append(_Level(isinstance(event, yaml.MappingStartEvent), name))
                if len(stack) > MAX_DEPTH:
                    return (event.start_mark.line + 1, _field(stack[:-1]),
                            f"nested deeper than {MAX_DEPTH} levels")
    except yaml.YAMLError:
        return None
    return None


def node_problem(root: yaml.Node | None) -> Shape | None:
    """The first key given twice, key that is not a name, or number too long, in a composed document."""
    stack: list[tuple[yaml.Node, str]] = [(root, "")] if root is not None else []
    walked: set[int] = set()  # an alias is the same node again: each is looked at once (no loop, no bomb)
    while stack:
        node, where = stack.pop()
        if id(node) in walked:
            continue
        walked.add(id(node))
        here = (node.start_mark.line + 1, where.rstrip(".") or "(top level)")
        if isinstance(node, yaml.ScalarNode) and node.tag == _INT and len(node.value) > MAX_DIGITS:
            return (*here, f"a number of {len(node.value)} characters (at most {MAX_DIGITS})")
        if isinstance(node, yaml.ScalarNode) and "\0" in node.value:
            return (*here, "holds a NUL character (\\0): no path, command or name can")
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key_node, value in node.value:
                line = key_node.start_mark.line + 1
                if key_node.tag.endswith(":merge"):
                    stack.append((value, where))
                    continue
                if not isinstance(key_node, yaml.ScalarNode):
                    return (line, where.rstrip(".") or "(top level)",
                            "a key must be a name, not a list or mapping")
                name = f"{where}{shown_key(key_node.value)}"
                if key_node.tag in _SHOWN:  # a date, a boolean or null: never a secret pasted as a key
                    name = f"{where}{key_node.value}"
                if key_node.tag != _STR:
                    kind = _KIND.get(key_node.tag, "not text")
                    return line, name, f"a key must be a name; YAML reads this one as {kind} (quote it)"
                if key_node.value in seen:
                    return line, name, f"given twice (first on line {seen[key_node.value]})"
                seen[key_node.value] = line
                stack.append((value, f"{name}."))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{where}{i}.") for i, item in enumerate(node.value))
    return None
