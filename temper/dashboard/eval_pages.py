"""The dashboard's eval and envqa pages (registered on the app by `register`)."""

from fastapi import FastAPI


def register(app: FastAPI, dash) -> None:  # noqa: ANN001 - filled in with the eval pages
    return None
