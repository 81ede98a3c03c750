"""The ``/store`` routes' tenant rule (``studio/store_guard.py``): deployment template, authenticated user, neither."""

from __future__ import annotations

import pytest

from logicmap.studio.requests import BadRequest
from logicmap.studio.store_guard import read_store_request, store_problem


def test_the_authenticated_user_must_be_the_configured_label() -> None:
    assert store_problem(("memories", "alice"), user_id="alice", authority=None) is None
    assert store_problem(("memories", "alice", "Note"), user_id="alice", authority=None) is None
    for other in (("memories", "bob"), ("memories",), (), ("memories", "*"), ("alice",), ("memories", "alice2")):
        assert store_problem(other, user_id="alice", authority=None), other
    assert store_problem(None, user_id="alice", authority=None)  # list_namespaces without a prefix
    assert store_problem(("alice", "notes"), user_id="alice", authority=None, user_label=0) is None
    # One namespace (put, get, delete) may be the user's id alone; as a prefix it would cover ("alice", "bob").
    assert store_problem(("alice",), user_id="alice", authority=None, prefix=False) is None
    assert store_problem(("alice", "bob"), user_id="alice", authority=None, prefix=False)
    assert store_problem(["memories", 7], user_id="alice", authority=None, prefix=False)


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
    assert read_store_request("PUT", "/store/items", b"", body).namespace == ["memories", "bob"]
    assert read_store_request("DELETE", "/store/items/", b"", body).namespace == ["memories", "bob"]
    got = read_store_request("GET", "/store/items", b"namespace=memories.bob&key=k", b"")
    assert (got.namespace, got.prefix, got.query) == (("memories", "bob"), False, b"namespace=memories.bob&key=k")
    assert read_store_request("HEAD", "/store/items", b"namespace=m.b&key=k", b"").namespace == ("m", "b")
    search = read_store_request("POST", "/store/items/search", b"", b'{"namespace_prefix": ["m"]}')
    assert (search.namespace, search.prefix) == (["m"], True)
    assert read_store_request("POST", "/store/namespaces", b"", b"{}").namespace is None
    assert read_store_request("POST", "/runs", b"", b"{}") is None


@pytest.mark.parametrize(
    ("method", "path", "query", "body", "status"),
    [
        ("GET", "/store/items", b"namespace=a.b&namespace=a.c&key=k", b"", 400),
        ("GET", "/store/items", b"namespace=a.b&key=k&extra=1", b"", 400),
        ("PUT", "/store/items", b"namespace=a.b", b'{"namespace": ["a", "b"]}', 400),
        ("PUT", "/store/items", b"", b'{"namespace": ["a", "b"], "namespace": ["a", "c"]}', 400),
        ("PUT", "/store/items", b"", b'[["a", "b"]]', 400),
        ("PATCH", "/store/items", b"", b"{}", 405),
        ("POST", "/store/items/batch", b"", b"{}", 404),
    ],
)
def test_a_request_the_guard_will_not_read_is_refused_with_its_status(
    method: str, path: str, query: bytes, body: bytes, status: int
) -> None:
    with pytest.raises(BadRequest) as refused:
        read_store_request(method, path, query, body)
    assert refused.value.status == status and "\n" not in refused.value.detail
