"""Environment QA: validate every task of a suite and stratify it (see docs/envqa.md).

    report = asyncio.run(run_envqa(EnvQAConfig.from_recipe(dict(suite="terminal", policy=False, out="runs/qa"))))
    # runs/qa/report.json, summary.md/.html, pass_rates.png, clusters.json, manifest.json
"""

from temper.envqa.check_run import run_envqa
from temper.envqa.config import EnvQAConfig
from temper.envqa.verdicts import BAD, STRATA, VERDICTS

__all__ = ["BAD", "STRATA", "VERDICTS", "EnvQAConfig", "run_envqa"]
