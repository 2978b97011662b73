"""The engine: requests in, completions out. Each step reads schedule -> run -> postprocess."""

import itertools
import threading
from collections.abc import Mapping
from collections.abc import Sequence as Seq

import torch

from temper import native
from temper.engine.block_manager import BlockManager
from temper.engine.config import EngineConfig
from temper.engine.fair_lock import FairLock
from temper.engine.grammar import Grammars, token_bitmask
from temper.engine.kv_cache import KVCache, kv_bytes_per_token
from temper.engine.model_runner import ModelRunner
from temper.engine.requests import FinishCallback, Request, TokenCallback, eos_ids, prompt_ids
from temper.engine.sampler import Sampler
from temper.engine.scheduler import ScheduledSeq, Scheduler
from temper.engine.sequence import Sequence, Status
from temper.engine.speculator import Speculator
from temper.errors import TemperError
from temper.generation.completion import Completion, TokenEvent
from temper.generation.sampling_params import RequestError, SamplingParams
from temper.models import LlamaForCausalLM


class LLMEngine:
    def __init__(self, model: LlamaForCausalLM, tokenizer=None, config: EngineConfig | None = None, version: int = 0,
                 draft_model: LlamaForCausalLM | None = None):
        """`draft_model`: a built draft for speculative.method='draft' (instead of a name in the config)."""
        self.config = config = config or EngineConfig()
        self.model, self.tokenizer, self.version = model.eval(), tokenizer, version
        # one GEMM for q/k/v and one for gate/up, on packed weights, and temper's C++ kernels where they run
        # (GEMMs of 1 to 4 rows, RMSNorm, RoPE, SwiGLU, sampling); the parameters stay the same objects
        kernels = native.use(config.native_kernels, next(model.parameters()).device)
        model.prepare_inference(pack=config.packed_weights, native=kernels)
        mcfg = model.config
        self.max_model_len = config.max_model_len or mcfg.max_position_embeddings
        self.kv_bytes_per_token = kv_bytes_per_token(mcfg, config.kv_dtype, config.block_size)
        num_blocks = config.kv_budget_bytes // (self.kv_bytes_per_token * config.block_size)
        # Never more than a full batch of full-length sequences can use (small models, big budgets).
        num_blocks = min(num_blocks, config.max_num_seqs * -(-self.max_model_len // config.block_size) + 1)
        # Everything the engine allocates follows the model's parameters (runtime.device chose them).
        self.device = next(model.parameters()).device
        if num_blocks < 1:
            raise TemperError(f"engine.kv_budget_bytes={config.kv_budget_bytes} holds no block of "
                              f"{config.block_size} tokens ({self.kv_bytes_per_token} bytes/token)")
        self.cache = KVCache(mcfg, num_blocks, config.block_size, config.kv_dtype, self.device)
        self.blocks = BlockManager(num_blocks, config.block_size, config.prefix_caching)
        self.scheduler = Scheduler(config, self.blocks)
        self.runner = ModelRunner(model, self.cache, config, self.blocks.generation)
        self.sampler = Sampler(native=kernels)
        self.stats = {"steps": 0, "draft_tokens": 0, "accepted_tokens": 0, "generated_tokens": 0,
                      "forked_samples": 0, "window_released_blocks": 0}
        self.speculator = Speculator(config.speculative, model, self.max_model_len, self.stats, draft_model)
        self.eos_ids = eos_ids(tokenizer, mcfg.eos_token_id)
        self.grammars = Grammars(tokenizer, mcfg.vocab_size, sorted(self.eos_ids))
        self.requests: dict[str, Request] = {}
        self.lock = FairLock()  # one step, abort or weight update at a time, in arrival order
        self._intake_lock = threading.Lock()
        self._incoming: list[Request] = []
        self._finished: list[Completion] = []  # samples finished in this step (step returns them)
        self._ids_in_use: set[str] = set()
        self._ids = itertools.count()
        self._seed_rng = torch.Generator().manual_seed(config.seed)

    @classmethod
    def from_pretrained(cls, name_or_path: str, config: EngineConfig | None = None,
                        device: torch.device | str = "cpu") -> "LLMEngine":
        from temper.models import load_model  # provided by temper.models (checkpoints + tokenizers)

        loaded = load_model(name_or_path, device=device)
        return cls(loaded.model, loaded.tokenizer, config)

    # ---- requests -------------------------------------------------------------------------
    def add_request(self, prompt: str | Seq[int], params: SamplingParams | None = None, request_id: str | None = None,
                    on_token: TokenCallback | None = None, on_finish: FinishCallback | None = None,
                    speculate: bool = True) -> str:
        """Queue a request; raises RequestError (naming the request and field) if it cannot run.
        `speculate=False`: its samples never draft, even where the engine speculates (serve's standard variant)."""
        params = params or SamplingParams()
        # Checked and queued without the step lock: an event loop adding requests never waits for a step.
        with self._intake_lock:
            request_id = request_id if request_id is not None else f"req-{next(self._ids)}"
            where = f"request {request_id!r}"
            if request_id in self._ids_in_use:
                raise RequestError(f"{where}: request_id is already in use")
            params.validate(where)
            # a sliding window releases blocks as a prompt is prefilled: any length fits that its window does
            held = self.blocks.num_blocks * self.config.block_size if not self.runner.window else self.max_model_len
            ids = prompt_ids(prompt, self.tokenizer, where, self.max_model_len, held, self.model.config.vocab_size)
            grammar = params.structured
            seqs = []
            for i in range(params.n):
                seed = params.seed + i if params.seed is not None else int(
                    torch.randint(2**62, (1,), generator=self._seed_rng))
                seqs.append(Sequence(next(self._ids), request_id, i, ids, params, seed, arrival=next(self._ids),
                                     speculate=speculate))
                if grammar is not None:  # compiled once (cached), a matcher per sample
                    seqs[-1].matcher = self.grammars.matcher(grammar, where)
            self._ids_in_use.add(request_id)
            self._incoming.append(Request(request_id, seqs, on_token, on_finish))
            return request_id

    def _admit_incoming(self) -> None:
        with self._intake_lock:
            incoming, self._incoming = self._incoming, []
        for req in incoming:
            self.requests[req.request_id] = req
            for seq in req.seqs:
                self.scheduler.add(seq)

    def abort(self, request_id: str) -> list[Completion]:
        """Stop a request now; its samples come back with their partial tokens (finish_reason 'abort')."""
        with self.lock:
            self._admit_incoming()
            req = self.requests.get(request_id)
            if req is None:
                return []
            for seq in req.seqs:
                if not seq.finished:
                    self._finish(seq, "abort")
            self.speculator.retain(self.scheduler.running)
            self._finished = [c for c in self._finished if c.request_id != request_id]  # handed out here
            return list(req.done)

    def has_unfinished(self) -> bool:
        return bool(self._incoming or self.scheduler.waiting or self.scheduler.running)

    # ---- the step -------------------------------------------------------------------------
    def step(self) -> list[Completion]:
        """One scheduling round: schedule -> run -> postprocess; returns the samples that finished in it."""
        with self.lock:
            self._admit_incoming()
            batch = self.scheduler.schedule(self.speculator.drafts(self.scheduler.running))
            self._end_out_of_room()
            if batch:
                logits, spans = self.runner.run(batch)
                self._postprocess(batch, logits, spans)
                self.stats["steps"] += 1
            self.speculator.retain(self.scheduler.running)
            done, self._finished = self._finished, []
            return done

    def _end_out_of_room(self) -> None:
        for seq in self.scheduler.out_of_room:
            self._finish(seq, "length" if seq.num_output_tokens else "error",
                         error=None if seq.num_output_tokens else
                         f"request {seq.request_id!r}: the KV budget cannot hold this sequence")
        self.scheduler.out_of_room.clear()

    def _postprocess(self, batch: list[ScheduledSeq], logits: torch.Tensor, spans: list[tuple[int, int]]) -> None:
        rows: list[int] = []
        seqs: list[Sequence] = []
        before: list[list[int]] = []  # per row: the drafts sampled ahead of it (its grammar state follows them)
        sample_spans = []
        forks: dict[int, tuple[list[Sequence], int]] = {}  # parent seq id -> (siblings, their first sample)
        room = [self.blocks.num_free, self.config.max_num_seqs - len(self.scheduler.running)]
        claimed: set[int] = set()  # waiting samples already forked from a parent in this step
        for item, (first, count) in zip(batch, spans, strict=True):
            k = 1 + len(item.drafts) if item.completes else 0
            if count > k:
                self._score_prompt(item.seq, logits[first:first + count - k])
            sample_spans.append((len(rows), k))
            rows.extend(range(first + count - k, first + count))
            seqs.extend([item.seq] * k)
            before.extend(item.drafts[:j] for j in range(k))
            if kids := (self._forkable(item, room, claimed) if k else []):
                # The siblings' first tokens come from the same prompt logits, each with its own generator.
                forks[item.seq.seq_id] = (kids, len(rows))
                rows.extend([first + count - 1] * len(kids))
                seqs.extend(kids)
                before.extend([] for _ in kids)
        masks = token_bitmask([(s.matcher, b) for s, b in zip(seqs, before, strict=True)], logits.shape[-1])
        if not rows:
            tokens, logprobs, tops = [], [], []
        else:  # when every row samples, in order (decoding), the logits go as they are: no copy
            tokens, logprobs, tops = self.sampler(logits if rows == list(range(len(logits))) else logits[rows], seqs,
                                                  masks)
        for item, (first, count) in zip(batch, sample_spans, strict=True):
            seq = item.seq
            if not count:
                seq.num_computed += item.num_tokens
                self._published(seq)
                continue
            row = tokens[first:first + count]
            accepted = self.speculator.accept(seq, item.drafts, row) if item.drafts else 0
            # KV of the fed tokens up to the last accepted draft is valid: publish it before the
            # sample can finish (and free its blocks), so that identical prompts reuse it.
            seq.num_computed += item.num_tokens - len(item.drafts) + accepted
            self._published(seq)
            if seq.seq_id in forks:
                kids, at = forks[seq.seq_id]
                for i, kid in enumerate(kids):
                    self._start_fork(seq, kid, tokens[at + i], logprobs[at + i], tops[at + i])
            for j in range(accepted + 1):
                self._append(seq, row[j], logprobs[first + j], tops[first + j])
                if seq.finished:
                    break
            if not seq.finished:
                self.blocks.trim(seq, len(seq))

    def _published(self, seq: Sequence) -> None:
        """Put the sequence's completed blocks in the prefix cache; with a sliding window, then release those no
        query from now on sees, so a sequence holds its sinks' and its window's blocks however long it grows."""
        self.blocks.publish(seq)
        if self.runner.window:
            self.stats["window_released_blocks"] += self.blocks.release_outside_window(seq, self.runner.window,
                                                                                        self.runner.sinks)

    def _forkable(self, item: ScheduledSeq, room: list[int], claimed: set[int]) -> list[Sequence]:
        """Waiting samples of the same request that can take over this one's just-computed prompt
        (parallel sampling: the prompt is computed once, not once per sample). `room` = [free
        blocks, free sequence slots] and `claimed` (siblings another sample of the request took this
        step) are updated with what the forks take."""
        seq, bs = item.seq, self.config.block_size
        if seq.num_output_tokens or item.drafts or seq.params.prompt_logprobs or seq.kv_epoch != self.blocks.epoch:
            return []
        kids = [s for s in self.scheduler.waiting if s.request_id == seq.request_id and not s.block_table
                and not s.num_output_tokens and s.seq_id not in claimed]
        copies = len(seq) % bs != 0  # the partly filled last block is copied, not shared
        n = max(0, min(len(kids), room[1], room[0] if copies else len(kids)))
        room[0] -= n if copies else 0
        room[1] -= n
        claimed.update(kid.seq_id for kid in kids[:n])
        return kids[:n]

    def _start_fork(self, parent: Sequence, kid: Sequence, token: int, logprob: float,
                    top: dict[int, float] | None) -> None:
        block = self.blocks.fork(parent, kid)
        if block is not None:
            self.cache.copy_block(parent.block_table[len(kid.block_table) - 1], block)
        self.scheduler.start_forked(kid)
        self.stats["forked_samples"] += 1
        self._append(kid, token, logprob, top)

    def _score_prompt(self, seq: Sequence, logits: torch.Tensor) -> None:
        """Rows of a prompt chunk: row j predicts prompt token num_computed + j + 1."""
        lp = torch.log_softmax(logits.float(), dim=-1)
        start = seq.num_computed
        targets = seq.token_ids[start + 1:start + 1 + lp.shape[0]]
        rows = torch.arange(len(targets), device=lp.device)
        chosen = lp[rows, torch.tensor(targets, dtype=torch.long, device=lp.device)].tolist()
        k = seq.params.logprobs
        top_vals, top_ids = torch.topk(lp, k, dim=-1) if k else (None, None)
        for j, value in enumerate(chosen):
            if start + j + 1 == len(seq.prompt_logprobs) < seq.num_prompt_tokens:
                seq.prompt_logprobs.append(value)
                seq.prompt_top_logprobs.append(
                    dict(zip(top_ids[j].tolist(), top_vals[j].tolist(), strict=True)) if k else None)

    def _append(self, seq: Sequence, token: int, logprob: float, top: dict[int, float] | None) -> None:
        seq.append(token, logprob, self.version, top)
        self.stats["generated_tokens"] += 1
        req = self.requests[seq.request_id]
        if req.on_token is not None:
            req.on_token(TokenEvent(seq.request_id, seq.index, token, logprob, self.version, top))
        p = seq.params
        if seq.matcher is not None and not seq.matcher.accept_token(token):
            self._finish(seq, "error", error=f"request {seq.request_id!r}: token {token} left the "
                                             "sampling_params.structured grammar")
        elif (token in p.stop_token_ids or (not p.ignore_eos and token in self.eos_ids)
              or (seq.matcher is not None and seq.matcher.is_terminated())):  # the grammar is done (ignore_eos too)
            self._finish(seq, "stop", token)
        elif p.stop and self.tokenizer is not None and self._stop_string(seq):
            pass
        elif seq.num_output_tokens >= p.max_tokens or len(seq) >= self.max_model_len:
            self._finish(seq, "length")

    def _stop_string(self, seq: Sequence) -> bool:
        text = self.tokenizer.decode(seq.output_token_ids, skip_special_tokens=seq.params.skip_special_tokens)
        hits = [(text.find(s), s) for s in seq.params.stop if s in text]
        if not hits:
            return False
        pos, stop = min(hits)
        self._finish(seq, "stop", stop, text=text[:pos])
        return True

    def _finish(self, seq: Sequence, reason: str, stop: str | int | None = None, text: str | None = None,
                error: str | None = None) -> None:
        self.scheduler.remove(seq)
        seq.status, seq.finish_reason, seq.stop_reason, seq.error = Status.FINISHED, reason, stop, error
        if text is not None:
            seq.text = text
        elif self.tokenizer is not None:
            seq.text = self.tokenizer.decode(seq.output_token_ids, skip_special_tokens=seq.params.skip_special_tokens)
        req = self.requests[seq.request_id]
        completion = seq.to_completion()
        req.done.append(completion)
        self._finished.append(completion)
        if len(req.done) == len(req.seqs):  # its last sample: the request leaves (its id can be used again)
            del self.requests[seq.request_id]
            with self._intake_lock:
                self._ids_in_use.discard(seq.request_id)
        if req.on_finish is not None:
            req.on_finish(completion)

    # ---- batch API and RL hooks -----------------------------------------------------------
    def generate(self, prompts: str | Seq[int] | Seq[str | Seq[int]],
                 params: SamplingParams | Seq[SamplingParams] | None = None) -> list[Completion]:
        """Generate for every prompt; returns prompts x n completions in order. A request that
        cannot run comes back with finish_reason 'error' and its message; the others run."""
        if isinstance(prompts, str) or (prompts and isinstance(prompts[0], int)):
            prompts = [prompts]  # one prompt
        plist = list(params) if isinstance(params, list | tuple) else [params or SamplingParams()] * len(prompts)
        results: dict[str, list[Completion]] = {}  # request id -> its completions, in prompt order
        for i, (prompt, p) in enumerate(zip(prompts, plist, strict=True)):
            rid = f"gen-{next(self._ids)}-{i}"
            results[rid] = []
            try:
                self.add_request(prompt, p, rid, on_finish=results[rid].append)
            except RequestError as exc:
                results[rid].append(Completion(rid, 0, [], finish_reason="error", error=str(exc)))
        while self.has_unfinished() and any(rid in self._ids_in_use for rid in results):
            self.step()
        return [c for done in results.values() for c in sorted(done, key=lambda c: c.index)]

    def load_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Copy new weights in place between steps; cached prefixes are dropped (their KV is stale).
        Sequences in flight keep going (partial rollouts); each token records the version that sampled it."""
        with self.lock:
            params = dict(self.model.named_parameters(remove_duplicate=False))
            params.update(dict(self.model.named_buffers()))
            unknown = [k for k in state_dict if k not in params]
            if unknown:
                raise TemperError(f"load_weights: unknown parameter {unknown[0]!r} ({len(unknown)} unknown)")
            with torch.no_grad():
                for name, tensor in state_dict.items():
                    params[name].copy_(tensor)
            self.blocks.invalidate()
            self.speculator.retain(())  # a draft that shares the weights has stale caches now
            self.version = version

