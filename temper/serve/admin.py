"""Who steers `temper serve`: the operator's token and the folders weights may come from.

Loading weights, setting the policy version, /pause, /resume and aborting other users' requests
need the operator's token (`Authorization: Bearer TOKEN`; `admin_token_file` or `admin_token_env`).
With neither configured those routes answer 403; a missing or wrong token answers 401. Weights
load only from inside `weights_dirs`, and a path outside them answers one error whether or not it
exists (the route tells a stranger nothing about the server's disk).
"""

import hmac
import os
from pathlib import Path
from typing import Any

from fastapi import Request

from temper.generation.remote_client import read_secret
from temper.serve.layer import ApiError


class Admin:
    def __init__(self, cfg: Any):
        self.token = read_secret(cfg.admin_token_file, cfg.admin_token_env, "admin_token")
        self.dirs = [Path(os.path.realpath(d)) for d in cfg.weights_dirs]

    def is_admin(self, request: Request) -> bool:
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        return self.token is not None and hmac.compare_digest(bearer.encode(), self.token.encode())

    def require(self, request: Request) -> None:
        """ApiError 403 (no token configured) or 401 (not the operator's token)."""
        what = f"{request.method} {request.url.path}"
        if self.token is None:
            raise ApiError(403, f"{what}: operator routes are off on this server (configure admin_token_file or "
                           "admin_token_env)", code="admin_disabled", kind="permission_error")
        if not self.is_admin(request):
            raise ApiError(401, f"{what}: needs the operator's token (Authorization: Bearer ...)",
                           code="invalid_admin_token", kind="authentication_error")

    def weights_path(self, path: str, param: str) -> str:
        """`path` when it lies inside one of `weights_dirs` (symlinks resolved); one ApiError 403 otherwise,
        the same whether or not it exists."""
        real = Path(os.path.realpath(path))
        if not any(real.is_relative_to(d) for d in self.dirs):
            raise ApiError(403, f"{param}: weights load only from inside this server's weights_dirs",
                           param=param, code="path_not_allowed", kind="permission_error")
        return str(real)
