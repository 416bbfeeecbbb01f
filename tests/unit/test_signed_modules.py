"""``nvidia_kernel_modules: distribution`` (issue 39): the refusals and names of
gpuhost.signed_modules, the signer the kernel fact reads and the audit's finding."""

from __future__ import annotations

from facts.assemble_kernel import kernel_state
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
