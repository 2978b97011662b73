"""Code that runs inside a sandbox: standard library only, no temper imports.

The folder is mounted read-only into every sandbox and `supervisor.py` runs as a script
there, so its modules import each other by plain name. The host imports only `wire` and
`native` (both self-contained) through this package.
"""
