"""A `GenerationClient` over HTTP: rollouts from an OpenAI-compatible server given by URL.

    client = RemoteClient("http://127.0.0.1:8000", model="smollm2-135m")
    completion = await client.generate(token_ids, SamplingParams(temperature=1.0, max_tokens=64))
    await client.load_weights(state_dict, version=3)   # temper serve: POST /v1/load_weights

Token ids in and out: the prompt goes as a list of ids to /v1/completions (the OpenAI API allows
it; temper serve, vLLM and SGLang accept it) with `return_token_ids`, so nothing is re-tokenized.
temper serve also returns each token's logprob (the engine's quantity) and policy version. From a
server that returns no ids, the text is tokenized locally (pass `tokenizer`), and the version is
the last one pushed. 429s are retried after their Retry-After; other failures raise.
"""

import asyncio
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
from pydantic import Field

from temper.config import ConfigModel
from temper.errors import TemperError
from temper.generation.completion import Completion
from temper.generation.sampling_params import RequestError, SamplingParams


class RemoteGenerationConfig(ConfigModel):
    """An OpenAI-compatible server to generate on (`temper serve`, vLLM, SGLang)."""

    url: str = "http://127.0.0.1:8000"
    model: str | None = None  # the server's model name; default: what `temper serve` would call the model
    api_key: str | None = None
    timeout_s: float = Field(600.0, gt=0)
    weights_dir: str | None = None  # where pushed weights are written for the server to read (default: temp)
    # temper serve's admin token (its serve.admin_token_file / admin_token_env), for the weight pushes
    admin_token_file: str | None = None
    admin_token_env: str | None = None

    def admin_token(self) -> str | None:
        return read_secret(self.admin_token_file, self.admin_token_env, "remote.admin_token")


def read_secret(file: str | None, env: str | None, what: str) -> str | None:
    """A token from a file (its first line) or an environment variable; None when neither is named.
    TemperError when one is named but empty or missing, or both are."""
    import os

    if file and env:
        raise TemperError(f"{what}: give {what}_file or {what}_env, not both")
    if file:
        try:
            value = Path(file).read_text().strip()
        except OSError as exc:
            raise TemperError(f"{what}_file: cannot read {file} ({exc.strerror})") from None
        source = file
    elif env:
        value, source = os.environ.get(env, "").strip(), f"${env}"
    else:
        return None
    if not value:
        raise TemperError(f"{what}: {source} is empty")
    return value


def default_served_name(model: str) -> str:
    """The API's model name for `model`: a bundled name as is, a folder's name, a GGUF file's stem."""
    p = Path(model)
    if p.suffix == ".gguf":
        return p.stem
    return p.name if ("/" in model or p.exists()) else model


# SamplingParams fields beyond OpenAI's, sent only when they differ from these defaults (plain OpenAI
# servers reject some of them; vLLM's defaults are the same).
OPTIONAL_FIELDS = (("top_k", 0), ("min_p", 0.0), ("repetition_penalty", 1.0), ("presence_penalty", 0.0),
                   ("frequency_penalty", 0.0), ("ignore_eos", False))


def sampling_fields(params: SamplingParams) -> dict[str, Any]:
    """One sample's sampling parameters as vLLM's and temper serve's completions take them: the fields every
    request sends, then those that differ from their defaults."""
    out: dict[str, Any] = {"max_tokens": params.max_tokens, "temperature": params.temperature, "top_p": params.top_p,
                           "n": 1, "logprobs": params.logprobs, "skip_special_tokens": params.skip_special_tokens}
    if params.seed is not None:
        out["seed"] = params.seed
    if params.stop:
        out["stop"] = list(params.stop)
    if params.stop_token_ids:
        out["stop_token_ids"] = list(params.stop_token_ids)
    out.update({name: getattr(params, name) for name, default in OPTIONAL_FIELDS if getattr(params, name) != default})
    if params.structured is not None:  # vLLM's field; temper serve takes it too
        out["structured_outputs"] = params.structured.as_dict()
    return out


class RemoteError(TemperError):
    """The server failed (5xx, unreachable, malformed answer): an infrastructure failure."""


class RemoteClient:
    def __init__(self, base_url: str, model: str, api_key: str | None = None, tokenizer: Any = None,
                 timeout_s: float = 600.0, max_retries: int = 5, weights_dir: str | None = None,
                 admin_token: str | None = None):
        self.base = base_url.rstrip("/").removesuffix("/v1")
        self.model, self.tokenizer, self.timeout_s, self.max_retries = model, tokenizer, timeout_s, max_retries
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.version = 0
        self.weights_dir = weights_dir  # where pushed weights are written (must be readable by the server)
        self.admin_token = admin_token  # temper serve's operator token, sent with weight pushes only
        self._clients: dict[int, httpx.AsyncClient] = {}

    def _http(self) -> httpx.AsyncClient:
        # An httpx client belongs to one event loop; keep one per loop (tests, Ray actors, asyncio.run calls).
        loop = id(asyncio.get_running_loop())
        if loop not in self._clients:
            self._clients[loop] = httpx.AsyncClient(base_url=self.base, headers=self.headers, timeout=self.timeout_s,
                                                    limits=httpx.Limits(max_connections=256))
        return self._clients[loop]

    async def _post(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
        for attempt in range(self.max_retries + 1):
            try:
                r = await self._http().post(path, json=body, headers=headers)
            except httpx.HTTPError as exc:
                raise RemoteError(f"{self.base}{path}: {type(exc).__name__}: {exc}") from None
            if r.status_code == 429 and attempt < self.max_retries:
                await asyncio.sleep(float(r.headers.get("retry-after", "1") or 1))
                continue
            if r.status_code >= 400:
                try:
                    message = r.json()["error"]["message"]
                except (ValueError, KeyError, TypeError):
                    message = r.text[:500]
                cls = RequestError if 400 <= r.status_code < 500 and r.status_code != 429 else RemoteError
                raise cls(f"{self.base}{path}: HTTP {r.status_code}: {message}")
            return r.json()
        raise RemoteError(f"{self.base}{path}: still busy (429) after {self.max_retries} retries")

    def request_body(self, token_ids: list[int], params: SamplingParams) -> dict[str, Any]:
        return {"model": self.model, "prompt": list(token_ids), "return_token_ids": True, **sampling_fields(params)}

    async def generate(self, token_ids: list[int], params: SamplingParams) -> Completion:
        """The GenerationClient call: one sample for one token-id prompt."""
        if params.n != 1:
            raise RequestError("RemoteClient.generate returns one sample; n must be 1")
        data = await self._post("/v1/completions", self.request_body(token_ids, params))
        return self.parse(data, list(token_ids))

    def parse(self, data: dict[str, Any], prompt: list[int]) -> Completion:
        try:
            choice = data["choices"][0]
        except (KeyError, IndexError, TypeError):
            raise RemoteError(f"{self.base}: a completion without choices: {str(data)[:300]}") from None
        text = choice.get("text") or ""
        ids = choice.get("token_ids")
        if ids is None:
            if self.tokenizer is None:
                raise RemoteError(f"{self.base}: the server returned no token ids; pass a tokenizer to RemoteClient")
            ids = self.tokenizer.encode(text, add_special_tokens=False)
        logprobs = choice.get("token_logprobs")
        if logprobs is None:
            logprobs = ((choice.get("logprobs") or {}).get("token_logprobs")) or []
        logprobs = [float(x) if x is not None else 0.0 for x in logprobs]
        if len(logprobs) != len(ids):
            raise RemoteError(f"{self.base}: {len(ids)} tokens but {len(logprobs)} logprobs "
                              "(request logprobs from a server that returns token ids)")
        versions = choice.get("versions") or [self.version] * len(ids)
        finish = choice.get("finish_reason") or "stop"
        return Completion(request_id=str(data.get("id", "")), index=0, prompt_token_ids=prompt, token_ids=list(ids),
                          text=text, logprobs=logprobs, versions=list(versions),
                          finish_reason=finish if finish in ("stop", "length", "abort") else "stop",
                          num_cached_prompt_tokens=int(((data.get("usage") or {}).get("prompt_tokens_details")
                                                        or {}).get("cached_tokens") or 0))

    async def load_weights(self, state_dict: Mapping[str, Any], version: int) -> None:
        """Write the weights as safetensors and ask the server to load them (temper serve's
        /v1/load_weights, with the admin token). The folder must be inside one of the server's
        `weights_dirs`: same machine or shared disk."""
        from safetensors.torch import save_file

        root = Path(self.weights_dir or tempfile.gettempdir()) / f"temper-push-{id(self)}"
        folder = root / f"v{version}"
        folder.mkdir(parents=True, exist_ok=True)
        # Tied weights share storage: safetensors refuses shared tensors, so each is saved contiguous on its own.
        tensors = {k: v.detach().to("cpu").contiguous().clone() for k, v in state_dict.items()}
        await asyncio.to_thread(save_file, tensors, str(folder / "model.safetensors"))
        try:
            await self.load_weights_from(str(folder), version)
        finally:
            for f in folder.iterdir():
                f.unlink()
            folder.rmdir()

    async def load_weights_from(self, folder: str, version: int) -> None:
        admin = {"Authorization": f"Bearer {self.admin_token}"} if self.admin_token else None
        try:
            await self._post("/v1/load_weights", {"path": folder, "version": version}, admin)
        except RequestError as exc:
            if " HTTP 401" in str(exc) or " HTTP 403" in str(exc):  # temper serve's operator routes
                raise RequestError(f"{exc} (the client's admin token: remote.admin_token_file or admin_token_env; "
                                   "its weights_dir must be inside the server's weights_dirs)") from None
            raise
        self.version = version

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
