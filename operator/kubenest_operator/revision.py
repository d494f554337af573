"""The revision of the desired state a collection gives virtual clusters: what an operator upgrade compares.

The resume check (drift.py) runs a Ready virtual cluster again when the collection that reconciled it differs
from the one the operator now ships. A digest of the files' bytes would count every comment, docstring, module
document and README of a release as a change, and a release would then run every tenant once. This digest
takes what the files mean instead:

- Python: the syntax tree, without docstrings and without the DOCUMENTATION, EXAMPLES and RETURN strings of
  modules, plugins and doc fragments;
- YAML: the data (comments and layout are not part of it), with the prose keys of role argument specs left out;
- Markdown and reStructuredText: nothing; every other file: its bytes.

A syntax tree is dumped as the operator's Python writes it, so an image with another Python minor may count as a
change once. A change to how anything is built or run still changes it, conservatively: such a release runs each Ready
virtual cluster once, one at a time (handlers.py), and the kept manifests (tests/unit/collection/
test_tenant_manifests_stable.py) make those runs roll no pod unless its manifest changed.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

import yaml

ROOTS = ("playbooks", "roles", "plugins")
PROSE_SUFFIXES = {".md", ".rst"}
# Module-level (and doc fragments' class-level) strings that only document.
DOC_STRINGS = {"DOCUMENTATION", "EXAMPLES", "RETURN"}
# Keys of role argument specs (meta/argument_specs.yml) that only document.
# What may open with a docstring.
BODIES = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
PROSE_KEYS = {"description", "short_description", "notes", "author", "version_added", "seealso"}


def desired_state_revision(collection_dir: Path) -> str:
    """The digest of what the playbooks, roles and plugins under `collection_dir` mean, in 32 hex digits."""
    digest = hashlib.sha256()
    for top in ROOTS:
        root = collection_dir / top
        if not root.is_dir():
            continue
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            meaning = file_meaning(path)
            if meaning is None:
                continue
            digest.update(str(path.relative_to(collection_dir)).encode() + b"\0")
            digest.update(hashlib.sha256(meaning).digest())
    return digest.hexdigest()[:32]


def file_meaning(path: Path) -> bytes | None:
    """What a file contributes to the revision; None for prose. A file that does not parse counts by its bytes."""
    if path.suffix in PROSE_SUFFIXES:
        return None
    raw = path.read_bytes()
    try:
        if path.suffix == ".py":
            return python_meaning(raw)
        if path.suffix in (".yml", ".yaml"):
            data = yaml.safe_load(raw)
            if path.parent.name == "meta":
                data = _without_prose(data)
            return json.dumps(data, sort_keys=True, default=str).encode()
    except (SyntaxError, ValueError, yaml.YAMLError):
        pass
    return raw


def python_meaning(source: bytes) -> bytes:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list) or not isinstance(node, BODIES):
            continue
        kept = [statement for statement in body if not _documents(statement)]
        # A body left empty by its docstring still needs a statement to be a body.
        node.body = kept or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False, include_attributes=False).encode()


def _documents(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) \
            and isinstance(statement.value.value, str):
        return True
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        return isinstance(target, ast.Name) and target.id in DOC_STRINGS
    return False


def _without_prose(data):
    if isinstance(data, dict):
        return {key: _without_prose(value) for key, value in data.items() if key not in PROSE_KEYS}
    if isinstance(data, list):
        return [_without_prose(item) for item in data]
    return data
