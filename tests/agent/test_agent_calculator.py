"""The calculator tool and the `calc` suite (the tool-use recipe's): the tool evaluates in the
episode's sandbox and refuses anything but arithmetic; an agent that calls it and answers with its
result scores 1, one that answers from its head scores what it knows; the eval summary counts the
correct tool calls."""

import asyncio
import json

from temper.agent import AgentLoop
from temper.agent.episode import tool_call_counts
from temper.envs import parse_spec
from temper.evals.records import ItemRecord
from temper.evals.summary import tool_call_rates


def _call(expression: str) -> str:
    return f'<tool_call>{json.dumps({"name": "calculator", "arguments": {"expression": expression}})}</tool_call>'


def _episode(scripted, tokenizer, turns):
    suite = parse_spec("calc:op=mul,digits=3,n=1,seed=0")
    (task,) = suite.tasks()
    a, b = (int(x) for x in task.prompt.split("What is ")[1].split("?")[0].split(" * "))
    texts = [t.replace("{a}", str(a)).replace("{b}", str(b)).replace("{p}", str(a * b)) for t in turns]
    res = asyncio.run(AgentLoop(scripted(texts), tokenizer).run(suite.make_env(task)))
    return res, a * b


def test_calling_the_calculator_then_answering_scores_1(scripted, smollm2_tokenizer):
    res, product = _episode(scripted, smollm2_tokenizer, [_call("{a} * {b}"), "{p}"])
    assert res.failure is None and res.reward.value == 1.0
    (call,) = res.turns[0].tool_calls
    assert call.name == "calculator" and not call.error and call.output == str(product)  # computed in the sandbox
    assert tool_call_counts(res.turns) == {"tool_calls": 1, "tool_errors": 0}
    # the trajectory keeps the call for `temper dashboard` (info.actions)
    (action,) = res.trajectory.info["actions"]
    assert action["name"] == "calculator" and action["output"] == str(product) and action["turn"] == 0
    assert " * " in action["arguments"]["expression"] and action["error"] is False


def test_the_calculator_refuses_code_and_a_wrong_head_answer_scores_0(scripted, smollm2_tokenizer):
    res, _ = _episode(scripted, smollm2_tokenizer, [_call("__import__('os').system('id')"), "{a}"])
    (call,) = res.turns[0].tool_calls
    assert call.error and "not an arithmetic expression" in call.output
    assert res.reward.value == 0.0 and tool_call_counts(res.turns) == {"tool_calls": 1, "tool_errors": 1}
    assert "calc" in {t.suite for t in parse_spec("calc:n=3").tasks()}
    assert "Use the calculator tool" in parse_spec("calc:n=1").tasks()[0].prompt


def test_summary_rates_of_correct_tool_calls():
    def rec(calls: int, errors: int) -> ItemRecord:
        return ItemRecord(suite="calc", task_id=f"t{calls}{errors}", sample=0, domain="math", reward=0.0,
                          info={"tool_calls": calls, "tool_errors": errors})

    rates = tool_call_rates([rec(2, 1), rec(1, 0), rec(0, 0), rec(1, 1)])
    assert rates == {"calls": 4, "correct": 2, "correct_rate": 0.5, "episodes_with_correct_call": 0.5}
    assert tool_call_rates([]) == {"calls": 0, "correct": 0, "correct_rate": None, "episodes_with_correct_call": None}
