"""The package's reply types against the server's OpenAPI document (docs/openapi.json, which
the Rust tests keep equal to what `rtemu serve` serves): every dataclass that holds a reply has
a field for each of its schema's properties, of the schema's type, and no field the schema lacks
but the few the package adds itself (listed below). A field the server adds, renames or makes
nullable fails here until the package follows, so the two cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from rtemu import types as rtypes
from rtemu.lab import Lab, LabSummary, Lan, Link, Node

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
Schema = dict[str, Any]


@dataclass(frozen=True)
class Match:
    """A dataclass and the schema it holds: ``renamed`` maps a field to the property it holds
    under another name; ``local`` are fields the package adds (not in the reply)."""

    cls: type
    schema: str
    renamed: dict[str, str] = field(default_factory=dict)
    local: frozenset[str] = frozenset()


MATCHES = [
    Match(rtypes.Percentiles, "Percentiles"),
    Match(rtypes.Histogram, "Histogram"),
    Match(rtypes.Fidelity, "Fidelity"),
    Match(rtypes.Underlay, "Underlay"),
    Match(rtypes.EngineThread, "EngineThread"),
    # `from` is a keyword in Python.
    Match(rtypes.Direction, "Direction", renamed={"from_node": "from", "to_node": "to"}),
    # `links` groups the directions by link.
    Match(rtypes.Stats, "StatsReply", local=frozenset({"links"})),
    Match(rtypes.FinalReport, "FinalReport", local=frozenset({"links"})),
    Match(rtypes.DownResult, "DownReply"),
    # What was run, and where: the request's, kept beside its result.
    Match(rtypes.ExecResult, "ExecReply", local=frozenset({"node", "argv"})),
    Match(rtypes.Interface, "Interface"),
    Match(rtypes.External, "External"),
    Match(rtypes.InterfaceCounters, "InterfaceCounters"),
    Match(rtypes.Detached, "Detached"),
    Match(rtypes.Container, "NodeContainer"),
    Match(rtypes.HostPart, "HostPart"),
    Match(rtypes.HostEngine, "HostEngine"),
    Match(rtypes.MissingStats, "MissingStats"),
    # `lab`: the lab the object belongs to; `_client`: the connection its methods use.
    Match(Node, "Node", local=frozenset({"lab", "_client"})),
    Match(Link, "Link", local=frozenset({"lab", "_client"})),
    Match(Lan, "Lan", local=frozenset({"lab"})),
    Match(Lab, "Lab", local=frozenset({"_client"})),
    Match(LabSummary, "LabSummary", local=frozenset({"_client"})),
]
BY_CLASS = {m.cls: m for m in MATCHES}


def schemas() -> dict[str, Schema]:
    doc: dict[str, Any] = json.loads(DOCUMENT.read_text())
    found: dict[str, Schema] = doc["components"]["schemas"]
    return found


def resolve(schema: Schema, all_schemas: dict[str, Schema]) -> tuple[str | None, Schema]:
    """The name ``schema`` refers to (if it is a reference) and what it says."""
    ref = schema.get("$ref")
    if ref is None:
        return None, schema
    name = ref.removeprefix("#/components/schemas/")
    return name, all_schemas[name]


def object_schema(name: str, all_schemas: dict[str, Schema]) -> tuple[Schema, set[str]]:
    """The properties of object schema ``name`` and those it always has. A ``oneOf`` of objects
    (a reply of several shapes) has every variant's properties, a property in several with the
    union of their types; it always has those every variant requires."""
    schema = all_schemas[name]
    if "oneOf" not in schema:
        return schema["properties"], set(schema.get("required", []))
    properties: dict[str, Schema] = {}
    required: set[str] | None = None
    for variant in schema["oneOf"]:
        _, variant = resolve(variant, all_schemas)
        for key, prop in variant["properties"].items():
            properties[key] = {"oneOf": [properties[key], prop]} if key in properties else prop
        variant_required = set(variant.get("required", []))
        required = variant_required if required is None else required & variant_required
    return properties, required or set()


def nullable(schema: Schema) -> tuple[bool, list[Schema]]:
    """Whether ``schema`` admits null, and the non-null schemas it is a choice of."""
    kind = schema.get("type")
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        one = {**schema, "type": rest[0]} if len(rest) == 1 else {**schema, "type": rest}
        return "null" in kind, [one]
    if "oneOf" in schema:
        null = False
        choices = []
        for choice in schema["oneOf"]:
            n, c = nullable(choice)
            null |= n
            choices += c
        return null, choices
    if kind == "null":
        return True, []
    return False, [schema]


SCALARS: dict[str, type] = {"integer": int, "number": float, "string": str, "boolean": bool}


def mismatch(py: Any, schema: Schema, may_be_absent: bool, all_schemas: dict[str, Schema]) -> str:
    """Why Python type ``py`` does not hold the values ``schema`` admits ('' when it does).
    ``None`` must be allowed exactly when the schema admits null or the property may be absent,
    but for a list, which is empty when its property is absent."""
    null, choices = nullable(schema)
    args = typing.get_args(py)
    py_optional = typing.get_origin(py) in (typing.Union, types.UnionType) and type(None) in args
    if may_be_absent and not null and typing.get_origin(py) is list:
        may_be_absent = False
    if py_optional != (null or may_be_absent):
        return f"{py} but the schema {'admits' if null or may_be_absent else 'never has'} null"
    if py_optional:
        rest = [a for a in args if a is not type(None)]
        py = rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]  # noqa: UP007
    if not choices:
        return f"{py} for a property that is always null"
    # A property that is one of several shapes (a reply's variants) is one type in Python.
    why = [mismatch_one(py, c, all_schemas) for c in choices]
    return next((w for w in why if w), "")


def mismatch_one(py: Any, schema: Schema, all_schemas: dict[str, Schema]) -> str:
    name, schema = resolve(schema, all_schemas)
    origin, args = typing.get_origin(py), typing.get_args(py)
    if isinstance(py, type) and dataclasses.is_dataclass(py):
        match = BY_CLASS.get(py)
        if match is None or name is None or match.schema != name:
            return f"{py.__name__} for schema {name or schema}"
        return ""
    kind = schema.get("type")
    if "enum" in schema:
        if origin is Literal:
            return "" if set(args) == set(schema["enum"]) else f"{py} for enum {schema['enum']}"
        return "" if py is str else f"{py} for enum {schema['enum']}"
    if kind in SCALARS:
        return "" if py is SCALARS[kind] else f"{py} for {kind}"
    if kind == "array":
        if origin is not list:
            return f"{py} for an array"
        return mismatch_one(args[0], schema["items"], all_schemas)
    if kind == "object" and "additionalProperties" in schema:
        if origin is not dict or args[0] is not str:
            return f"{py} for a map"
        return mismatch_one(args[1], schema["additionalProperties"], all_schemas)
    return f"{py} for {schema}"


def hints(match: Match) -> dict[str, Any]:
    """The types of ``match.cls``'s fields that hold the reply, evaluated."""
    module = sys.modules[match.cls.__module__]
    return {
        f.name: eval(f.type, vars(module)) if isinstance(f.type, str) else f.type
        for f in dataclasses.fields(match.cls)
        if f.name not in match.local
    }


@pytest.mark.parametrize("match", MATCHES, ids=lambda m: m.cls.__name__)
def test_fields_are_the_schema_s_properties_with_its_types(match: Match) -> None:
    all_schemas = schemas()
    properties, required = object_schema(match.schema, all_schemas)
    fields = hints(match)
    by_property = {match.renamed.get(name, name): name for name in fields}
    assert set(by_property) == set(properties), (
        f"{match.cls.__name__} holds {sorted(set(by_property) - set(properties))} that schema "
        f"{match.schema} lacks, and lacks {sorted(set(properties) - set(by_property))}"
    )
    wrong = {
        key: why
        for key, prop in properties.items()
        if (why := mismatch(fields[by_property[key]], prop, key not in required, all_schemas))
    }
    assert not wrong, f"{match.cls.__name__} vs {match.schema}: {wrong}"


def test_every_reply_object_of_the_document_has_its_class() -> None:
    # The request bodies are the client's to build; the rest are replies, or parts of one.
    requests = {"ExecRequest", "PartRequest", "ScheduleRequest", "ScheduledChange", "SetRequest"}
    requests |= {"UpRequest", "Stitching"}
    # Read by the client, not kept: its own answer (`ok`), an error's text, the agents' VNIs.
    unkept = {"Ack", "ErrorBody", "Vnis"}
    # The variants of replies of several shapes, matched as a whole.
    variants = {"Stats", "NoEngine", "SpreadStats", "Done"}
    enums = {name for name, s in schemas().items() if "enum" in s}
    held = {m.schema for m in MATCHES}
    assert set(schemas()) - requests - unkept - variants - enums == held


def test_the_checker_sees_drift() -> None:
    """A field of the wrong type, a missing one, and a nullable one taken for never null."""
    all_schemas = schemas()
    direction, _ = object_schema("Direction", all_schemas)
    assert mismatch(int, direction["netem"], False, all_schemas)
    assert mismatch(str | None, direction["buffers"], False, all_schemas)
    assert mismatch(list[int], direction["dropped"], False, all_schemas)
    assert mismatch(dict[str, str], direction["dropped"], False, all_schemas)
    assert not mismatch(dict[str, int], direction["dropped"], False, all_schemas)
    assert mismatch(rtypes.Percentiles, direction["fidelity"], False, all_schemas)
    assert mismatch(str, {"type": "string"}, True, all_schemas)
    assert not mismatch(str | None, {"type": "string"}, True, all_schemas)
    lab_schema, _ = object_schema("Lab", all_schemas)
    statuses = Literal["up", "incomplete", "degraded", "unreadable"]
    assert not mismatch(statuses, lab_schema["status"], False, all_schemas)
    assert mismatch(Literal["up"], lab_schema["status"], False, all_schemas)
