"""The warm pool serves started sandboxes, re-templates them, refills in the background, stays bounded."""

from pathlib import Path

import pytest
from conftest import MODES, make_config

from temper.sandbox import SandboxPool
from temper.sandbox.aio import AsyncSandboxPool


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", MODES)
def test_pool_serves_warm_sandboxes(mode: str, state_dir: Path, template: Path, public_tmp: Path,
                                    tmp_path: Path) -> None:
    cfg = make_config(mode, state_dir, template, tmp_path, pool_size=2, pool_max=3)
    with SandboxPool(cfg) as pool:
        assert pool.wait_ready(30)
        sb = pool.acquire()  # popped from the idle set, not started (the stats say so; a timing would vary)
        assert sb.warm and pool.stats["warm"] == 1 and pool.stats["cold"] == 0
        sb.write_file("dirty.txt", "x")
        sb.exec("sleep 100 &")
        pool.release(sb)
        # the released sandbox comes back clean (reset in the background), another task's template on demand
        other = public_tmp / f"pool-other-{mode}"
        other.mkdir(exist_ok=True)
        (other / "other.txt").write_text("o")
        seen = set()
        for _ in range(4):
            with pool.sandbox(template=other) as sb2:
                seen.add(sb2.id)
                assert sb2.exec("ls").text == "other.txt\n"
        with pool.sandbox() as sb3:
            assert sb3.exec("ls").text == "hello.txt\npkg\n"
        assert pool.stats["warm"] >= 5
        assert pool.stats["started"] <= cfg.pool_max  # bounded: sandboxes are reused, not piled up


@pytest.mark.timeout(90)
def test_pool_is_bounded_and_async(state_dir: Path, template: Path, tmp_path: Path) -> None:
    import asyncio

    cfg = make_config("bwrap", state_dir, template, tmp_path, pool_size=1, pool_max=2)

    async def main() -> list[str]:
        pool = AsyncSandboxPool(cfg)
        try:
            async def episode(i: int) -> str:
                async with pool.sandbox() as sb:
                    r = await sb.exec(f"cat hello.txt >/dev/null; echo {i} > mine; sleep 0.1; cat mine")
                    return r.text.strip()
            return await asyncio.gather(*(episode(i) for i in range(6)))
        finally:
            await pool.close()

    assert asyncio.run(main()) == [str(i) for i in range(6)]
