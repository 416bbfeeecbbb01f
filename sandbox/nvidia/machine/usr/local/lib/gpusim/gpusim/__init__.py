"""gpusim: a simulator of what only NVIDIA hardware provides, for the gpuhost sandbox.

It answers as `nvidia-smi` (from the fake driver's utils package), as the kernel
(`modprobe`/`rmmod`/`lsmod` for the nvidia modules, `/proc/driver/nvidia/version`), as
`lspci`, and it "boots" (`gpusim-boot`). Everything is standard library only and limited
to the modules Debian's python3-minimal ships (no json, no xml, no uuid): see
`sandbox/nvidia/README.md` for the contract with the packaging and sandbox parts.

Every path is relative to the environment variable GPUSIM_ROOT (default "/").
"""

__version__ = "1.0"
