"""Planted task folders for the envqa tests: good ones, and one of each kind of bad task."""

import shutil
import textwrap
from pathlib import Path

TOML = '[metadata]\ndifficulty = "easy"\n\n[agent]\ntimeout_sec = {agent}\n\n[verifier]\ntimeout_sec = 30.0\n'
PASS_IF = """#!/bin/bash
mkdir -p /logs/verifier
if {cond}; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""
# The verifier runs with PYTHONSAFEPATH=1 (docs/envs.md): a test imports the workspace's modules by path.
APP_PATH = 'import sys; sys.path.insert(0, "/app"); '
MEDIAN = '''def median(values):
    """The middle value of a list of numbers."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle]
'''
MEDIAN_FIXED = MEDIAN.replace("    return ordered[middle]\n", "    if len(ordered) % 2 == 0:\n"
                              "        return (ordered[middle - 1] + ordered[middle]) / 2\n"
                              "    return ordered[middle]\n")
MODE = '''from collections import Counter


def most_common_word(text):
    """The word that occurs most often in a text (ties: the first one seen)."""
    counts = Counter(text.split())
    return max(counts, key=counts.get)
'''
HUMANEVAL_0 = '''from typing import List


def has_close_elements(numbers: List[float], threshold: float) -> bool:
    """ Check if in given list of numbers, are any two numbers closer to each other than
    given threshold.
    >>> has_close_elements([1.0, 2.0, 3.0], 0.5)
    False
    >>> has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)
    True
    """
'''


def task(root: Path, name: str, instruction: str, solve: str, test: str, files: dict[str, str] | None = None,
         agent_timeout: float = 60.0) -> Path:
    d = root / name
    for sub in ("tests", "solution", "environment"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    (d / "instruction.md").write_text(textwrap.dedent(instruction).strip() + "\n")
    (d / "task.toml").write_text(TOML.format(agent=agent_timeout))
    (d / "solution" / "solve.sh").write_text("#!/bin/bash\n" + textwrap.dedent(solve))
    (d / "tests" / "test.sh").write_text(test)
    for rel, text in (files or {}).items():
        (d / "environment" / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / "environment" / rel).write_text(text)
    return d


def write_file_solve(path: str, text: str) -> str:
    return f"cat > {path} <<'EOF'\n{text}EOF\n"


def median_task(root: Path, name: str = "good-median", rename: bool = False) -> Path:
    code, fixed = MEDIAN, MEDIAN_FIXED
    instruction = ("`/app/stats_util.py` defines `median`, which is wrong for lists of even length. Fix it so "
                   "that it returns the mean of the two middle values for those, and keep it right for odd "
                   "lengths.")
    if rename:  # the same task reworded, with its variables renamed
        for a, b in (("ordered", "xs"), ("middle", "mid"), ("values", "numbers")):
            code, fixed = code.replace(a, b), fixed.replace(a, b)
        instruction = ("In `/app/stats_util.py` the function `median` gives a wrong result when the list has an "
                       "even number of items. Repair it so that it returns the mean of the two middle values "
                       "for those, and keep it right for odd lengths.")
    test = PASS_IF.format(cond=f"cd /app && python3 -c '{APP_PATH}from stats_util import median as m; "
                               "assert m([3, 1, 2]) == 2 and m([4, 1, 3, 2]) == 2.5'")
    return task(root, name, instruction, write_file_solve("/app/stats_util.py", fixed), test,
                {"stats_util.py": code, "README.txt": "Small statistics helpers used by the reports.\n"})


def plant_good(root: Path) -> dict[str, Path]:
    """Two good tasks on the same topic (fixing a small statistics helper) with different files and answers."""
    words = task(root, "good-mode", "`/app/words.py` has `most_common_word`. Write the most common word of "
                 "`/app/speech.txt` to `/app/answer.txt` (one word, lower case).",
                 "cd /app && python3 -c 'import words; print(words.most_common_word(open(\"speech.txt\").read()"
                 ".lower()))' > answer.txt\n",
                 PASS_IF.format(cond='[ "$(cat /app/answer.txt 2>/dev/null)" = "tea" ]'),
                 {"words.py": MODE, "speech.txt": "tea or coffee? tea, said the host, and tea it was: tea for two\n"})
    return {"good": median_task(root), "distinct": words}


def plant_bad(root: Path, good: Path) -> dict[str, Path]:
    done = "[ -f /app/done.txt ]"
    p = {}
    p["broken"] = task(root, "bad-oracle-fails", "Write `ok` to /app/done.txt.", "echo ok > /app/wrong.txt\n",
                       PASS_IF.format(cond=done))
    # Fails one run in 8 at random; its reward also carries a random component, so two runs agree only by
    # a 1-in-32768 chance: flaky whether or not a failure shows in N runs (all N fail: 8^-N).
    p["flaky"] = task(root, "bad-flaky", "Create /app/greeting.txt containing the word hello.",
                      "echo hello > /app/greeting.txt\n",
                      "#!/bin/bash\nmkdir -p /logs/verifier\nr=0\n"
                      "if grep -q hello /app/greeting.txt 2>/dev/null; then r=$(( RANDOM % 8 ? 1 : 0 )); fi\n"
                      'echo "{\\"reward\\": $r, \\"draw\\": $RANDOM}" > /logs/verifier/reward.json\n')
    p["trivial"] = task(root, "bad-trivial", "Write the number of lines of /app/data.txt to /app/n.txt.",
                        "wc -l < /app/data.txt > /app/n.txt\n", PASS_IF.format(cond="[ -f /app/data.txt ]"),
                        {"data.txt": "a\nb\nc\n"})
    p["hackable"] = task(root, "bad-writable-tests", "Append a line reading checked to /app/log.txt.",
                         "echo checked >> /app/log.txt\n",
                         "#!/bin/bash\nmkdir -p /logs/verifier\nif python3 /app/checks/check_log.py; then "
                         "echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n",
                         {"checks/check_log.py": "import sys\nlines = open('/app/log.txt').read().split()\n"
                                                 "sys.exit(0 if 'checked' in lines else 1)\n",
                          "log.txt": "started\n"})
    p["slow"] = task(root, "bad-too-slow", "Run the nightly build script and record its status in /app/status.txt.",
                     "sleep 4\necho built > /app/status.txt\n",
                     PASS_IF.format(cond="grep -q built /app/status.txt 2>/dev/null"), agent_timeout=2.0)
    p["exact"] = root / "good-median-copy"
    shutil.copytree(good, p["exact"])
    p["near"] = median_task(root, "good-median-reworded", rename=True)
    p["humaneval"] = task(root, "copied-humaneval", "Complete this function in `/app/close.py`:\n\n```python\n"
                          + HUMANEVAL_0 + "```",
                          write_file_solve("/app/close.py", HUMANEVAL_0 + "    return any(abs(a - b) < threshold "
                                           "for i, a in enumerate(numbers) for b in numbers[i + 1:])\n"),
                          PASS_IF.format(cond=f"cd /app && python3 -c '{APP_PATH}from close import has_close_elements "
                                              "as f; assert f([1.0, 2.8, 3.0], 0.3) and not f([1.0, 2.0], 0.5)'"))
    p["sensitive"] = task(root, "leaky-customers", "Write the number of customers in /app/customers.csv to "
                          "/app/n.txt.", "echo 2 > /app/n.txt\n",
                          PASS_IF.format(cond='[ "$(cat /app/n.txt 2>/dev/null)" = 2 ]'),
                          {"customers.csv": "name,email,phone,card\n"
                                            "Jane Roe,jane.roe@gmail.com,+1 415 555 0132,4111 1111 1111 1111\n"
                                            "Max Poe,max@example.com,n/a,n/a\n",
                           "deploy.env": "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\n"})
    p["malformed"] = root / "bad-malformed"
    (p["malformed"] / "tests").mkdir(parents=True)
    (p["malformed"] / "instruction.md").write_text("Do something.\n")
    (p["malformed"] / "task.toml").write_text("[agent]\ntimeout_sec = 'soon'\n")
    return p
