"""Every kind of schema finding gets the gateway's own message (gateway/yaml_source.py).

No raw regular expression, no validator-library wording ("oneOf", "schemas listed"), no value of
a secret; the offending value is shown only when it is a short scalar.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gateway.yaml_source import SchemaValidator, load_yaml

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["needed"],
    "properties": {
        "needed": {},
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "step": {"type": "number", "multipleOf": 5},
        "mode": {"enum": ["fast", "safe", False]},
        "version": {"const": 1},
        "name": {"type": "string", "minLength": 1, "maxLength": 8},
        "code": {"type": "string", "minLength": 3},
        "tags": {"type": "array", "minItems": 1, "maxItems": 2, "uniqueItems": True},
        "pair": {"type": "array", "minItems": 2},
        "labels": {"type": "object", "minProperties": 1, "maxProperties": 1},
        "rate": {"$ref": "#/$defs/rate"},
        "slug": {"type": "string", "pattern": "^[a-z]+$"},
        "secret": {"$ref": "#/$defs/secret"},
        "either": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
        "plain_one": {"oneOf": [{"type": "integer"}, {"type": "boolean"}]},
        "overlap": {"oneOf": [{"type": "integer"}, {"minimum": 0}]},
        "shape": {
            "oneOf": [
                {
                    "type": "object",
                    "required": ["kind", "a"],
                    "properties": {"kind": {"const": "a"}, "a": {"type": "string"}},
                },
                {
                    "type": "object",
                    "required": ["kind", "b"],
                    "properties": {"kind": {"const": "b"}, "b": {"type": "integer"}},
                },
            ]
        },
        "never": {"not": {}},
    },
    "$defs": {
        "rate": {
            "x-message": "is not a rate: write N/second, N/minute or N/hour",
            "type": "string",
            "pattern": "^[1-9][0-9]{0,8}/(second|minute|hour)$",
        },
        "secret": {
            "x-message": "must be a secret reference: {env: NAME} or {file: PATH}",
            "x-sensitive": True,
            "oneOf": [
                {
                    "type": "object",
                    "required": ["env"],
                    "additionalProperties": False,
                    "properties": {"env": {"type": "string"}},
                },
                {"type": "string", "minLength": 1},
            ],
        },
    },
}

CASES = [
    ("missing key", "{}", "(top level)", 'required key "needed" is missing'),
    ("unknown key", "extra: 1", "extra", "unknown key"),
    ("type", "count: ten", "count", '"ten" is not an integer'),
    ("minimum", "count: 0", "count", "0 is less than the minimum of 1"),
    ("maximum", "count: 11", "count", "11 is greater than the maximum of 10"),
    ("exclusive minimum", "ratio: 0", "ratio", "0 must be greater than 0"),
    ("exclusive maximum", "ratio: 1", "ratio", "1 must be less than 1"),
    ("multiple of", "step: 7", "step", "7 is not a multiple of 5"),
    ("enum", "mode: slow", "mode", '"slow" is not one of: fast, safe'),
    ("const", "version: 2", "version", "2 is not 1 (the only allowed value)"),
    ("empty string", 'name: ""', "name", '"" is empty'),
    ("long string", "name: abcdefghi", "name", '"abcdefghi" is longer than 8 characters'),
    ("short string", "code: ab", "code", '"ab" is shorter than 3 characters'),
    ("empty list", "tags: []", "tags", "is an empty list"),
    ("too few entries", "pair: [1]", "pair", "has fewer than 2 entries"),
    ("too many entries", "tags: [a, b, c]", "tags", "has more than 2 entries"),
    ("duplicates", "tags: [a, a]", "tags", "lists the same value more than once"),
    ("too few keys", "labels: {}", "labels", "has fewer than 1 keys"),
    ("too many keys", "labels: {a: 1, b: 2}", "labels", "has more than 1 keys"),
    (
        "pattern with x-message",
        "rate: 10 per minute",
        "rate",
        '"10 per minute" is not a rate: write N/second, N/minute or N/hour',
    ),
    (
        "type with x-message",
        "rate: 5",
        "rate",
        "5 is not a rate: write N/second, N/minute or N/hour",
    ),
    (
        "pattern",
        "slug: Not-A-Slug",
        "slug",
        '"Not-A-Slug" does not have the expected form (see the docs)',
    ),
    (
        "oneOf with x-message hides the value",
        "secret: {env: X, file: s3cr3t-value}",
        "secret",
        "must be a secret reference: {env: NAME} or {file: PATH}",
    ),
    (
        "sensitive scalar",
        'secret: ""',
        "secret",
        "must be a secret reference: {env: NAME} or {file: PATH}",
    ),
    ("anyOf", "either: x", "either", '"x" does not match any allowed form (see the docs)'),
    ("oneOf", "plain_one: x", "plain_one", '"x" does not match any allowed form (see the docs)'),
    ("oneOf twice", "overlap: 3", "overlap", "3 matches more than one allowed form (see the docs)"),
    ("discriminated oneOf", "shape: {kind: b}", "shape", 'required key "b" is missing'),
    ("fallback", "never: 1", "never", "1 is not valid here (see the docs)"),
    (
        "long values are cut",
        "count: " + "x" * 80,
        "count",
        '"' + "x" * 59 + '…" is not an integer',
    ),
    ("mappings are not echoed", "count: {a: 1}", "count", "is not an integer"),
]


@pytest.mark.parametrize(("case", "yaml_text", "key", "message"), CASES, ids=[c[0] for c in CASES])
def test_each_kind_of_finding_reads_as_the_gateways_message(
    tmp_path: Path, case: str, yaml_text: str, key: str, message: str
) -> None:
    path = tmp_path / "doc.yaml"
    base = "needed: 1\n" if "needed" not in yaml_text and yaml_text != "{}" else ""
    path.write_text(base + yaml_text + "\n")
    doc = load_yaml(path)
    SchemaValidator(SCHEMA, "the docs").check(doc)
    found = [p.split(": ", 1)[1] for p in doc.problems]
    assert f"{key}: {message}" in found, doc.problems
    for problem in doc.problems:
        assert not re.search(r"\^|\$\"|\[0-9\]|oneOf|anyOf|schemas listed|is not of type", problem)
        assert "s3cr3t" not in problem


def test_the_packaged_schemas_mark_secret_references_sensitive(tmp_path: Path) -> None:
    validator = SchemaValidator.packaged("gateway.schema.json")
    assert validator.schema["$defs"]["secret"]["x-sensitive"] is True
    path = tmp_path / "gateway.yaml"
    path.write_text(
        "resource: https://mcp.example.com/mcp\n"
        "issuer: {url: https://id.example.com, client_id: c,\n"
        "         client_secret: {env: X, file: hunter2}}\n"
        "backend: {url: https://b.example.com/mcp, credential: {type: bearer}}\n"
        "policy: p.yaml\n"
        "limits: {pre_auth_rate: 10 per minute}\n"
    )
    doc = load_yaml(path)
    validator.check(doc)
    found = sorted(p.split(": ", 1)[1] for p in doc.problems)
    assert found == [
        'backend.credential: required key "token" is missing',
        "issuer.client_secret: must be a secret reference: {env: NAME} or {file: PATH} (a plain "
        "string also works, with a warning)",
        'limits.pre_auth_rate: "10 per minute" is not a rate: write N/second, N/minute or '
        "N/hour (null turns the limit off)",
    ]
