"""The same agent on a framework: smolagents' ToolCallingAgent (OpenAI function calling through
its OpenAIServerModel) with one `bash` tool on the task's sandbox. smolagents was chosen because
it installs offline from PyPI with nothing beyond what temper already has, and it is a widely
used agent framework. temper runs it once per episode:

    temper eval --model smollm2-135m --suite terminal --limit 2 \
        --agent-command "python examples/agents/smolagents_bash.py"
"""

import os

import httpx
from smolagents import OpenAIServerModel, ToolCallingAgent, tool


@tool
def bash(command: str) -> str:
    """Run a bash command in the task's sandbox (working directory /app) and return its output.

    Args:
        command: the command line to run with bash -c
    """
    r = httpx.post(os.environ["TEMPER_EXEC_URL"], json={"command": command, "timeout": 30}, timeout=60,
                   headers={"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"})
    r.raise_for_status()
    out = r.json()
    return f"exit code {out['exit_code']}\n{out['stdout']}{out['stderr']}"[-2000:]


def main() -> None:
    model = OpenAIServerModel(model_id="policy", api_base=os.environ["OPENAI_BASE_URL"],
                              api_key=os.environ["OPENAI_API_KEY"])
    agent = ToolCallingAgent(tools=[bash], model=model, max_steps=3, verbosity_level=0)
    print(str(agent.run(os.environ["TEMPER_INSTRUCTION"])).strip().replace("\n", " ")[-500:])


if __name__ == "__main__":
    main()
