"""An agent program as people write them: the official `openai` client, one `bash` function tool,
multi-turn until the model answers without calling a tool. temper runs it once per episode:

    temper eval --model smollm2-135m --suite terminal --limit 2 --agent-command "python examples/agents/openai_tools.py"

It reads what temper gives every external agent (docs/agents.md): OPENAI_BASE_URL and OPENAI_API_KEY
(the `openai` client reads them itself), TEMPER_INSTRUCTION (the task) and TEMPER_EXEC_URL (run a
command in the task's sandbox). Its last stdout line is its answer.
"""

import json
import os
import sys

import httpx
import openai

BASH = {"type": "function", "function": {
    "name": "bash", "description": "Run a bash command in the task's sandbox (working directory /app).",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}


def bash(command: str) -> str:
    r = httpx.post(os.environ["TEMPER_EXEC_URL"], json={"command": command, "timeout": 30}, timeout=60,
                   headers={"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"})
    if r.status_code != 200:  # the model reads why (a refused command, a sandbox that is gone)
        return f"error: {r.status_code} {r.text}"[-2000:]
    out = r.json()
    return f"exit code {out['exit_code']}\n{out['stdout']}{out['stderr']}"[-2000:]


def main(max_turns: int = 6) -> None:
    client = openai.OpenAI()
    messages = [{"role": "system", "content": "You solve tasks in a Linux sandbox. Use the bash tool to act; "
                 "answer in plain text when you are done."},
                {"role": "user", "content": os.environ["TEMPER_INSTRUCTION"]}]
    answer = ""
    for _ in range(max_turns):
        try:
            reply = client.chat.completions.create(model="policy", messages=messages, tools=[BASH]).choices[0].message
        except openai.BadRequestError as exc:  # e.g. the conversation outgrew the context: stop with what we have
            print(f"model call refused: {exc.message}", file=sys.stderr)
            break
        messages.append(reply.model_dump(exclude_none=True))
        if not reply.tool_calls:
            answer = reply.content or ""
            break
        for call in reply.tool_calls:
            try:
                output = bash(json.loads(call.function.arguments)["command"])
            except (KeyError, ValueError) as exc:
                output = f"error: bad arguments ({exc})"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
    print(answer.strip().splitlines()[-1] if answer.strip() else "")


if __name__ == "__main__":
    main()
