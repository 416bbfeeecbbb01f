"""Make the project root importable (``facts`` is not an installed package), so that plain
``pytest`` works as well as ``python -m pytest`` from any directory."""
import pathlib
import sys

ROOT = str(pathlib.Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
