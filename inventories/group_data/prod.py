"""Settings for every host of inventories/prod.py (its automatic group ``prod``).

Replace the sha256 values with the ones of the files you downloaded from NVIDIA
(``sha256sum FILE``): gpuhost refuses to run until they are real.
"""

nvidia_driver_version = "580.95.05"
nvidia_local_repo = {
    "debian12": {
        "url": "https://us.download.nvidia.com/tesla/580.95.05/"
        "nvidia-driver-local-repo-debian12-580.95.05_1.0-1_amd64.deb",
        "sha256": "REPLACE-WITH-THE-SHA256-OF-THE-FILE",
    },
    "ubuntu2204": {
        "url": "https://us.download.nvidia.com/tesla/580.95.05/"
        "nvidia-driver-local-repo-ubuntu2204-580.95.05_1.0-1_amd64.deb",
        "sha256": "REPLACE-WITH-THE-SHA256-OF-THE-FILE",
    },
    "rhel9": {
        "url": "https://us.download.nvidia.com/tesla/580.95.05/"
        "nvidia-driver-local-repo-rhel9-580.95.05-1.0-1.x86_64.rpm",
        "sha256": "REPLACE-WITH-THE-SHA256-OF-THE-FILE",
    },
}
container_toolkit_version = "1.18.2"
docker_daemon_settings = {"log-driver": "json-file", "log-opts": {"max-size": "100m"}}
