"""Entry point of the in-sandbox supervisor (see server.py).

A script is always compiled afresh, an imported module comes from its cached bytecode: so
this file stays tiny and the work lives in modules (start-up time is part of a cold start).
"""

import server

server.main()
