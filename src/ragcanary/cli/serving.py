"""What serve and demo do: the daemon, and the bundled retriever it watches in the demo."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from rich.console import Console

from ragcanary.cli.cycles import run_once
from ragcanary.errors import UsageError


def run_demo(
    mode: str,
    port: int,
    listen: str,
    every: str,
    workdir: Path,
    console: Console,
    once: bool = False,
    run_for: float | None = None,
) -> int:
    """`ragcanary demo`: the bundled retriever and the daemon watching it (or one gated run)."""
    import asyncio

    try:
        from ragcanary.demo.retriever import MODES, BackgroundServer
    except ModuleNotFoundError as exc:
        if exc.name != "bm25s":
            raise
        raise UsageError(
            "the demo retriever needs the demo extra: pip install 'ragcanary[demo]'"
        ) from None
    from ragcanary.serve.http.protocol import check_address
    from ragcanary.suites.loaded import load_config

    if mode not in MODES:
        raise UsageError(f"--drift {mode}: unknown mode; use one of {', '.join(MODES)}")
    if not once:
        check_address(listen)  # before the retriever starts and the banner is printed
    with BackgroundServer(port=port, mode=mode) as retriever:
        path = write_demo_config(workdir, retriever.port, listen, every)
        loaded = load_config(path, {})
        api = f"http://{_browsable(loaded.config.listen)}"
        if not once:
            console.print(f"open {api}/ui/ in a browser: what regressed, and why", soft_wrap=True)
        console.print(
            f"demo retriever: {retriever.url} (mode [bold]{mode}[/]); config: {path}",
            soft_wrap=True,
        )
        if once:
            reports = asyncio.run(run_once(loaded, [("demo", "demo-bm25")], [], console))
            return {"ok": 0, "regression": 1, "unavailable": 3}[reports[0].outcome]
        cli = _runnable_cli()
        console.print(
            f"""ragcanary is watching it every {every}:
  web pages   {api}/ui/
  metrics     {api}/metrics
  runs        {api}/api/v1/runs?suite=demo&target=demo-bm25
  API docs    {api}/docs
Switch the retriever into an incident while it runs (drop-docs, shift-scores, shuffle, down):
  curl -X POST {retriever.url}/mode -H 'content-type: application/json' -d '{{"mode": "drop-docs"}}'
Then see what changed: {api}/ui/ or
  {cli} diff -c {path} --suite demo --target demo-bm25
  curl -s {api}/metrics | grep -E 'ragcanary_(hit_rate|regression|rank_overlap|score_drift)'
Ctrl-C stops the demo.""",
            highlight=False,
            markup=False,
            soft_wrap=True,  # never break the commands a newcomer copies
        )
        return serve(path, {}, run_for=run_for)


DEMO_CONFIG = """\
# Written by `ragcanary demo`: the bundled BM25 retriever and its hand-labelled suite.
storage: sqlite:///{workdir}/ragcanary.db
listen: {listen}
targets:
  demo-bm25:
    url: http://127.0.0.1:{port}/search
    method: POST
    body: {{q: "{{query}}", limit: "{{k}}"}}
    results: hits
    id: id
    score: score
    # 200 when the index holds the document, 404 when not: names the ids that left the index.
    lookup: "/docs/{{id}}"
    timeout: 5s
    concurrency: 8
suites:
  demo:
    cases: suite.yaml
    targets: [demo-bm25]
    every: {every}
    k: [1, 3, 5, 10]
    depth: 10
    thresholds:
      hit_rate: {{5: 0.6}}
      max_drop: 0.02
    # 80 % of the canaries answered with a relevant document in the top 5 (healthy: 82 %).
    slo: {{objective: 0.8, window: 30d, good: "hit_rate@5"}}
"""


def _browsable(listen: str) -> str:
    """HOST:PORT a browser on this machine opens for ``listen`` (a wildcard host is not one)."""
    host, _, port = listen.rpartition(":")
    if host in ("0.0.0.0", "[::]", ""):
        host = "127.0.0.1"
    return f"{host}:{port}"


def _runnable_cli() -> str:
    """How to call ragcanary from here: after `make demo` it is .venv/bin/ragcanary, off PATH.

    Said the way the README says it (a path relative to the working directory).
    """
    import os
    import shutil
    import sys

    if shutil.which("ragcanary"):
        return "ragcanary"
    beside = Path(sys.executable).with_name("ragcanary")
    if beside.exists():
        try:
            return os.path.relpath(beside)
        except ValueError:
            return str(beside)
    return f"{sys.executable} -m ragcanary"


def write_demo_config(workdir: Path, port: int, listen: str, every: str) -> Path:
    """Write the demo's config and suite into ``workdir`` with a fresh database; return the config.

    Each demo starts from an empty database so that a baseline left by an earlier demo,
    perhaps in a degraded mode, cannot confuse a newcomer.
    """
    from importlib.resources import files

    workdir.mkdir(parents=True, exist_ok=True)
    for leftover in workdir.glob("ragcanary.db*"):
        leftover.unlink()
    suite = files("ragcanary.demo").joinpath("suite.yaml").read_text(encoding="utf-8")
    (workdir / "suite.yaml").write_text(suite, encoding="utf-8")
    path = workdir / "ragcanary.yaml"
    text = DEMO_CONFIG.format(port=port, workdir=workdir.resolve(), listen=listen, every=every)
    path.write_text(text, encoding="utf-8")
    return path


def serve(config_file: Path, environ: Mapping[str, str], run_for: float | None = None) -> int:
    """`ragcanary serve`: load the config, set up logging once, run the daemon until stopped.

    ``run_for`` stops it after that many seconds (the demo's ``--for``).
    """
    import asyncio

    from ragcanary.logs import RedactSecrets, configure_logging
    from ragcanary.serve.daemon import Daemon
    from ragcanary.serve.http.protocol import check_address
    from ragcanary.serve.process_tuning import raise_file_limit, tune_collector, tune_switching
    from ragcanary.suites.loaded import load_config

    raise_file_limit()
    loaded = load_config(config_file, environ)
    check_address(loaded.config.listen)
    redactor = RedactSecrets(loaded.secrets)
    configure_logging(loaded.config.log_level, loaded.config.log_format, redactor)
    # A reload reads the config with the environment it was loaded with, --listen included
    # (RAGCANARY_LISTEN): with os.environ alone the file's listen: would come back.
    daemon = Daemon(config_file, dict(environ), loaded, redactor=redactor)
    tune_collector()
    tune_switching()

    async def main() -> int:
        if run_for is not None:
            asyncio.get_running_loop().call_later(run_for, daemon.request_stop, "--for elapsed")
        return await daemon.run()

    return asyncio.run(main())
