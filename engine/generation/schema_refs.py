"""JSON schemas as the grammar compiler takes them: `$ref`s that only lead back to themselves,
and a schema moved under another one's `$defs` with its local `$ref`s still pointing where they did."""

from __future__ import annotations

from engine.errors import RequestError


def moved_under(schema: object, name: str) -> object:
    """`schema` as it reads at `#/$defs/<name>` of another schema: each local `$ref` ("#", "#/$defs/Address")
    re-rooted there ("#/$defs/<name>", "#/$defs/<name>/$defs/Address"). Other refs are left as written."""
    if isinstance(schema, list):
        return [moved_under(item, name) for item in schema]
    if not isinstance(schema, dict):
        return schema
    moved = {key: moved_under(value, name) for key, value in schema.items()}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#"):
        moved["$ref"] = f"#/$defs/{name}{ref[1:]}"
    return moved


def resolve(root: object, ref: str) -> object:
    """The schema a local `$ref` ("#/a/b") points at in `root`, or None where nothing is there."""
    node = root
    for part in ref[1:].split("/")[1:] if ref != "#" else ():
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def check_ref_cycles(root: object, field: str) -> None:
    """400 for a schema that refers to itself before it reads anything (`{"$ref": "#"}`, two `$defs` that name
    each other): no JSON value matches it, and the compiler would accept it."""
    for start in subschemas(root):
        path, seen, node = [], set(), start
        while isinstance(node, dict) and id(node) not in seen:
            seen.add(id(node))
            ref = node.get("$ref")
            if not (isinstance(ref, str) and ref.startswith("#")):
                break
            path.append(ref)
            node = resolve(root, ref)
        else:
            if isinstance(node, dict) and path:
                raise RequestError(f"the JSON schema refers to itself without nesting ($ref {path[-1]!r} leads "
                                   "back to where it started): no value matches it", field)


def subschemas(root: object):
    """Every object in the schema, each once (iteratively)."""
    todo = [root]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            yield item
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
