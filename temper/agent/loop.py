"""The agent loop: plan -> act -> execute -> observe, token ids in and out.

    loop = AgentLoop(client, tokenizer, config)     # client: any GenerationClient; config: AgentConfig
    result = await loop.run(suite.make_env(task))   # EpisodeResult: trajectories, reward, turns

(`temper.agent.runner.run_episode` does both for one task: what training, eval and env QA call.)

Each model turn is generated from the exact token ids so far; tool results are tokenized once
and appended (mask 0). Malformed tool calls, unknown tools and bad arguments come back to the
model as error observations; a final answer in the wrong form is retried with the env's hint;
after repeated failures the loop gives a fallback hint, then ends with the last answer. Engine
errors, engine timeouts and sandbox crashes end the episode as infrastructure failures, except a
crash that the agent's own actions caused (`SandboxCrashed.by_agent`): that episode is scored 0.
"""

import asyncio
import logging
import time
import uuid
from typing import Any

from temper.agent.chat_format import ChatFormat
from temper.agent.config import AgentConfig
from temper.agent.context import SYSTEM_PROMPT, ContextManager, Summarizer, TurnNote
from temper.agent.episode import EpisodeResult, InfraFailure, ToolRecord, TurnRecord, tool_call_counts, turn_actions
from temper.agent.model_summary import ModelSummarizer
from temper.agent.toolcall import EXAMPLE, ToolCall, parse_tool_calls
from temper.agent.tools import BUILTIN, Tool, ToolContext, ToolError
from temper.agent.tools.builtin import settle
from temper.agent.transcript import Transcript
from temper.envs.env import Environment, StepResult
from temper.envs.reward import Reward, episode_info
from temper.envs.sandboxes import crash_reward, is_sandbox_crash
from temper.generation.protocol import ChatTokenizer, GenerationClient, SamplingParams
from temper.trajectory import FailureKind

log = logging.getLogger(__name__)


class SandboxEnded(Exception):
    """The episode's sandbox crashed during a tool call: ends the episode with `reward` (see crash_reward)."""

    def __init__(self, reward: Reward) -> None:
        super().__init__(reward.info.get("error", "sandbox crashed"))
        self.reward = reward


class AgentLoop:
    def __init__(self, client: GenerationClient, tokenizer: ChatTokenizer, config: AgentConfig | None = None,
                 tools: list[Tool] | None = None, summarizer: Summarizer | None = None) -> None:
        self.client, self.tok = client, tokenizer
        self.config = config or AgentConfig()
        self.user_tools = {t.name: t for t in tools or []}
        self.summarizer = summarizer

    async def run(self, env: Environment, group_id: str = "", episode_id: str | None = None,
                  seed: int | None = None) -> EpisodeResult:
        async with env:
            return await Episode(self, env, group_id, episode_id or uuid.uuid4().hex[:10], seed).run()


class Episode:
    def __init__(self, loop: AgentLoop, env: Environment, group_id: str, episode_id: str, seed: int | None) -> None:
        self.loop, self.env, self.cfg = loop, env, loop.config.for_task(env.limits)
        self.group_id, self.episode_id, self.seed = group_id, episode_id, seed
        self.tools = {**{n: BUILTIN[n] for n in env.tools if n in BUILTIN}, **loop.user_tools}
        self.fmt = ChatFormat(loop.tok, list(self.tools.values()))
        summarizer = loop.summarizer
        if summarizer is None and self.cfg.context.summarizer == "model":
            summarizer = ModelSummarizer(loop.client, self.fmt, self.cfg.max_context_tokens,
                                         self.cfg.context.summary_max_tokens)
        self.ctx = ContextManager(self.fmt, self.cfg.max_context_tokens, self.cfg.context, summarizer)
        self.tool_ctx = ToolContext(env=env, timeout_s=self.cfg.tool_timeout_s)
        self.windows: list[Transcript] = []
        self.tr = Transcript()
        self.turns: list[TurnRecord] = []
        self.notes: list[TurnNote] = []
        self.messages: list[dict[str, Any]] = []
        self.timings = {"reset_s": 0.0, "generate_s": 0.0, "tools_s": 0.0, "verify_s": 0.0}
        self.system = self.task_text = self.last_text = ""
        self.restated = self.acting = False

    # -- the episode ------------------------------------------------------------------------
    async def run(self) -> EpisodeResult:
        start, truncated = time.monotonic(), False
        try:
            t = time.monotonic()
            # asyncio.timeout, not wait_for: wait_for runs the work in a task of its own, whose exception
            # goes unretrieved (and is logged with a traceback) when the episode is cancelled meanwhile.
            async with asyncio.timeout(self.cfg.turn_timeout_s):
                obs = await self.env.reset()
            self.timings["reset_s"] = time.monotonic() - t
            self.system = "\n\n".join(x for x in (self.cfg.system_prompt or SYSTEM_PROMPT, self.env.background) if x)
            self.task_text = obs.content
            self.messages = self.ctx.initial(self.system, self.task_text)
            self.new_window(self.messages)
            self.acting = True  # from here on, the sandbox holds what the agent did
            self.tool_ctx.deadline = time.monotonic() + self.cfg.episode_timeout_s  # no command outlives it
            try:
                async with asyncio.timeout(self.cfg.episode_timeout_s):
                    result = await self.act()
            except TimeoutError:  # out of time is the agent's business: score what it did
                truncated, result = True, await self.step(self.last_text)
            truncated = truncated or result.info.get("truncated", False)
            reward = result.reward or Reward()
        except InfraFailure as exc:
            reward = Reward.infra(exc.kind, str(exc))
        except SandboxEnded as exc:
            reward = exc.reward
        except Exception as exc:  # the episode fails alone; the run goes on
            if is_sandbox_crash(exc) and self.acting and getattr(exc, "by_agent", False):
                reward = crash_reward(exc, "after the agent's actions")  # a set-up crash stays infrastructure
            else:
                kind = FailureKind.SANDBOX_CRASH if is_sandbox_crash(exc) else FailureKind.WORKER_ERROR
                log.warning("episode of task %s failed (%s): %s", self.env.task.id, kind.value, exc,
                            exc_info=kind == FailureKind.WORKER_ERROR)
                reward = Reward.infra(kind, f"{type(exc).__name__}: {exc}")
        self.timings["total_s"] = time.monotonic() - start
        return self.result(reward, truncated)

    async def act(self) -> StepResult:
        retries = errors = 0
        while len(self.turns) < self.cfg.max_turns:
            c, text, turn = await self.generate()
            calls = parse_tool_calls(text, self.tools)
            if calls:
                outputs = await self.execute(calls, turn)
                if "submitted" in self.tool_ctx.state:
                    answer = self.tool_ctx.state.pop("submitted") or text
                    result = await self.step(answer)
                    if result.done:
                        return result
                    outputs.append((result.observation.content if result.observation else "", False))
                errors = errors + 1 if all(err for _, err in outputs) else 0
                msgs = [self.fmt.observation_message(out, from_tool=True) for out, _ in outputs]
                if errors >= 2 * self.cfg.max_consecutive_errors:
                    return await self.step(self.last_text)  # fall back: end with what we have
                if errors >= self.cfg.max_consecutive_errors:
                    msgs.append({"role": "user", "content": f"Your last {errors} turns failed. Call a tool exactly "
                                 f"like this:\n{EXAMPLE}\nor give your final answer without a tool call."})
            else:
                hint = self.env.validate(text)
                if hint is not None and retries < self.cfg.max_answer_retries:
                    retries += 1
                    msgs = [{"role": "user", "content": hint}]
                else:
                    result = await self.step(text)
                    if result.done:
                        return result
                    msgs = [{"role": result.observation.role if result.observation else "user",
                             "content": result.observation.content if result.observation else ""}]
            await self.observe(msgs, c.token_ids, turn)
        result = await self.step(self.last_text)  # out of turns
        result.info["truncated"] = True
        return result

    async def generate(self) -> tuple[Any, str, TurnRecord]:
        room = self.cfg.max_context_tokens - len(self.tr)
        # a seed per turn (the episode's, plus the turn's index): turns do not reuse one another's draws
        seed = None if self.seed is None else self.seed + len(self.turns)
        params = SamplingParams(temperature=self.cfg.temperature, top_p=self.cfg.top_p, seed=seed,
                                max_tokens=max(1, min(self.cfg.max_turn_tokens, room)))
        t = time.monotonic()
        try:
            async with asyncio.timeout(self.cfg.turn_timeout_s):
                c = await self.loop.client.generate(list(self.tr.token_ids), params)
        except TimeoutError:
            raise InfraFailure(FailureKind.HARNESS_TIMEOUT,
                               f"generation took over {self.cfg.turn_timeout_s:g}s") from None
        except Exception as exc:
            raise InfraFailure(FailureKind.ENGINE_ERROR, f"generation failed: {type(exc).__name__}: {exc}") from exc
        if c.finish_reason == "error":
            raise InfraFailure(FailureKind.ENGINE_ERROR, f"generation failed: {c.error}")
        dt = time.monotonic() - t
        self.timings["generate_s"] += dt
        self.tr.add_model(c)
        text = self.loop.tok.decode(c.token_ids, skip_special_tokens=True)
        self.last_text = text
        self.messages.append({"role": "assistant", "content": text})
        turn = TurnRecord(len(self.turns), len(self.windows), dt, 0.0, len(c.token_ids), 0, c.finish_reason)
        self.turns.append(turn)
        self.notes.append(TurnNote(text=text, messages=[self.messages[-1]]))
        return c, text, turn

    async def execute(self, calls: list[ToolCall], turn: TurnRecord) -> list[tuple[str, bool]]:
        outputs = []
        for call in calls:
            t = time.monotonic()
            out, err = await self.run_tool(call)
            dt = time.monotonic() - t
            turn.tools_s += dt
            self.timings["tools_s"] += dt
            out = self.ctx.trim(out, self.cfg.context.max_observation_tokens)
            turn.tool_calls.append(ToolRecord(call.name, call.arguments, out[:2000], err, dt))
            self.notes[-1].calls.append(f"{call.name or '?'}({str(call.arguments)[:80]})" + (" [error]" if err else ""))
            outputs.append((f"Error: {out}" if err else out, err))
        return outputs

    async def run_tool(self, call: ToolCall) -> tuple[str, bool]:
        if call.error:
            return call.error, True
        limit = self.cfg.tool_timeout_s + self.cfg.tool_grace_s
        try:
            async with asyncio.timeout(limit):
                return await self.tools[call.name](self.tool_ctx, call.arguments), False
        except ToolError as exc:
            return str(exc), True
        except TimeoutError:
            return f"{call.name} did not finish within {limit:g}s", True
        except Exception as exc:
            if is_sandbox_crash(exc):  # the agent's 0 if its own command broke the sandbox, else infrastructure
                raise SandboxEnded(crash_reward(exc, f"during {call.name}")) from exc
            return f"{call.name} failed: {type(exc).__name__}: {exc}", True

    async def step(self, answer: str) -> StepResult:
        t = time.monotonic()
        # A tool call cut short (its own or the episode's timeout) leaves its command to the sandbox, which
        # kills it at its timeout (at most tool_timeout_s, and by the episode's end): the agent's time, so
        # it is waited for here, never by the verifier (whose timeout would mask the episode).
        crash = await settle(self.tool_ctx.pending)
        self.timings["tools_s"] += time.monotonic() - t
        if crash is not None:
            raise SandboxEnded(crash_reward(crash, "during a tool call cut short"))
        t = time.monotonic()
        try:
            return await self.env.step(answer)
        finally:
            self.timings["verify_s"] += time.monotonic() - t

    # -- context ----------------------------------------------------------------------------
    def new_window(self, messages: list[dict[str, Any]]) -> None:
        self.tr = Transcript()
        self.tr.add_context(self.fmt.prompt_ids(messages))
        self.tr.prefix_len = self.ctx.prefix_len(messages)
        self.messages, self.restated = messages, False
        if len(self.tr) + self.cfg.context.reserve_tokens > self.cfg.max_context_tokens:
            raise InfraFailure(FailureKind.WORKER_ERROR, f"the prompt ({len(self.tr)} tokens) does not fit the "
                               f"token budget ({self.cfg.max_context_tokens}) with room to answer")

    async def observe(self, msgs: list[dict[str, Any]], model_ids: list[int], turn: TurnRecord) -> None:
        """Append observation messages, trimmed to fit; compact into a new window when they cannot."""
        if not self.restated and self.ctx.should_restate(len(self.tr)):
            msgs[-1] = {**msgs[-1], "content": f"{msgs[-1]['content']}\n\n{self.ctx.reminder(self.task_text)}"}
            self.restated = True
        limit = self.cfg.max_context_tokens - self.cfg.context.reserve_tokens
        per_msg = self.cfg.context.max_observation_tokens
        ids = self.fmt.continuation_ids(msgs, model_ids)
        while len(self.tr) + len(ids) > limit and per_msg > self.cfg.context.min_observation_tokens:
            per_msg //= 2
            msgs = [{**m, "content": self.ctx.trim(m["content"], per_msg // len(msgs))} for m in msgs]
            ids = self.fmt.continuation_ids(msgs, model_ids)
        self.notes[-1].observation = "\n".join(m["content"] for m in msgs)
        self.notes[-1].messages += msgs
        if len(self.tr) + len(ids) <= limit:
            self.tr.add_context(ids)
            self.messages += msgs
            turn.observation_tokens = len(ids)
            return
        self.windows.append(self.tr)
        merged = {"role": "user", "content": "\n\n".join(m["content"] for m in msgs)}
        self.new_window(await self.ctx.compact(self.system, self.task_text, self.notes[:-1], merged,
                                               self.notes[-1].messages[0]))
        turn.observation_tokens = len(self.tr)

    def result(self, reward: Reward, truncated: bool) -> EpisodeResult:
        windows = [*self.windows, self.tr] if len(self.tr) else self.windows
        task = self.env.task
        tool_counts = tool_call_counts(self.turns)  # the whole episode's, in every window
        trajs = [w.to_trajectory(
            reward=reward.value, reward_components=dict(reward.components), task_id=task.id, group_id=self.group_id,
            id=f"{task.id}-{self.episode_id}-{i}", failure=reward.failure, truncated=truncated,
            timings=dict(self.timings),
            info={"window": i, "windows": len(windows), "prefix_len": w.prefix_len, "suite": task.suite,
                  "turns": sum(t.window == i for t in self.turns), **tool_counts,
                  "actions": turn_actions(self.turns, i), **episode_info(reward, i == len(windows) - 1),
                  **({"error": reward.info["error"]} if "error" in reward.info else {})},
        ) for i, w in enumerate(windows)]
        return EpisodeResult(task, trajs, reward, self.turns, self.messages, self.last_text)
