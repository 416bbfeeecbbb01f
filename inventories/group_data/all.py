# gpuhost defaults: the lowest-priority pyinfra data for every host.
# The schema, validation and full reference: gpuhost/settings.py and docs/settings.md
# (a unit test checks that these values equal gpuhost.settings.defaults()).
# pyinfra turns every top-level name here into host data: define no helpers in this file.
#
# Required, set them in your own group or host data (no defaults on purpose):
#   nvidia_driver_version = "570.172.08"
#   nvidia_local_repo = {"debian12": {"url": "https://.../nvidia-driver-local-repo-debian12-570.172.08_1.0-1_amd64.deb",
#                                     "sha256": "<64 hex digits>"}}
#   container_toolkit_version = "1.17.8"

# Kernel module flavour: "open", "proprietary" or "auto" (open when every GPU is Turing or
# newer and the branch is >= 560).
nvidia_driver_flavor = "auto"
# Controller cache for downloaded NVIDIA packages.
nvidia_artifact_cache = "~/.cache/gpuhost"
# Fabric Manager (NVSwitch systems), installed at exactly the driver version.
nvidia_fabricmanager = False
# Enable nvidia-persistenced.
nvidia_persistenced = True

# Docker: "docker" (Docker's repository), "distro", "local" (docker_local_packages) or "none".
docker_source = "docker"
# Repository URI (apt) / baseurl (dnf) and signing key per OS; one string means every OS.
docker_repo_url = {
    "debian": "https://download.docker.com/linux/debian",
    "ubuntu": "https://download.docker.com/linux/ubuntu",
    "rhel": "https://download.docker.com/linux/rhel/$releasever/$basearch/stable",
}
docker_repo_gpgkey = {
    "debian": "https://download.docker.com/linux/debian/gpg",
    "ubuntu": "https://download.docker.com/linux/ubuntu/gpg",
    "rhel": "https://download.docker.com/linux/rhel/gpg",
}
# Controller paths of Docker packages, with docker_source = "local".
docker_local_packages = []

# NVIDIA Container Toolkit: "nvidia" (NVIDIA's repository), "mirror" (container_toolkit_repo_url)
# or "local" (container_toolkit_local_packages).
container_toolkit_source = "nvidia"
container_toolkit_repo_url = {
    "apt": "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)",
    "rpm": "https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch",
}
container_toolkit_gpgkey = {
    "apt": "https://nvidia.github.io/libnvidia-container/gpgkey",
    "rpm": "https://nvidia.github.io/libnvidia-container/gpgkey",
}
container_toolkit_local_packages = []

# Extra /etc/docker/daemon.json keys, merged into the file (never replacing it).
docker_daemon_settings = {}
# Make nvidia Docker's default runtime.
nvidia_default_runtime = False

# May gpuhost reboot a host: "never" or "when_needed".
reboot_policy = "never"
# Proxy for controller downloads and host package managers (None: none).
http_proxy = None
# No internet: every source must be a local path, a file:// URL or under offline_mirror_urls.
offline = False
offline_mirror_urls = []

# Image for `docker run --runtime=nvidia IMAGE nvidia-smi -L` (None: skip) and a controller
# archive of it, loaded when the host lacks the image.
verify_image = None
verify_image_archive = None

# MIG: "enabled", "disabled" or None (leave as is); layout: profiles per GPU or None.
mig_mode = None
mig_layout = None

# Driver upgrades.
upgrade_allow_downgrade = False
upgrade_force = False
upgrade_drain_command = None
upgrade_uncordon_command = None
upgrade_stop_services = []
