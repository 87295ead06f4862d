"""Validate a document against nastriage's JSON Schema.

Uses the ``jsonschema`` package when installed (it is not a dependency). Otherwise a small
structural checker covering the keywords our schema uses: type, const, enum, properties,
required, additionalProperties (false), items, minItems, minimum, maximum, pattern, anyOf,
$ref to #/$defs. Errors are collected as "path: message" strings.
"""

from __future__ import annotations

import re
from typing import Any

_TYPES: dict[str, Any] = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[name])


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    assert ref.startswith("#/"), f"unsupported $ref {ref}"
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node  # type: ignore[no-any-return]


def _check(root: dict[str, Any], schema: dict[str, Any], value: Any, path: str) -> list[str]:
    errors: list[str] = []
    if "$ref" in schema:
        errors += _check(root, _resolve(root, schema["$ref"]), value, path)
    if "anyOf" in schema:
        options = [_check(root, s, value, path) for s in schema["anyOf"]]
        if all(options):
            errors.append(f"{path}: matches none of anyOf: {options}")
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(value, t) for t in types):
            return [*errors, f"{path}: {value!r} is not of type {types}"]
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: {value!r} != const {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not in {schema['enum']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: {value} < minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: {value} > maximum {schema['maximum']}")
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{path}: missing required key {key!r}")
        props = schema.get("properties", {})
        for key, item in value.items():
            if key in props:
                errors += _check(root, props[key], item, f"{path}.{key}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}: unexpected key {key!r}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        if "items" in schema:
            for i, item in enumerate(value):
                errors += _check(root, schema["items"], item, f"{path}[{i}]")
    return errors


def validate(document: Any, schema: dict[str, Any]) -> list[str]:
    """All validation errors (empty list: valid)."""
    try:
        import jsonschema
    except ImportError:
        return _check(schema, schema, document, "$")
    validator = jsonschema.Draft202012Validator(schema)
    return [
        f"${''.join(f'[{p}]' if isinstance(p, int) else f'.{p}' for p in e.absolute_path)}: "
        f"{e.message}"
        for e in validator.iter_errors(document)
    ]


def validate_structurally(document: Any, schema: dict[str, Any]) -> list[str]:
    """The hand-written checker only (to test it against jsonschema)."""
    return _check(schema, schema, document, "$")
