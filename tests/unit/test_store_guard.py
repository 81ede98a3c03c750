"""The ``/store`` routes' tenant rule (``studio/store_guard.py``): deployment template, authenticated user, neither."""

from __future__ import annotations

from logicmap.studio.store_guard import store_namespace_of_request, store_problem


def test_the_authenticated_user_must_be_the_configured_label() -> None:
    assert store_problem(("memories", "alice"), user_id="alice", authority=None) is None
    assert store_problem(("memories", "alice", "Note"), user_id="alice", authority=None) is None
    for other in (("memories", "bob"), ("memories",), (), ("memories", "*"), ("alice",), ("memories", "alice2")):
        assert store_problem(other, user_id="alice", authority=None), other
    assert store_problem(None, user_id="alice", authority=None)  # list_namespaces without a prefix
    assert store_problem(("alice", "notes"), user_id="alice", authority=None, user_label=0) is None


def test_a_deployment_template_names_the_tenant() -> None:
    assert store_problem(("acme-alice", "notes"), user_id="alice", authority="acme-{user_id}") is None
    assert store_problem(("acme-bob", "notes"), user_id="alice", authority="acme-{user_id}")
    assert store_problem(("acme-alice",), user_id=None, authority="acme-{user_id}")  # no user: refused
    assert store_problem(("acme", "alice", "x"), user_id="alice", authority="acme.{user_id}") is None
    assert store_problem(("acme",), user_id="alice", authority="acme.{user_id}")
    assert store_problem(("shared", "x"), user_id=None, authority="shared") is None
    assert store_problem(("other",), user_id=None, authority="shared")


def test_without_auth_or_template_nothing_is_checked() -> None:
    assert store_problem(("memories", "bob"), user_id=None, authority=None) is None
    assert store_problem(None, user_id=None, authority=None) is None


def test_each_store_route_names_its_namespace() -> None:
    body = b'{"namespace": ["memories", "bob"], "key": "k", "value": {}}'
    assert store_namespace_of_request("PUT", "/store/items", b"", body) == (True, ["memories", "bob"])
    assert store_namespace_of_request("DELETE", "/store/items", b"", body) == (True, ["memories", "bob"])
    assert store_namespace_of_request("GET", "/store/items", b"namespace=memories.bob&key=k", b"") == (
        True, ("memories", "bob"))
    assert store_namespace_of_request("POST", "/store/items/search", b"", b'{"namespace_prefix": ["m"]}') == (
        True, ["m"])
    assert store_namespace_of_request("POST", "/store/namespaces", b"", b"{}") == (True, None)
    assert store_namespace_of_request("POST", "/runs", b"", b"{}") == (False, None)
