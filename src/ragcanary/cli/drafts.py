"""What bootstrap and import do: suite drafts from live answers or IR test collections."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ragcanary.probe.target import make_client
from ragcanary.suites.loaded import LoadedConfig


async def draft(loaded: LoadedConfig, target: str, queries: Path, depth: int) -> str:
    """`ragcanary bootstrap`: a draft suite from live answers."""
    from contextlib import AsyncExitStack

    from ragcanary.probe.bootstrap import draft_suite, read_queries
    from ragcanary.probe.cycle import open_target

    texts = read_queries(queries)
    cfg = loaded.config.targets[target]
    async with make_client(cfg) as client, AsyncExitStack() as stack:
        asked, embed = await open_target(stack, loaded, target, client)
        return await draft_suite(asked, texts, depth, concurrency=cfg.concurrency, embed=embed)


def import_collection(kind: str, paths: Sequence[Path], out: Path, split: str = "test") -> str:
    """`ragcanary import beir|trec`: write a suite file and say what was written."""
    from ragcanary.suites.importers import read_beir, read_trec
    from ragcanary.suites.suite import dump_suite

    imported = read_beir(paths[0], split) if kind == "beir" else read_trec(paths[0], paths[1])
    dump_suite(imported.cases, out)
    skipped = (
        f"; skipped {imported.skipped} queries without relevant documents"
        if imported.skipped
        else ""
    )
    return f"wrote {len(imported.cases)} cases to {out}{skipped}"
