"""A `GenerationClient` on a stock vLLM server: token ids in, sampled ids, logprobs and per-token
policy versions out (`/inference/v1/generate`), and new weights pushed into the running server.

    client = VllmClient("http://127.0.0.1:8000", "temper-policy", tokenizer=tok)
    completion = await client.generate(prompt_ids, SamplingParams(temperature=0.8, max_tokens=64))
    await client.load_weights_from("/shared/weights/v3", version=3)

Logprobs are vLLM's processed ones (the server runs with `--logprobs-mode processed_logprobs`):
log softmax(logits / temperature), the quantity the trainer recomputes. Each token's version comes
from the server's weight-version spans, so a sample generated across an update carries both.

A weight update goes through vLLM's RL routes: `/pause?mode=keep` (in-flight requests stay queued),
the load (`/collective_rpc temper_load_weights`: temper's worker extension loads the safetensors in
place; or vLLM's NCCL weight transfer, `vllm_nccl_sync`),
`/reset_prefix_cache?reset_running_requests=true` (no KV computed by the old weights is reused: the
paused requests are recomputed), `/update_weight_version`, `/resume`.
"""

from collections.abc import Awaitable, Callable
from typing import Any

from temper.generation import Completion, RemoteClient, RemoteError, RequestError, SamplingParams
from temper.generation.remote_client import sampling_fields


class VllmClient(RemoteClient):
    """RemoteClient's HTTP plumbing (retries on 429, errors as RequestError / RemoteError) on vLLM's routes."""

    def __init__(self, base_url: str, model: str, tokenizer: Any = None, timeout_s: float = 600.0,
                 api_key: str | None = None, initial_version: int = 0):
        super().__init__(base_url, model, api_key, tokenizer, timeout_s)
        self.initial_version = initial_version  # what the server's initial ("default") weights count as
        self.version = initial_version

    def request_body(self, token_ids: list[int], params: SamplingParams) -> dict[str, Any]:
        return {"model": self.model, "token_ids": list(token_ids), "sampling_params": sampling_fields(params)}

    async def generate(self, token_ids: list[int], params: SamplingParams) -> Completion:
        if params.n != 1:
            raise RequestError("VllmClient.generate returns one sample; n must be 1")
        if not token_ids:
            raise RequestError("VllmClient.generate: an empty prompt")
        if params.prompt_logprobs:  # the server's processed mode would scale them by the temperature
            raise RequestError("VllmClient.generate: prompt_logprobs are not supported on vLLM rollout servers")
        data = await self._post("/inference/v1/generate", self.request_body(token_ids, params))
        return self.parse(data, list(token_ids))

    def parse(self, data: dict[str, Any], prompt: list[int]) -> Completion:
        try:
            choice = data["choices"][0]
            ids = [int(t) for t in choice["token_ids"]]
            content = (choice.get("logprobs") or {}).get("content") or []
            logprobs = [float(c["logprob"]) for c in content]
            tops = [{int(a["token_id"]): float(a["logprob"]) for a in c.get("top_logprobs") or []} for c in content]
        except (KeyError, IndexError, TypeError, ValueError):
            raise RemoteError(f"{self.base}/inference/v1/generate: a malformed answer: {str(data)[:300]}") from None
        if len(logprobs) != len(ids):
            raise RemoteError(f"{self.base}: {len(ids)} tokens but {len(logprobs)} logprobs")
        finish = choice.get("finish_reason") or "stop"
        text = self.tokenizer.decode(ids, skip_special_tokens=True) if self.tokenizer is not None else ""
        return Completion(request_id=str(data.get("request_id", "")), index=0, prompt_token_ids=prompt, token_ids=ids,
                       text=text, logprobs=logprobs, top_logprobs=tops, versions=self.token_versions(choice, len(ids)),
                       finish_reason=finish if finish in ("stop", "length", "abort") else "stop",
                       stop_reason=choice.get("stop_reason"))

    def token_versions(self, choice: dict[str, Any], n: int) -> list[int]:
        """Per output token, the policy version from the server's spans ({"version", "start", "end"});
        the initial weights ("default") are `initial_version`."""
        out = [self.version] * n
        for span in choice.get("weight_versions") or []:
            v = str(span.get("version"))
            version = int(v) if v.lstrip("-").isdigit() else self.initial_version
            for i in range(max(0, int(span["start"])), min(n, int(span["end"]))):
                out[i] = version
        return out

    async def load_weights_from(self, folder: str, version: int) -> None:
        """Load the safetensors in `folder` (readable by the server) into the running server as `version`
        (the filesystem hand-off, through temper's worker extension)."""
        await self.update_weights(lambda: self._post("/collective_rpc", {"method": "temper_load_weights",
                                                                         "args": [folder]}), version)

    async def update_weights(self, load: Callable[[], Awaitable[Any]], version: int) -> None:
        """vLLM's RL round trip around `load` (which puts the new weights into the server): in-flight
        requests are kept paused meanwhile and go on under the new weights, recomputing their KV."""
        await self._post_query("/pause", {"mode": "keep"})
        try:
            await load()
            await self._post_query("/reset_prefix_cache", {"reset_running_requests": "true"})
            await self._post("/update_weight_version", {"new_version": str(version)})
            self.version = version
        finally:
            await self._post_query("/resume", {})

    async def server_version(self) -> str:
        r = await self._http().get("/weight_info")
        r.raise_for_status()
        return str(r.json()["weight_version"])

    async def weights_digest(self) -> str:
        """A digest of the server's parameters (temper's worker extension), to check an update landed."""
        return (await self._post("/collective_rpc", {"method": "temper_weights_digest"}))["results"][0]

    async def _post_query(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        try:
            r = await self._http().post(path, params=params)
        except Exception as exc:  # httpx errors: the server is gone or hung
            raise RemoteError(f"{self.base}{path}: {type(exc).__name__}: {exc}") from None
        if r.status_code >= 400:
            raise RemoteError(f"{self.base}{path}: HTTP {r.status_code}: {r.text[:300]}")
        return r.json() if r.content else {}
