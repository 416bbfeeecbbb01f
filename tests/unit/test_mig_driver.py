"""The first MIG driver per GPU model (gpuhost.mig.driver): MIG on an older driver is refused
with the model, the driver it needs and what to do."""

from gpuhost.mig import driver as mig_driver


def test_first_mig_driver_comes_from_nvidias_deployment_considerations_table():
    assert mig_driver.first_mig_driver("B200") == "570.133.20"
    assert mig_driver.first_mig_driver("RTX-PRO-6000-BLACKWELL") == "575.51.03"
    assert mig_driver.first_mig_driver("RTX-PRO-5000-BLACKWELL") == "575.57.08"
    assert mig_driver.first_mig_driver("L4") is None      # no MIG
    assert mig_driver.first_mig_driver("no-such-gpu") is None
    assert mig_driver.first_mig_driver(None) is None


def test_a_gpu_below_its_first_mig_driver_is_named_once_per_model():
    found = mig_driver.problems([(0, "B200"), (1, "B200"), (2, "H100-80GB-HBM3")], "570.86.15")
    assert found == ["GPU 0, 1 (B200): MIG needs driver 570.133.20 or newer (NVIDIA's MIG User "
                     "Guide), this host gets 570.86.15; set nvidia_driver_version to a newer "
                     "branch, or leave MIG off on it"]


def test_new_enough_or_unknown_drivers_pass():
    assert mig_driver.problems([(0, "B200")], "570.133.20") == []
    assert mig_driver.problems([(0, "B200")], "580.95.05") == []
    assert mig_driver.problems([(0, "B200")], None) == []
    assert mig_driver.problems([(0, "L4"), (1, None)], "450.51.06") == []
