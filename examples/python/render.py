"""`memcached-operator render` in Python: every object the operator would own
for the CRs in a YAML file, computed by the same component.

    python render.py -f cr.yaml [-o yaml|json]      (-f - reads stdin)
"""

from __future__ import annotations

import argparse
import json
import re
import sys

import yaml

from memcached_logic import Logic, LogicError, as_json_list


class _Loader(yaml.SafeLoader):
    """YAML 1.2's core types, as the Rust host reads them: PyYAML's YAML 1.1
    would turn `on`/`yes` into booleans and bare dates into datetimes."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-f", "--filename", required=True)
    parser.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    args = parser.parse_args(argv)
    try:
        text = sys.stdin.read() if args.filename == "-" else open(args.filename, encoding="utf-8").read()
        crs = [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except (OSError, yaml.YAMLError) as err:
        print(f"{args.filename}: {err}", file=sys.stderr)
        return 1

    instance = Logic().instance()
    raw: list[str] = []
    failed = False
    for index, cr in enumerate(crs, start=1):
        meta = cr.get("metadata") if isinstance(cr, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        kind = cr.get("kind", "object") if isinstance(cr, dict) else "object"
        what = f"document {index} ({kind}{' ' + name if name else ''})"
        try:
            raw.extend(instance.render(cr))
        except LogicError as err:
            failed = True
            if err.field_errors:
                lines = "\n".join(f"  {e}" for e in err.field_errors)
                print(f"{args.filename}: {what} is invalid:\n{lines}", file=sys.stderr)
            else:
                print(f"{args.filename}: {what}: {err}", file=sys.stderr)
    if failed:
        return 1
    if args.output == "json":
        sys.stdout.write(as_json_list([json.loads(o) for o in raw]))
    else:
        sys.stdout.write(instance.to_yaml("[" + ",".join(raw) + "]"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
