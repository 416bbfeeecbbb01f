"""gpuhost: provision and audit NVIDIA GPU hosts with pyinfra.

One package with three subpackages that live in the checkout's own folders:
``gpuhost.facts`` (``facts/``), ``gpuhost.roles`` (``roles/``) and ``gpuhost.deploys``
(``deploys/``). An installed wheel maps them there with setuptools' ``package-dir``
(pyproject.toml). In a checkout, the root is appended to this package's ``__path__`` when
those folders sit beside ``gpuhost/``, so ``gpuhost.facts`` finds ``./facts`` without an
install; modules of ``gpuhost/`` itself come first. Always import them as ``gpuhost.facts...``:
a module imported under two names is two modules (two classes for one pyinfra fact).
docs/architecture.md, "Packaging".
"""

from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parent.parent
if all((_CHECKOUT / name / "__init__.py").is_file() for name in ("facts", "roles", "deploys")):
    __path__.append(str(_CHECKOUT))  # noqa: F821 (a package's __path__)
