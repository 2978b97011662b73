"""The smallest agent program: one chat call with the task as the user turn, the reply printed as the
answer. `examples/train/external-toy.yaml` trains the toy model through it."""

import os

import openai

reply = openai.OpenAI().chat.completions.create(model="policy", messages=[
    {"role": "system", "content": "say"}, {"role": "user", "content": os.environ["TEMPER_INSTRUCTION"]}])
print(reply.choices[0].message.content or "")
