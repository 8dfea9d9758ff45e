"""Protobuf messages found by the names Java gives their generated classes, as Dagger's configs hold them."""

from __future__ import annotations

import re

from google.protobuf.descriptor import Descriptor

from jobs.model.schema_registry import SchemaRegistry


def message_by_java_name(registry: SchemaRegistry, class_name: str) -> Descriptor | None:
    """A message named the way Java names its generated class (what Dagger's configs hold): java_package,
    then the outer class unless java_multiple_files, then the nested names (`$` or `.` between)."""
    wanted = class_name.replace("$", ".")
    for full_name in registry.message_names:
        message = registry.message(full_name)
        options = message.file.GetOptions()
        package = options.java_package or message.file.package
        nested = full_name.removeprefix(f"{message.file.package}.") if message.file.package else full_name
        outer = "" if options.java_multiple_files else f"{java_outer_class(message)}."
        if ".".join(part for part in (package, f"{outer}{nested}") if part) == wanted:
            return message
    return None


def java_outer_class(message: Descriptor) -> str:
    """protoc's outer class name: java_outer_classname, or the file name in CamelCase (+ OuterClass when a
    top-level type has that name)."""
    file = message.file
    if file.GetOptions().java_outer_classname:
        return file.GetOptions().java_outer_classname
    base = file.name.rsplit("/", 1)[-1].removesuffix(".proto")
    words = re.split(r"[^A-Za-z0-9]+", base)
    name = "".join(word[:1].upper() + word[1:] for word in words)
    name = re.sub(r"(\d)([a-z])", lambda match: match.group(1) + match.group(2).upper(), name)
    top_level = {*file.message_types_by_name, *file.enum_types_by_name, *file.services_by_name}
    return f"{name}OuterClass" if name in top_level else name
