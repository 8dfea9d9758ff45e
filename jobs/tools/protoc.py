"""Compiles the .proto files under protos/ into one self-contained FileDescriptorSet.

`make protos` (and so `make run` / `make test`) runs this; daggers point their schema_registry at the
output. The set is rebuilt only when a .proto file is newer than it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jobs.project import BUILD_DIR, PROJECT_ROOT

DEFAULT_PROTO_ROOT = PROJECT_ROOT / "protos"
DEFAULT_OUTPUT = BUILD_DIR / "protos" / "descriptor_set.pb"


class ProtoCompileError(RuntimeError):
    """protoc rejected a .proto file; the message carries protoc's own diagnostics."""


def compile_descriptor_set(
    proto_root: Path = DEFAULT_PROTO_ROOT, output: Path = DEFAULT_OUTPUT, force: bool = False
) -> Path:
    import grpc_tools
    from grpc_tools import protoc

    sources = sorted(path.relative_to(proto_root).as_posix() for path in proto_root.rglob("*.proto"))
    if not sources:
        raise ProtoCompileError(f"no .proto files under {proto_root}")
    newest = max((proto_root / source).stat().st_mtime for source in sources)
    if not force and output.exists() and output.stat().st_mtime >= newest:
        return output
    output.parent.mkdir(parents=True, exist_ok=True)
    well_known_types = Path(grpc_tools.__file__).parent / "_proto"
    arguments = [
        "protoc",
        f"-I{proto_root}",
        f"-I{well_known_types}",
        f"--descriptor_set_out={output}",
        "--include_imports",
        *sources,
    ]
    if protoc.main(arguments) != 0:
        raise ProtoCompileError(f"protoc failed for {proto_root} (see the messages above)")
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--proto-root", type=Path, default=DEFAULT_PROTO_ROOT)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    args = parser.parse_args(argv)
    try:
        path = compile_descriptor_set(args.proto_root, args.output, args.force)
    except ProtoCompileError as error:
        print(error, file=sys.stderr)
        return 1
    print(f"descriptor set: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
