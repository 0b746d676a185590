"""Reading dbt YAML with line numbers: a thin layer over PyYAML's composed node tree (pure).

``yaml.safe_load`` loses positions; evidence needs them, so dbt files are composed (SafeLoader,
first document) and walked node by node. Merge keys (``<<: *anchor``) are followed.
"""

from __future__ import annotations

import datetime
from typing import Any

import yaml

YamlNode = Any  # yaml.Node (PyYAML ships no type information)


class YamlError(ValueError):
    """The text is not valid YAML."""


def compose(text: str) -> YamlNode | None:
    """The first non-empty document's node tree, or None for an empty text."""
    try:
        for node in yaml.compose_all(text, Loader=yaml.SafeLoader):
            if node is not None:
                return node
    except yaml.YAMLError as error:
        raise YamlError(str(error).replace("\n", " ")) from error
    return None


def is_mapping(node: YamlNode) -> bool:
    return isinstance(node, yaml.MappingNode)


def is_sequence(node: YamlNode) -> bool:
    return isinstance(node, yaml.SequenceNode)


def items(node: YamlNode) -> list[tuple[str, YamlNode]]:
    """A mapping's (key, value node) pairs, merge keys expanded; [] for anything else."""
    if not is_mapping(node):
        return []
    found: list[tuple[str, YamlNode]] = []
    merged: list[tuple[str, YamlNode]] = []
    for key_node, value_node in node.value:
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        if key == "<<":
            sources = value_node.value if is_sequence(value_node) else [value_node]
            for source in sources:
                merged.extend(items(source))
        elif isinstance(key, str):
            found.append((key, value_node))
    own = {key for key, _ in found}
    return found + [(key, value) for key, value in merged if key not in own]


def get(node: YamlNode, key: str) -> YamlNode | None:
    for name, value in items(node):
        if name == key:
            return value
    return None


def seq(node: YamlNode) -> list[YamlNode]:
    return list(node.value) if is_sequence(node) else []


def value(node: YamlNode) -> Any:
    """The node as plain, JSON-ready Python data (dates become ISO strings)."""
    if node is None:
        return None
    try:
        data = yaml.SafeLoader("").construct_document(node)
    except yaml.YAMLError:
        return None
    return jsonable(data)


def text(node: YamlNode) -> str | None:
    """A scalar as a string (numbers and booleans included), else None."""
    if not isinstance(node, yaml.ScalarNode):
        return None
    data = value(node)
    if data is None:
        return None
    return str(data)


def lines(node: YamlNode) -> tuple[int, int]:
    """1-based inclusive line range of a node."""
    start = int(node.start_mark.line) + 1
    end_mark = node.end_mark
    buffer = getattr(end_mark, "buffer", None)
    index = int(getattr(end_mark, "pointer", end_mark.index))
    if isinstance(buffer, str) and 0 <= index <= len(buffer):
        # A block node ends where the next token starts: step back over the blank space
        # (and the line break) in between, so the range ends on the node's last line.
        position = index
        floor = int(getattr(node.start_mark, "pointer", node.start_mark.index))
        while position > floor and buffer[position - 1] in " \t\r\n\0":
            position -= 1
        end = int(end_mark.line) + 1 - buffer.count("\n", position, index)
    else:
        end = int(end_mark.line) + (1 if end_mark.column > 0 else 0)
    return start, max(start, end)


def jsonable(data: Any) -> Any:
    if isinstance(data, dict):
        return {str(key): jsonable(item) for key, item in data.items()}
    if isinstance(data, list | tuple | set):
        return [jsonable(item) for item in data]
    if isinstance(data, datetime.date | datetime.datetime):
        return data.isoformat()
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    if data is None or isinstance(data, str | int | float | bool):
        return data
    return str(data)
