"""The alert runbooks: one per alert, linked from the rules, quoting commands that exist."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import typer.main
from alert_contract import CONTRACT, SLO_ALERTS, alert_rules

from ragcanary.cli.app import app
from ragcanary.serve.http.ui import runbookpage

ROOT = Path(__file__).resolve().parents[2]
# In the package, which serves them at /ui/runbooks/; docs/runbooks links to this folder.
RUNBOOKS = ROOT / "src" / "ragcanary" / "serve" / "http" / "ui" / "runbooks"
PAGES = sorted(p for p in RUNBOOKS.glob("*.md") if p.name != "README.md")


def ragcanary_commands(text: str) -> list[list[str]]:
    """The argument lists of the `ragcanary ...` commands in a Markdown text's code."""
    fenced = re.findall(r"^```\w*\n(.*?)^```", text, re.M | re.S)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S))
    commands = []
    for code in [*fenced, *inline]:
        code = code.replace("\\\n", " ")  # shell line continuations
        # `exec ragcanary ragcanary diff`: the first one names the container, not the CLI.
        command = r"(?:^|[\s($])ragcanary (?!\s*ragcanary )([^#|)\n]*)"
        for match in re.finditer(command, code, re.M):
            commands.append(shlex.split(match.group(1).replace("$", "")))
    return commands


def test_there_is_a_runbook_for_each_alert_of_the_contract_and_no_other() -> None:
    """<AlertName>.md exists for exactly the alerts of the rules file, and the daemon serves
    exactly those."""
    assert {p.stem for p in PAGES} == CONTRACT | SLO_ALERTS
    assert runbookpage.names() == CONTRACT | SLO_ALERTS


def test_docs_runbooks_is_the_packaged_folder_not_a_copy() -> None:
    """One copy of each runbook: docs/runbooks is a link to the folder the package ships."""
    docs = ROOT / "docs" / "runbooks"
    assert docs.is_symlink()
    assert docs.resolve() == RUNBOOKS.resolve()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_runbook_is_titled_with_its_alert_and_has_every_section(page: Path) -> None:
    """What to check first, what it means, likely causes, first commands, how to resolve."""
    text = page.read_text(encoding="utf-8")
    assert text.startswith(f"# {page.stem}\n")
    sections = re.findall(r"^## (.+)$", text, re.M)
    expected = ["Check first", "What it means", "Likely causes", "First commands", "Resolve"]
    assert [s for s in sections if s in expected] == expected, f"{page.name}: {sections}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_runbook_says_first_what_to_check(page: Path) -> None:
    """The page's first section is a short "Check first", before any explanation."""
    text = page.read_text(encoding="utf-8")
    first = re.search(r"^## (.+)$", text, re.M)
    assert first, f"{page.name} has no sections"
    assert first.group(1) == "Check first", f"{page.name} starts with {first.group(1)!r}"
    body = text[first.end() : text.index("\n## ", first.end())].strip()
    assert body, f"{page.name}: Check first is empty"
    assert len(body.split()) <= 80, f"{page.name}: Check first is not short ({len(body.split())})"


def test_every_alert_rule_links_its_runbook() -> None:
    """Each rule's runbook_url ends in its alert's runbook page, which the package holds."""
    rules = alert_rules()
    assert {rule["alert"] for rule in rules} == CONTRACT
    for rule in rules:
        url = rule["annotations"]["runbook_url"]
        assert f"/ui/runbooks/{rule['alert']}{{{{ end }}}}" in url, url
        assert (RUNBOOKS / f"{rule['alert']}.md").is_file()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_runbook_names_dashboards_that_exist(page: Path) -> None:
    """The dashboards a runbook sends on-call to are titles of grafana/dashboards/."""
    titles = {
        json.loads(p.read_text(encoding="utf-8"))["title"].removeprefix("ragcanary / ")
        for p in (ROOT / "grafana" / "dashboards").glob("*.json")
    }
    header = re.search(r"\*\*Dashboards?\*\* (.*?)\n\n", page.read_text(encoding="utf-8"), re.S)
    assert header, f"{page.name} names no dashboard"
    named = {t for t in titles if t.lower() in " ".join(header.group(1).split()).lower()}
    assert named, f"{page.name}: {header.group(1)!r} names none of {sorted(titles)}"


def test_quoted_ragcanary_commands_and_flags_exist() -> None:
    """Every `ragcanary ...` command the runbooks quote is a real subcommand with real options."""
    quoted = {
        page.name: ragcanary_commands(page.read_text(encoding="utf-8"))
        for page in RUNBOOKS.glob("*.md")
    }
    assert sum(map(len, quoted.values())) >= 20, quoted
    root = typer.main.get_command(app)
    for name, commands in quoted.items():
        for args in commands:
            command = root
            words = list(args)
            while hasattr(command, "commands"):  # a group: the next word names a subcommand
                assert words, f"{name}: `ragcanary {' '.join(args)}` names no subcommand"
                word = words.pop(0)
                found = command.commands.get(word)
                assert found is not None, f"{name}: no command `ragcanary ... {word}`"
                command = found
            options = {opt for param in command.params for opt in param.opts}
            flags = {w for w in words if w.startswith("-")}
            assert flags <= options, f"{name}: `ragcanary {' '.join(args)}`: {flags - options}"


@pytest.mark.parametrize("page", sorted(RUNBOOKS.glob("*.md")), ids=lambda p: p.stem)
def test_relative_links_resolve(page: Path) -> None:
    """Links between runbooks (and to anchors of the index) point at files that exist."""
    text = page.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#:]+\.md)(?:#[\w-]+)?\)", text):
        assert (page.parent / target).is_file(), f"{page.name} links to missing {target}"
