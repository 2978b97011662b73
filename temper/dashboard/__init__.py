"""`temper dashboard`: a local, read-only web app over run, eval and envqa folders (app.py)."""
