"""Warm-start transcripts for the tool-use recipe: calc tasks (a seed no training or evaluation
suite uses) solved the way the built-in agent loop renders them: the system prompt with the
calculator's tool block, the task, a calculator call, the tool's result, the number.

    python examples/tool_use/make_sft_data.py runs/tool-use/sft.jsonl [N]

SmolLM2-135M-Instruct writes no tool call at all on its own (0 of 24 `calc` tasks at T=0.8; 2 of
24, both malformed, with the call's format shown in the prompt), so RL has nothing to reinforce
until a short SFT has shown it the format.
"""

import json
import sys
from pathlib import Path

from temper.agent.chat_format import ChatFormat
from temper.agent.tools.builtin import BUILTIN
from temper.envs import parse_spec
from temper.models import Tokenizer, resolve_model

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def main(out: str, n: int = 16) -> None:
    fmt = ChatFormat(Tokenizer.from_folder(resolve_model("smollm2-135m")), [BUILTIN["calculator"]])
    rows = []
    for task in parse_spec(f"calc:op=mul,digits=3,n={n},seed=777").tasks():
        expr = task.prompt.split("What is ", 1)[1].split("?", 1)[0]
        call = json.dumps({"name": "calculator", "arguments": {"expression": expr}})
        answer = str(task.payload["answer"])
        rows.append({"messages": [fmt.system_message(SYSTEM), {"role": "user", "content": task.prompt},
                                  {"role": "assistant", "content": f"<tool_call>\n{call}\n</tool_call>"},
                                  fmt.observation_message(answer, from_tool=True),
                                  {"role": "assistant", "content": answer}]})
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {len(rows)} transcripts to {out}")


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
