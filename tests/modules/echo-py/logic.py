"""The Echo module's logic, in plain Python: no componentize-py bindings.

app.py adapts these functions to the WIT contract
(wit/controller/controller.wit); test_logic.py runs them under CPython.

Every function takes and returns JSON text, like the contract. A problem is
raised as one of the exceptions below (never anything else: app.py turns
them into the WIT `error` variants), with field errors as (path, message)
pairs.
"""

import json
import os
import re

# --- The module's identity -------------------------------------------------

NAME = "echo-py"
VERSION = "0.1.0"

GROUP = "python.example.c5c3.io"
PARENT_VERSION = "v1"
PARENT_KIND = "Echo"
PARENT_PLURAL = "echoes"
PARENT_API_VERSION = GROUP + "/" + PARENT_VERSION

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
ECHO_LABEL = GROUP + "/echo"

# A ConfigMap's name is the parent's plus this; the parent's name is also a
# label value, which the API server limits to 63 characters.
SUFFIX = "-echo"
MAX_NAME = 63


def _read_crd():
    # componentize-py imports this module at build time and snapshots it, so
    # the file is read then; the component does no file I/O at run time.
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crd.yaml")
    with open(path, encoding="utf-8") as file:
        return file.read()


CRD = _read_crd()


# --- Errors ----------------------------------------------------------------


class LogicError(Exception):
    """Base of the three answers that are not a result."""


class Malformed(LogicError):
    """The text is not JSON, or not the expected shape."""

    def __init__(self, errors):
        super().__init__(errors)
        self.errors = list(errors)


class Invalid(LogicError):
    """The object parsed but breaks the module's rules (all of them listed)."""

    def __init__(self, errors):
        super().__init__(errors)
        self.errors = list(errors)


class Unsupported(LogicError):
    def __init__(self, message):
        super().__init__(message)
        self.message = message


# --- JSON ------------------------------------------------------------------


# JSON nesting deeper than this is refused before parsing: the C parser
# recurses, and in the component (CPython on wasm, a fixed stack) about 2,000
# levels overflow the stack, which traps. Kubernetes objects nest a few dozen.
MAX_DEPTH = 256

# A JSON string (skipped whole, brackets inside it do not count) or a bracket.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def _too_deep(text):
    # No more brackets than the limit: cannot nest deeper (the common case,
    # decided without a scan).
    if text.count("{") + text.count("[") <= MAX_DEPTH:
        return False
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token == "[" or token == "{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif token == "]" or token == "}":
            depth -= 1
    return False


def _reject_constant(name):
    # json.loads accepts NaN and Infinity, which are not JSON.
    raise ValueError(name + " is not JSON")


def parse(text, what="", want_object=True):
    """Parses JSON text; raises Malformed (path "") when it is not JSON or,
    with want_object, not a JSON object. `what` names the text in messages."""
    prefix = what + ": " if what else ""
    if not isinstance(text, str):
        raise Malformed([("", prefix + "expected JSON text")])
    if _too_deep(text):
        raise Malformed([("", prefix + "JSON nested deeper than %d levels" % MAX_DEPTH)])
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise Malformed([("", prefix + "JSON nested too deeply")]) from None
    except ValueError as error:
        # json.JSONDecodeError, int too large, NaN: the message names a
        # position, never the input itself.
        raise Malformed([("", prefix + "not JSON: " + str(error))]) from None
    if want_object and not isinstance(value, dict):
        raise Malformed([("", prefix + "expected a JSON object, got " + _type_name(value))])
    return value


def dump(value):
    # ASCII only: a lone surrogate (valid in JSON's \u escapes, not in UTF-8)
    # stays escaped instead of failing the WIT string's UTF-8 encoding.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True)


def _type_name(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _object_at(obj, key, path):
    """obj[key] as a dict: {} when absent or null, Malformed when another type."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Malformed([(path, "must be an object, got " + _type_name(value))])
    return value


# --- The parent ------------------------------------------------------------


class Parent:
    """What the module needs of an Echo, read from its JSON."""

    def __init__(self, text):
        obj = parse(text, "parent")
        metadata = _object_at(obj, "metadata", "metadata")
        self.obj = obj
        self.name = metadata.get("name")
        self.namespace = metadata.get("namespace")
        self.uid = metadata.get("uid")
        generation = metadata.get("generation")
        if generation is None:
            generation = 0
        if not isinstance(generation, int) or isinstance(generation, bool):
            raise Malformed([("metadata.generation", "must be an integer")])
        self.generation = generation
        if not isinstance(self.name, str) or not self.name:
            raise Malformed([("metadata.name", "must be a non-empty string")])
        # The spec's own problems are rules (Invalid), found by validate().
        self.spec = obj.get("spec")

    def require_placement(self):
        """The namespace and uid an owned object needs (desired only)."""
        errors = []
        if not isinstance(self.namespace, str) or not self.namespace:
            errors.append(("metadata.namespace", "must be a non-empty string"))
        if not isinstance(self.uid, str) or not self.uid:
            errors.append(("metadata.uid", "must be a non-empty string"))
        if errors:
            raise Malformed(errors)

    @property
    def config_map_name(self):
        return self.name + SUFFIX


def validate(parent):
    """Every rule the parent breaks, as (path, message) pairs, and the spec's
    (text, shout) when it breaks none."""
    errors = []
    text, shout = "", False
    if len(parent.name) > MAX_NAME:
        errors.append(("metadata.name", "must be at most %d characters (it is a label value)" % MAX_NAME))
    spec = parent.spec
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        errors.append(("spec", "must be an object"))
        return errors, text, shout
    value = spec.get("text")
    if value is None:
        pass
    elif isinstance(value, str):
        text = value
    else:
        errors.append(("spec.text", "must be a string"))
    value = spec.get("shout")
    if value is None:
        pass
    elif isinstance(value, bool):
        shout = value
    else:
        errors.append(("spec.shout", "must be a boolean"))
    return errors, text, shout


def describe(errors):
    """Field errors as one line: `spec.text: must be a string; ...`."""
    return "; ".join(path + ": " + message if path else message for path, message in errors)


# --- The contract's functions ----------------------------------------------


def references(parent_text):
    """The objects this parent reads: none, but the parent must parse."""
    parse(parent_text, "parent")
    return []


def _parse_owned(owned_texts):
    objects = []
    for index, text in enumerate(owned_texts):
        objects.append(parse(text, "owned object %d" % index))
    return objects


def _is_config_map(obj, name, namespace):
    if obj.get("kind") != "ConfigMap" or obj.get("apiVersion", "v1") != "v1":
        return False
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or metadata.get("name") != name:
        return False
    return metadata.get("namespace", namespace) == namespace


def _find_config_map(owned, parent):
    for obj in owned:
        if _is_config_map(obj, parent.config_map_name, parent.namespace):
            return obj
    return None


def controller_reference(parent):
    return {
        "apiVersion": PARENT_API_VERSION,
        "kind": PARENT_KIND,
        "name": parent.name,
        "uid": parent.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def desired(parent_text, owned_texts, related_texts):
    """The objects the parent should own (JSON texts): one ConfigMap, or none
    when spec.text is empty."""
    parent = Parent(parent_text)
    parent.require_placement()
    owned = _parse_owned(owned_texts)
    errors, text, shout = validate(parent)
    if errors:
        raise Invalid(errors)
    if text == "":
        return []

    current = _find_config_map(owned, parent)
    config_map = current if current is not None else {}
    config_map["apiVersion"] = "v1"
    config_map["kind"] = "ConfigMap"
    metadata = _object_at(config_map, "metadata", "metadata")
    config_map["metadata"] = metadata
    metadata["name"] = parent.config_map_name
    metadata["namespace"] = parent.namespace

    labels = _object_at(metadata, "labels", "metadata.labels")
    labels[MANAGED_BY_LABEL] = NAME
    labels[ECHO_LABEL] = parent.name
    metadata["labels"] = labels

    references = metadata.get("ownerReferences")
    if references is None:
        references = []
    if not isinstance(references, list) or not all(isinstance(r, dict) for r in references):
        raise Malformed([("metadata.ownerReferences", "must be an array of objects")])
    ours = controller_reference(parent)
    found = False
    for reference in references:
        if reference.get("controller") is not True:
            continue
        if reference.get("uid") != parent.uid:
            raise Invalid([("metadata.ownerReferences", "the ConfigMap has another controller")])
        # Ours already: refresh it where it stands (same key order, same place).
        reference.update(ours)
        found = True
    if not found:
        references.append(ours)
    metadata["ownerReferences"] = references

    config_map["data"] = {
        "text": text,
        "echo": text.upper() if shout else text,
        "language": "python",
    }
    return [dump(config_map)]


def status(parent_text, owned_texts, related_texts, now, problem):
    """The parent's status (JSON object text). An invalid spec is reported in
    `problem`, not raised: the status is how the user learns of it."""
    parent = Parent(parent_text)
    owned = _parse_owned(owned_texts)
    result = {"observedGeneration": parent.generation}

    current = _find_config_map(owned, parent)
    if current is not None:
        data = current.get("data")
        echoed = data.get("echo") if isinstance(data, dict) else None
        if isinstance(echoed, str):
            result["echoed"] = echoed

    if problem is None:
        errors, _, _ = validate(parent)
        if errors:
            problem = describe(errors)
    if problem is not None:
        result["problem"] = problem
    return dump(result)
