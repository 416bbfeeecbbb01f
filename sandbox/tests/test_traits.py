"""The host-trait mechanism (sandbox/traits): defaults, overrides and validation. Each
trait's own test (that it is really in effect in a booted host) lives with its area."""
from __future__ import annotations

import pytest

from sandbox import spec, traits
from sandbox.util import SandboxError

KERNEL = "6.1.0-99-amd64"


def test_every_registered_trait_documents_its_vendor_source():
    for t in traits.REGISTRY.values():
        assert t.doc.strip() and t.source.strip(), t.name


def test_an_unknown_trait_is_refused_with_the_known_ones_named():
    with pytest.raises(SandboxError, match="unknown trait 'no-such-trait'"):
        spec.plan(2, 0, 1, {"gpu-01": {"traits": ["no-such-trait"]}}, KERNEL)


def test_traits_must_be_a_list_of_names():
    with pytest.raises(SandboxError, match="traits must be a list"):
        spec.load_overrides('{"gpu-01": {"traits": [1]}}')


def test_an_override_replaces_the_default_traits_and_reaches_machine_json():
    hosts = spec.plan(2, 0, 1, {"gpu-02": {"traits": []}}, KERNEL)
    assert hosts[1]["traits"] == []
    assert hosts[0]["traits"] == traits.defaults(hosts[0])
    assert spec.machine_json(hosts[0])["traits"] == hosts[0]["traits"]
