"""The helpers on their own: owner_reference, adopt, merge, set_condition,
observed_generation."""

import copy
import json

import pytest

from wasm_operator_sdk import (
    Invalid,
    Malformed,
    adopt,
    controller_of,
    find_condition,
    merge,
    observed_generation,
    owner_reference,
    replace_at,
    replaced_pointers,
    replacing,
    required,
    set_condition,
)

UID = "0b7e4a52-0000-4000-8000-000000000001"
PARENT = {
    "apiVersion": "example.com/v1",
    "kind": "Site",
    "metadata": {"name": "blog", "namespace": "web", "uid": UID, "generation": 4},
}
OURS = {
    "apiVersion": "example.com/v1",
    "kind": "Site",
    "name": "blog",
    "uid": UID,
    "controller": True,
    "blockOwnerDeletion": True,
}


# --- required -----------------------------------------------------------------

CREDENTIALS = {"spec": {"credentialsSecret": "db", "ports": [{"port": 80}], "empty": ""}}


def test_required_is_the_value_at_the_path():
    assert required(CREDENTIALS, "spec.credentialsSecret") == "db"
    assert required(CREDENTIALS, "spec.empty") == ""
    assert required(CREDENTIALS, "spec.ports") == [{"port": 80}]


@pytest.mark.parametrize(
    "obj",
    [{"spec": {}}, {}, {"spec": {"credentialsSecret": None}}, {"spec": "text"}],
)
def test_required_names_the_whole_path_as_the_rust_sdks_typed_parent_does(obj):
    with pytest.raises(Invalid) as error:
        required(obj, "spec.credentialsSecret")
    assert error.value.errors == [("spec.credentialsSecret", "required")]
    assert str(error.value) == "spec.credentialsSecret: required"


# --- owner_reference ----------------------------------------------------------


def test_owner_reference_is_a_blocking_controller_reference():
    assert owner_reference(PARENT) == OURS


def test_owner_reference_names_every_missing_field():
    with pytest.raises(Malformed) as error:
        owner_reference({"kind": "Site", "metadata": {"name": ""}})
    assert error.value.errors == [
        ("apiVersion", "must be a non-empty string"),
        ("metadata.name", "must be a non-empty string"),
        ("metadata.uid", "must be a non-empty string"),
    ]


# --- adopt --------------------------------------------------------------------


def config_map(references=None, **metadata):
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "blog", **metadata}, "data": {"a": "1"}}
    if references is not None:
        obj["metadata"]["ownerReferences"] = references
    return obj


FOREIGN = {"apiVersion": "v1", "kind": "Namespace", "name": "web", "uid": "ns-uid"}
OTHER_CONTROLLER = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "name": "rs-1",
    "uid": "rs-uid",
    "controller": True,
}


def test_adopt_gives_a_new_object_the_controller_reference():
    desired = config_map()
    adopted = adopt(PARENT, None, desired)
    assert adopted["metadata"]["ownerReferences"] == [OURS]
    assert adopted["data"] == {"a": "1"}
    assert "ownerReferences" not in desired["metadata"], "the argument is not changed"


def test_adopt_takes_an_orphan_keeping_its_other_references():
    current = config_map([FOREIGN], uid="cm-uid")
    before = copy.deepcopy(current)
    adopted = adopt(PARENT, current, config_map())
    assert adopted["metadata"]["ownerReferences"] == [FOREIGN, OURS]
    assert current == before


@pytest.mark.parametrize("where", ["current", "desired"])
def test_adopt_refuses_another_controllers_object(where):
    other = config_map([FOREIGN, OTHER_CONTROLLER])
    current, desired = (other, config_map()) if where == "current" else (None, other)
    with pytest.raises(Invalid) as error:
        adopt(PARENT, current, desired)
    assert error.value.errors == [("metadata.ownerReferences", "owned by another controller (ReplicaSet rs-1)")]


def test_adopt_refreshes_a_stale_reference_of_ours_where_it_stands():
    stale = {**OURS, "name": "renamed", "blockOwnerDeletion": False}
    adopted = adopt(PARENT, config_map([stale, FOREIGN]), config_map())
    assert adopted["metadata"]["ownerReferences"] == [OURS, FOREIGN]


def test_adopt_keeps_the_desired_objects_own_references_once():
    mine = {"apiVersion": "v1", "kind": "Secret", "name": "s", "uid": "secret-uid"}
    updated_foreign = {**FOREIGN, "blockOwnerDeletion": True}
    adopted = adopt(PARENT, config_map([FOREIGN]), config_map([updated_foreign, mine, OURS]))
    assert adopted["metadata"]["ownerReferences"] == [updated_foreign, mine, OURS]


def test_adopt_an_owned_object_is_a_steady_state():
    current = config_map([FOREIGN, OURS])
    assert adopt(PARENT, current, current) == current


def test_adopt_refuses_owner_references_that_are_not_objects():
    with pytest.raises(Malformed) as error:
        adopt(PARENT, config_map("nope"), config_map())
    assert error.value.errors[0].path == "metadata.ownerReferences"


def test_controller_of():
    assert controller_of(config_map([FOREIGN, OTHER_CONTROLLER])) == OTHER_CONTROLLER
    assert controller_of(config_map([FOREIGN])) is None
    assert controller_of(None) is None


# --- merge --------------------------------------------------------------------


def desired_deployment(image="nginx:1.27", replicas=2):
    """A Deployment as a module writes it: only the fields it cares about."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "blog", "namespace": "web", "labels": {"app": "blog"}, "ownerReferences": [OURS]},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "blog"}},
            "template": {
                "metadata": {"labels": {"app": "blog"}},
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": image,
                            "args": ["--port", "8080"],
                            "ports": [{"name": "http", "containerPort": 8080}],
                            "env": [{"name": "MODE", "value": "prod"}],
                        },
                        {"name": "sidecar", "image": "busybox:1.36"},
                    ],
                    "volumes": [{"name": "content", "configMap": {"name": "blog"}}],
                },
            },
        },
    }


def server_deployment():
    """The same Deployment as the API server returns it: defaults filled in,
    server-side metadata and a status."""
    obj = desired_deployment()
    obj["metadata"].update(
        uid="dep-uid",
        resourceVersion="812",
        generation=1,
        creationTimestamp="2026-01-01T00:00:00Z",
        annotations={"deployment.kubernetes.io/revision": "1"},
        managedFields=[{"manager": "site-operator", "operation": "Update"}],
    )
    spec = obj["spec"]
    spec.update(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
    spec.update(revisionHistoryLimit=10, progressDeadlineSeconds=600)
    pod = spec["template"]["spec"]
    pod.update(restartPolicy="Always", dnsPolicy="ClusterFirst", schedulerName="default-scheduler")
    pod["template_marker"] = None  # not a server field: removed below
    del pod["template_marker"]
    for container in pod["containers"]:
        container.update(
            terminationMessagePath="/dev/termination-log",
            terminationMessagePolicy="File",
            imagePullPolicy="IfNotPresent",
            resources={},
        )
    pod["containers"][0]["ports"][0]["protocol"] = "TCP"
    pod["volumes"][0]["configMap"]["defaultMode"] = 420
    obj["status"] = {"replicas": 2, "readyReplicas": 2, "observedGeneration": 1}
    return obj


def test_merge_onto_the_servers_object_gives_it_back_exactly():
    server = server_deployment()
    before = copy.deepcopy(server)
    merged = merge(server, desired_deployment())
    assert merged == server
    # Exactly: the same member order too, so the same JSON text.
    assert json.dumps(merged) == json.dumps(server)
    assert server == before, "the argument is not changed"
    assert merged is not server
    assert merged["spec"]["template"] is not server["spec"]["template"]


def test_merge_changes_only_what_desired_changes():
    merged = merge(server_deployment(), desired_deployment(image="nginx:1.28", replicas=3))
    expected = server_deployment()
    expected["spec"]["replicas"] = 3
    expected["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.28"
    assert merged == expected
    web = merged["spec"]["template"]["spec"]["containers"][0]
    assert web["terminationMessagePath"] == "/dev/termination-log"
    assert web["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]


def test_merge_named_lists_follow_desired_order_and_drop_the_rest():
    desired = desired_deployment()
    containers = desired["spec"]["template"]["spec"]["containers"]
    desired["spec"]["template"]["spec"]["containers"] = [containers[1], {"name": "new", "image": "x"}]
    merged = merge(server_deployment(), desired)["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in merged] == ["sidecar", "new"]
    assert merged[0]["imagePullPolicy"] == "IfNotPresent", "the sidecar kept its defaults"
    assert merged[1] == {"name": "new", "image": "x"}


def test_merge_replaces_unnamed_lists_and_scalars():
    current = {"args": ["a", "b"], "items": [{"x": 1, "y": 2}], "n": 1, "s": {"k": "v"}}
    desired = {"args": ["c"], "items": [{"x": 3}], "n": "one", "s": "flat"}
    assert merge(current, desired) == {"args": ["c"], "items": [{"x": 3}], "n": "one", "s": "flat"}


def test_merge_a_list_with_a_duplicate_or_missing_name_is_replaced():
    current = {"l": [{"name": "a", "keep": 1}]}
    assert merge(current, {"l": [{"name": "a"}, {"name": "a", "v": 2}]}) == {
        "l": [{"name": "a"}, {"name": "a", "v": 2}]
    }
    assert merge(current, {"l": [{"name": "a"}, {"v": 2}]}) == {"l": [{"name": "a"}, {"v": 2}]}
    assert merge(current, {"l": [{"name": "a"}]}) == {"l": [{"name": "a", "keep": 1}]}


def test_merge_null_removes_a_member_and_is_never_written():
    current = {"metadata": {"annotations": {"a": "1", "b": "2"}, "name": "x"}}
    desired = {"metadata": {"annotations": {"a": None}, "labels": None}, "spec": {"x": None, "y": 1}}
    assert merge(current, desired) == {"metadata": {"annotations": {"b": "2"}, "name": "x"}, "spec": {"y": 1}}


def test_merge_onto_nothing_copies_desired_without_nulls():
    desired = {"a": {"b": None, "c": [{"name": "n", "d": None}]}}
    merged = merge(None, desired)
    assert merged == {"a": {"c": [{"name": "n"}]}}
    merged["a"]["c"].append(1)
    assert desired["a"]["c"] == [{"name": "n", "d": None}]


# --- set_condition --------------------------------------------------------------

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"


def test_set_condition_appends_a_new_condition_with_now():
    conditions = [{"type": "Other", "status": "True", "lastTransitionTime": T0, "reason": "R", "message": ""}]
    result = set_condition(conditions, "Ready", True, "Available", "2 of 2 ready", T1, observed_generation=4)
    assert result == [
        conditions[0],
        {
            "type": "Ready",
            "status": "True",
            "observedGeneration": 4,
            "lastTransitionTime": T1,
            "reason": "Available",
            "message": "2 of 2 ready",
        },
    ]
    assert list(result[1]) == ["type", "status", "observedGeneration", "lastTransitionTime", "reason", "message"]


def test_set_condition_keeps_the_transition_time_when_the_status_stays():
    first = set_condition(None, "Ready", "False", "Progressing", "0 of 2 ready", T0)
    second = set_condition(first, "Ready", "False", "Progressing", "1 of 2 ready", T1)
    assert second == [
        {
            "type": "Ready",
            "status": "False",
            "lastTransitionTime": T0,
            "reason": "Progressing",
            "message": "1 of 2 ready",
        }
    ]
    assert first[0]["message"] == "0 of 2 ready", "the argument is not changed"


def test_set_condition_moves_the_transition_time_when_the_status_changes():
    first = set_condition([], "Ready", "False", "Progressing", "", T0)
    assert set_condition(first, "Ready", "True", "Available", "", T1)[0]["lastTransitionTime"] == T1


def test_set_condition_replaces_in_place_keeping_the_order():
    conditions = set_condition(None, "A", "True", "r", "", T0)
    conditions = set_condition(conditions, "B", "True", "r", "", T0)
    conditions = set_condition(conditions, "A", "False", "r2", "m", T1)
    assert [(c["type"], c["status"]) for c in conditions] == [("A", "False"), ("B", "True")]
    assert find_condition(conditions, "B")["lastTransitionTime"] == T0
    assert find_condition(conditions, "C") is None


# --- observed_generation --------------------------------------------------------


def test_observed_generation():
    assert observed_generation(PARENT) == 4
    assert observed_generation({"metadata": {"name": "x"}}) is None
    assert observed_generation({}) is None


@pytest.mark.parametrize("generation", ["4", True, 4.0])
def test_observed_generation_must_be_an_integer(generation):
    with pytest.raises(Malformed) as error:
        observed_generation({"metadata": {"generation": generation}})
    assert error.value.errors[0].path == "metadata.generation"


# --- replacing -----------------------------------------------------------------


def test_replacing_marks_a_copy():
    obj = {"kind": "ConfigMap", "data": {"a": "1"}}
    marked = replacing(obj, "/data")
    assert marked == obj
    assert replaced_pointers(marked) == ("/data",)
    assert replaced_pointers(obj) == ()
    assert replaced_pointers(replacing(marked, "/binaryData")) == ("/data", "/binaryData")
    assert json.dumps(marked) == json.dumps(obj)


@pytest.mark.parametrize("pointer", ["", "data", 5])
def test_replacing_needs_a_json_pointer(pointer):
    with pytest.raises(ValueError, match="JSON pointer"):
        replacing({}, pointer)


def test_replace_at():
    merged = {"data": {"a": "1", "stale": "x"}, "metadata": {"labels": {"a~b/c": {"k": "v", "old": "o"}}}}
    replace_at(merged, {"data": {"a": "2", "gone": None}}, "/data")
    assert merged["data"] == {"a": "2"}
    replace_at(merged, {"metadata": {"labels": {"a~b/c": {"k": "w"}}}}, "/metadata/labels/a~0b~1c")
    assert merged["metadata"]["labels"] == {"a~b/c": {"k": "w"}}
    replace_at(merged, {}, "/data")
    assert "data" not in merged
    replace_at(merged, {"spec": {"x": 1}}, "/spec/x")  # nothing holds it: unchanged
    assert merged == {"metadata": {"labels": {"a~b/c": {"k": "w"}}}}
