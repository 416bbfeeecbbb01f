"""``nvidia_kernel_modules: distribution`` (issue 39): the refusals and names of
gpuhost.signed_modules, the signer the kernel fact reads and the audit's finding."""

from __future__ import annotations

from gpuhost.facts.assemble_kernel import kernel_state
from gpuhost import signed_modules
from gpuhost.health.host import next_boot_findings


def test_what_each_distribution_offers_is_named_in_one_line():
    for tag in ("debian12", "debian13", "rhel10", "rhel9"):
        line = signed_modules.problem(tag, ["6.1.0-1-amd64"], "580.95.05", "open")
        assert line and "\n" not in line and "no distribution-signed NVIDIA modules" in line
        assert "nvidia_module_signing_key" in line  # what to do instead
    line = signed_modules.problem("ubuntu2604", ["7.0.0-12-generic"], "590.48.01", "auto")
    assert line == ("nvidia_kernel_modules: distribution: no signed modules of branch 590 for "
                    "Ubuntu 26.04: Canonical builds branches 580, 595, 615 (-server-open) for "
                    "Ubuntu 26.04; set nvidia_driver_version to one of them")
    assert "open or auto" in signed_modules.problem("ubuntu2404", [], "580.95.05", "proprietary")
    assert signed_modules.problem("ubuntu2404", ["6.8.0-51-generic", None], "580.95.05",
                                  "open") is None
    assert "uname -r" in signed_modules.problem("ubuntu2404", ["6.8.0-51;x"], "580.95.05", "open")


def test_canonicals_names_for_the_running_kernel():
    assert signed_modules.packages("595.71.05", "7.0.0-12-generic") == [
        "linux-modules-nvidia-595-server-open-7.0.0-12-generic",
        "nvidia-headless-no-dkms-595-server-open", "nvidia-utils-595-server"]
    assert signed_modules.package_version("ubuntu2404", "580.95.05") == "580.95.05-0ubuntu0.24.04.*"


def _kernel(signer: str | None) -> dict:
    sections = {"os_release": (0, 'ID=ubuntu\nVERSION_ID="24.04"\n'),
                "kernel": (0, "6.8.0-51-generic\nx86_64"),
                "secure_boot": (0, "SecureBoot enabled"), "mok": (0, "MokListRT is empty")}
    if signer is not None:
        sections["module_signer"] = (0, signer + "\n")
    return kernel_state({k: {"rc": rc, "out": out} for k, (rc, out) in sections.items()})


def test_the_kernel_fact_reads_the_modules_signer():
    assert _kernel("Canonical Ltd. Kernel Module Signing")["module_signer"] == \
        "Canonical Ltd. Kernel Module Signing"
    assert _kernel("")["module_signer"] is None
    assert _kernel(None)["module_signer"] is None


def test_the_audit_names_the_signer_and_whether_the_kernel_trusts_it():
    kernel = _kernel("Canonical Ltd. Kernel Module Signing")
    for state, said in (("loaded", "it is loaded, so the kernel trusts that key"),
                        ("not_loaded", "it is not loaded")):
        found = next_boot_findings({"kernel": kernel, "driver": {
            "installed_version": "580.95.05", "state": state}})
        signer = [f for f in found if f["id"] == "secure-boot-module-signer"]
        assert len(signer) == 1, found
        assert '"Canonical Ltd. Kernel Module Signing"' in signer[0]["message"]
        assert said in signer[0]["message"]
        # no DKMS, no MOK: not the DKMS refusal
        assert not [f for f in found if f["id"] == "secure-boot-signer-not-enrolled"]


def _signed_host(version: str, tag: str = "ubuntu2404") -> dict:
    from tests.unit.test_rollout import host_state

    state = host_state(version, "open")
    branch = version.split(".")[0]
    state["os"] = {"distro_tag": tag, "pretty_name": tag, "error": None,
                   "kernel_release": "6.8.0-51-generic"}
    state["driver"]["packages"] = {
        f"nvidia-headless-no-dkms-{branch}-server-open": f"{version}-0ubuntu0.24.04.1",
        f"nvidia-utils-{branch}-server": f"{version}-0ubuntu0.24.04.1"}
    state["driver"]["local_repos"] = []
    return state


def test_the_upgrade_refuses_a_branch_canonical_does_not_build_before_any_host():
    import hashlib

    from gpuhost import upgrade
    from tests.unit.test_rollout import config, probe

    wanted = config(nvidia_kernel_modules="distribution", nvidia_driver_version="590.48.01")
    plan = upgrade.assess("u24-01", wanted, _signed_host("580.95.05"), probe("580.95.05"))
    assert [p for p in plan["problems"] if "no signed modules of branch 590" in p], plan["problems"]
    # at the target with Canonical's pin: nothing to do (the signed pin, not NVIDIA's)
    wanted = config(nvidia_kernel_modules="distribution", nvidia_driver_version="595.71.05")
    pin = signed_modules.apt_pin("ubuntu2404", "595.71.05")
    at = probe("595.71.05", apt_pin_sha256=hashlib.sha256(pin.encode()).hexdigest())
    plan = upgrade.assess("u24-01", wanted, _signed_host("595.71.05"), at)
    assert (plan["action"], plan["problems"]) == ("none", [])
    plan = upgrade.assess("u24-01", wanted, _signed_host("580.95.05"), probe("580.95.05"))
    assert (plan["action"], plan["problems"]) == ("upgrade", [])
