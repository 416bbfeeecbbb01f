"""make bench: the audit against the floor and Ansible (bench/run.py)."""
