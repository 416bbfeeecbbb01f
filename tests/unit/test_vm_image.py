"""vagrant/qemu/image.py's recipe: what the cached VM image carries decides when it is rebuilt."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def image():
    spec = importlib.util.spec_from_file_location("gpuhost_vm_image_under_test",
                                                  REPO / "vagrant/qemu/image.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def artifacts(tmp_path, monkeypatch):
    archive = tmp_path / "verify-image.tar"
    archive.write_bytes(b"a docker save archive")
    (tmp_path / "manifest.json").write_text(json.dumps(
        {"verify_image": {"name": "gpuhost/verify:sandbox", "archive": str(archive)}}))
    monkeypatch.setenv("GPUHOST_NVIDIA_OUT", str(tmp_path))
    return archive


def test_the_verification_image_is_part_of_the_recipe_by_content_not_path(image, artifacts):
    rec = image.recipe("6.1.0-57-amd64", layers=["docker", "headers", "verify"])
    assert rec["verify_image"] == {"name": "gpuhost/verify:sandbox",
                                   "sha256": hashlib.sha256(artifacts.read_bytes()).hexdigest()}
    assert "linux-headers-amd64" in rec["packages"] and "docker.io" in rec["packages"]
    before = image.recipe_id(rec)
    artifacts.write_bytes(b"another image")   # a new verification image: a new VM image
    assert image.recipe_id(image.recipe("6.1.0-57-amd64", layers=["docker", "headers", "verify"])) \
        != before


def test_no_preloaded_image_without_docker_or_without_the_artifacts(image, artifacts, tmp_path,
                                                                    monkeypatch):
    assert "verify_image" not in image.recipe("6.1.0-57-amd64", layers=["headers", "verify"])
    monkeypatch.setenv("GPUHOST_NVIDIA_OUT", str(tmp_path / "missing"))
    assert "verify_image" not in image.recipe("6.1.0-57-amd64", layers=["docker", "verify"])


def test_the_default_layers(image, monkeypatch):
    monkeypatch.delenv("GPUHOST_VM_PRESEED", raising=False)
    assert image.preseed_layers() == ["docker", "headers", "verify"]
    monkeypatch.setenv("GPUHOST_VM_PRESEED", "none")
    assert image.preseed_layers() == []
