"""The runbooks' Markdown as HTML: the subset they use rendered, everything else escaped."""

from __future__ import annotations

import pytest

from ragcanary.serve.http.ui.markdown import render, slug
from ragcanary.serve.http.ui.runbookpage import href


def _html(text: str) -> str:
    return str(render(text, href))


@pytest.mark.parametrize(
    ("text", "html"),
    [
        ("# RagCanaryDown", '<h1 id="ragcanarydown">RagCanaryDown</h1>'),
        (
            "## Re-baselining after an intended change",
            '<h2 id="re-baselining-after-an-intended-change">'
            "Re-baselining after an intended change</h2>",
        ),
        ("one\ntwo\n\nthree", "<p>one two</p>\n<p>three</p>"),
        (
            "**Severity** critical, *really*",
            "<p><strong>Severity</strong> critical, <em>really</em></p>",
        ),
        ("`a*b*c` and 2 * 3 * 4", "<p><code>a*b*c</code> and 2 * 3 * 4</p>"),
        ("- one\n  more\n- two", "<ul><li>one more</li><li>two</li></ul>"),
        ("1. first\n\n2. second\n\nafter", "<ol><li>first</li><li>second</li></ol>\n<p>after</p>"),
        ("```sh\na < b && c\n```", "<pre><code>a &lt; b &amp;&amp; c</code></pre>"),
        (
            "| a | b |\n| --- | --- |\n| `x | y` | [Down](RagCanaryDown.md) |",
            '<div class="scroll" tabindex="0" role="region" aria-label="Table"><table><thead><tr>'
            '<th scope="col">a</th><th scope="col">b</th></tr></thead><tbody><tr>'
            '<td><code>x | y</code></td><td><a href="/ui/runbooks/RagCanaryDown">Down</a></td>'
            "</tr></tbody></table></div>",
        ),
    ],
)
def test_the_subset_the_runbooks_use_is_rendered(text: str, html: str) -> None:
    assert _html(text) == html


@pytest.mark.parametrize(
    "text",
    [
        "<script>alert(1)</script>",
        "# <img src=x onerror=alert(1)>",
        "- <iframe src=//evil.example>",
        "```\n</code></pre><script>alert(1)</script>\n```",
        "`<script>alert(1)</script>`",
        "[<script>alert(1)</script>](RagCanaryDown.md)",
        "| <script>alert(1)</script> |\n| --- |\n| <b onclick=x>cell</b> |",
        "**<script>alert(1)</script>**",
    ],
)
def test_no_tag_of_the_source_reaches_the_page(text: str) -> None:
    html = _html(text)
    for tag in ("<script", "<img", "<iframe", "<b "):
        assert tag not in html, html


@pytest.mark.parametrize(
    ("target", "link"),
    [
        ("RagCanaryStale.md", "/ui/runbooks/RagCanaryStale"),
        ("RagCanaryStale.md#check-first", "/ui/runbooks/RagCanaryStale#check-first"),
        ("README.md#re-baselining", "/ui/runbooks/#re-baselining"),
        ("#resolve", "#resolve"),
        ("https://prometheus.io/docs/", "https://prometheus.io/docs/"),
        ("RagCanaryNoSuchAlert.md", None),  # no such page on the daemon: the text alone
        ("../deploy.md", None),  # a file of the repository, which the daemon does not serve
        ("javascript:alert(1)", None),
        ("//evil.example/x", None),
        ("data:text/html,<script>", None),
    ],
)
def test_a_link_goes_to_a_runbook_an_anchor_or_the_web_only(target: str, link: str | None) -> None:
    assert href(target) == link
    rendered = _html(f"[see]({target.replace('(', '%28').replace(')', '%29')})")
    assert rendered == (f'<p><a href="{link}">see</a></p>' if link else "<p>see</p>")


def test_an_address_cannot_leave_its_attribute() -> None:
    html = _html('[x](https://example.com/"onmouseover="alert(1))')
    assert 'href="https://example.com/&#34;onmouseover=&#34;alert(1"' in html


def test_heading_anchors_are_github_s() -> None:
    assert slug("What it means") == "what-it-means"
    assert slug("`ragcanary diff`: first!") == "ragcanary-diff-first"
