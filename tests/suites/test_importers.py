"""Tests of converting BEIR and TREC collections into suite cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from ragcanary.errors import ConfigError
from ragcanary.measure.metrics import case_metrics
from ragcanary.suites.importers import Imported, read_beir, read_trec

SGML_TOPICS = """\
<top>

<num> Number: 301
<title> International Organized Crime

<desc> Description:
Identify organizations that participate in international criminal activity.

<narr> Narrative:
A relevant document must, as a minimum, identify the organization.

</top>

<top>
<head> Tipster Topic Description
<num> Number:  051
<dom> Domain: International Economics
<title> Topic:  Airbus
   Subsidies

<desc> Description:
Document will discuss government assistance to Airbus Industrie.
</top>

<TOP>
<NUM> Number: 302
<TITLE> Poliomyelitis and Post-Polio
</TOP>
"""

TREC_QRELS = """\
301 0 FBIS3-10082 1
301 0 FBIS3-10169 0
51 0 AP880212-0161 2
51 0 AP880216-0139 1
302 0 FBIS3-20000 0
999 0 OTHER-1 1
"""


def write(path: Path, text: str) -> Path:
    """Write a fixture file, creating its directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def beir_dir(tmp_path: Path, queries: list[object], qrels: str, split: str = "test") -> Path:
    """Lay out a tiny BEIR dataset directory."""
    lines = [q if isinstance(q, str) else json.dumps(q) for q in queries]
    write(tmp_path / "queries.jsonl", "\n".join(lines) + "\n")
    write(tmp_path / "qrels" / f"{split}.tsv", "query-id\tcorpus-id\tscore\n" + qrels)
    write(tmp_path / "corpus.jsonl", '{"_id": "d1", "title": "", "text": "unused"}\n')
    return tmp_path


def problem_of(exc: pytest.ExceptionInfo[ConfigError]) -> tuple[str, int | None, str]:
    """The file name, line and message of the single problem an import raised."""
    [problem] = exc.value.problems
    return Path(problem.file).name, problem.line, problem.message


def test_beir_imports_judged_queries_in_queries_file_order_with_graded_relevance(
    tmp_path: Path,
) -> None:
    """Cases keep queries.jsonl order and every grade, 0 (judged not relevant, which bpref and
    judged@k count, as trec_eval does from the same qrels) included, and ignore unjudged
    queries."""
    directory = beir_dir(
        tmp_path,
        [
            {"_id": "q2", "text": "what is bm25", "metadata": {}},
            {"_id": "q1", "text": "  dense retrieval  "},
            {"_id": "q3", "text": "not in this split"},
            {"_id": 4, "text": "numeric id"},
        ],
        "q1\td1\t1\nq1\td2\t0\nq2\td3\t2\nq2\td4\t1\n4\td9\t1\n",
    )
    assert read_beir(directory) == Imported(
        cases=[
            {"id": "q2", "query": "what is bm25", "relevant": {"d3": 2, "d4": 1}},
            {"id": "q1", "query": "dense retrieval", "relevant": {"d1": 1, "d2": 0}},
            {"id": "4", "query": "numeric id", "relevant": {"d9": 1}},
        ],
        skipped=0,
    )


def test_beir_skips_and_counts_queries_without_a_relevant_document(tmp_path: Path) -> None:
    """A query judged only non-relevant cannot be scored, so it is counted, not imported."""
    directory = beir_dir(
        tmp_path,
        [{"_id": "q1", "text": "a"}, {"_id": "q2", "text": "b"}, {"_id": "q3", "text": "c"}],
        "q1\td1\t0\nq2\td2\t1\nq3\td3\t-1\n",
    )
    imported = read_beir(directory)
    assert [c["id"] for c in imported.cases] == ["q2"]
    assert imported.skipped == 2


def test_beir_reads_the_requested_split(tmp_path: Path) -> None:
    """The split argument picks qrels/<split>.tsv."""
    directory = beir_dir(tmp_path, [{"_id": "q1", "text": "a"}], "q1\td1\t1\n", split="dev")
    assert read_beir(directory, split="dev").cases == [
        {"id": "q1", "query": "a", "relevant": {"d1": 1}}
    ]


def test_beir_missing_split_names_the_available_splits(tmp_path: Path) -> None:
    """Asking for a split the dataset lacks says which splits exist."""
    directory = beir_dir(tmp_path, [{"_id": "q1", "text": "a"}], "q1\td1\t1\n", split="dev")
    with pytest.raises(ConfigError) as exc:
        read_beir(directory)
    [problem] = exc.value.problems
    assert problem.file.endswith("test.tsv")
    assert "dev" in problem.fix


def test_beir_missing_queries_file_is_a_located_error(tmp_path: Path) -> None:
    """A dataset without queries.jsonl fails with the file named, not a traceback."""
    write(tmp_path / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    with pytest.raises(ConfigError) as exc:
        read_beir(tmp_path)
    name, line, message = problem_of(exc)
    assert (name, line) == ("queries.jsonl", None)
    assert "cannot read" in message


@pytest.mark.parametrize(
    ("queries", "qrels", "where", "message"),
    [
        (['{"_id": "q1", "text": "a"}', "{not json"], "q1\td1\t1\n", ("queries.jsonl", 2), "JSON"),
        (['["q1", "a"]'], "q1\td1\t1\n", ("queries.jsonl", 1), "not a JSON object"),
        (['{"text": "a"}'], "q1\td1\t1\n", ("queries.jsonl", 1), '"_id"'),
        (['{"_id": "q1", "text": " "}'], "q1\td1\t1\n", ("queries.jsonl", 1), '"text"'),
        (
            ['{"_id": "q1", "text": "a"}', '{"_id": "q1", "text": "b"}'],
            "q1\td1\t1\n",
            ("queries.jsonl", 2),
            "twice",
        ),
        (['{"_id": "q1", "text": "a"}'], "q1\td1\t1\nq1\td2\n", ("test.tsv", 3), "3 columns"),
        (['{"_id": "q1", "text": "a"}'], "q1\td1\t0.5\n", ("test.tsv", 2), "not an integer"),
        (['{"_id": "q1", "text": "a"}'], "q1\td1\t1\nq1\td1\t2\n", ("test.tsv", 3), "again"),
        (['{"_id": "q1", "text": "a"}'], "q1\td1\t1\n\nq7\td1\t1\n", ("test.tsv", 4), '"q7"'),
    ],
)
def test_beir_bad_input_is_reported_with_file_and_line(
    tmp_path: Path, queries: list[object], qrels: str, where: tuple[str, int], message: str
) -> None:
    """Every malformed line is a ConfigError naming its file and 1-based line."""
    directory = beir_dir(tmp_path, queries, qrels)
    with pytest.raises(ConfigError) as exc:
        read_beir(directory)
    name, line, text = problem_of(exc)
    assert (name, line) == where
    assert message in text


def test_beir_identical_duplicate_judgements_are_accepted(tmp_path: Path) -> None:
    """Repeating the same judgement is harmless; only conflicting grades are an error."""
    directory = beir_dir(tmp_path, [{"_id": "q1", "text": "a"}], "q1\td1\t2\nq1\td1\t2\n")
    assert read_beir(directory).cases == [{"id": "q1", "query": "a", "relevant": {"d1": 2}}]


def test_trec_sgml_topics_use_titles_in_topic_order(tmp_path: Path) -> None:
    """Titles drop Topic: and line breaks, ids drop leading zeros, unjudged topics are skipped."""
    topics = write(tmp_path / "topics.301-302", SGML_TOPICS)
    qrels = write(tmp_path / "qrels.txt", TREC_QRELS)
    assert read_trec(qrels, topics) == Imported(
        cases=[
            {
                "id": "301",
                "query": "International Organized Crime",
                "relevant": {"FBIS3-10082": 1, "FBIS3-10169": 0},
            },
            {
                "id": "51",
                "query": "Airbus Subsidies",
                "relevant": {"AP880212-0161": 2, "AP880216-0139": 1},
            },
        ],
        skipped=1,
    )


@pytest.mark.parametrize(
    "topics_text",
    [
        "301\tInternational Organized Crime\n51\tAirbus  Subsidies\n302\tPolio\n",
        "301 International Organized Crime\r\n\r\n051 Airbus Subsidies\r\n302 Polio\r\n",
    ],
    ids=["tab-separated", "space-separated-crlf"],
)
def test_trec_plain_topics_are_detected_and_read(tmp_path: Path, topics_text: str) -> None:
    """A topics file without <top> blocks is read as one qid and query per line."""
    topics = write(tmp_path / "topics.tsv", topics_text)
    qrels = write(tmp_path / "qrels.txt", TREC_QRELS)
    imported = read_trec(qrels, topics)
    assert [(c["id"], c["query"]) for c in imported.cases] == [
        ("301", "International Organized Crime"),
        ("51", "Airbus Subsidies"),
    ]
    assert imported.skipped == 1


def test_trec_tab_separated_queries_may_contain_spaces_and_hashes(tmp_path: Path) -> None:
    """With a tab present, everything after it is the query, kept verbatim apart from spacing."""
    topics = write(tmp_path / "q.tsv", "q-1\twhat is C# | F#?\n")
    qrels = write(tmp_path / "qrels.txt", "q-1 0 d1 1\n")
    assert read_trec(qrels, topics).cases == [
        {"id": "q-1", "query": "what is C# | F#?", "relevant": {"d1": 1}}
    ]


@pytest.mark.parametrize(
    ("qrels_text", "topics_text", "where", "message"),
    [
        ("301 0 d1 1\n301 0 d2\n", "301\ta\n", ("qrels.txt", 2), "4 columns"),
        ("301 0 d1 yes\n", "301\ta\n", ("qrels.txt", 1), '"yes" is not an integer'),
        ("301 0 d1 1\n", "301\ta\n\n301\tb\n", ("topics.txt", 3), "twice"),
        ("301 0 d1 1\n", "301\ta\njustone\n", ("topics.txt", 2), "no query-id and query"),
        ("301 0 d1 1\n", "x\n<top>\n<title> t\n</top>\n", ("topics.txt", 2), "no <num>"),
        ("301 0 d1 1\n", "<top>\n<num> Number: 301\n</top>\n", ("topics.txt", 1), "<title>"),
        ("301 0 d1 1\n", "<top><num>1<title>a</top>\n<top>\n", ("topics.txt", 2), "</top>"),
        (
            "301 0 d1 1\n",
            "<top><num>1<title>a\n<top><num>2<title>b</top>",
            ("topics.txt", 1),
            "</top>",
        ),
    ],
)
def test_trec_bad_input_is_reported_with_file_and_line(
    tmp_path: Path, qrels_text: str, topics_text: str, where: tuple[str, int], message: str
) -> None:
    """Malformed qrels or topics are a ConfigError naming the file and 1-based line."""
    qrels = write(tmp_path / "qrels.txt", qrels_text)
    topics = write(tmp_path / "topics.txt", topics_text)
    with pytest.raises(ConfigError) as exc:
        read_trec(qrels, topics)
    name, line, text = problem_of(exc)
    assert (name, line) == where
    assert message in text


@pytest.mark.parametrize("missing", ["qrels", "topics"])
def test_trec_missing_file_is_a_config_error(tmp_path: Path, missing: str) -> None:
    """A path that does not exist is reported with its name."""
    qrels = tmp_path / "qrels.txt"
    topics = tmp_path / "topics.txt"
    if missing != "qrels":
        write(qrels, "301 0 d1 1\n")
    if missing != "topics":
        write(topics, "301\ta\n")
    with pytest.raises(ConfigError) as exc:
        read_trec(qrels, topics)
    assert exc.value.problems[0].file == str(qrels if missing == "qrels" else topics)


def test_non_utf8_file_is_located_at_the_offending_line(tmp_path: Path) -> None:
    """Undecodable bytes are a ConfigError on the line that holds them."""
    qrels = tmp_path / "qrels.txt"
    qrels.write_bytes(b"301 0 d1 1\n301 0 d\xff 1\n")
    topics = write(tmp_path / "topics.txt", "301\ta\n")
    with pytest.raises(ConfigError) as exc:
        read_trec(qrels, topics)
    assert problem_of(exc)[:2] == ("qrels.txt", 2)


ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=8)


@settings(max_examples=40, deadline=None)
@given(
    judgements=st.dictionaries(
        ids.map(lambda s: "q" + s),
        st.dictionaries(ids, st.integers(min_value=-2, max_value=3), min_size=1, max_size=4),
        max_size=6,
    )
)
def test_trec_round_trips_every_judgement_a_suite_can_hold(
    tmp_path_factory: pytest.TempPathFactory, judgements: dict[str, dict[str, int]]
) -> None:
    """A query with a positive grade becomes a case carrying its grades of 0 and more (a
    negative grade, junk in some TREC tracks, has no place in a suite); the other queries
    are counted as skipped."""
    directory = tmp_path_factory.mktemp("trec")
    topics = write(directory / "topics.tsv", "".join(f"{q}\tquery {q}\n" for q in judgements))
    qrels = write(
        directory / "qrels.txt",
        "".join(f"{q} 0 {d} {g}\n" for q, docs in judgements.items() for d, g in docs.items()),
    )
    imported = read_trec(qrels, topics)
    expected = {
        q: {d: g for d, g in docs.items() if g >= 0}
        for q, docs in judgements.items()
        if any(g > 0 for g in docs.values())
    }
    assert {c["id"]: c["relevant"] for c in imported.cases} == expected
    assert [c["id"] for c in imported.cases] == list(expected)
    assert imported.skipped == len(judgements) - len(expected)


def test_an_imported_suite_scores_bpref_as_trec_eval_does_on_its_qrels(tmp_path: Path) -> None:
    """The judged non-relevant documents of the qrels reach the suite: bpref of a ranking that
    puts one above the relevant document is trec_eval's 0, not the 1 it would be without them."""
    qrels = {"q1": {"d1": 1, "d2": 0, "d3": 0}}
    lines = "".join(f"q1\t{doc}\t{grade}\n" for doc, grade in qrels["q1"].items())
    (case,) = read_beir(beir_dir(tmp_path, [{"_id": "q1", "text": "a"}], lines)).cases
    ranking = ["d2", "d1", "d3"]
    ours = case_metrics(ranking, case["relevant"], (1, 3), depth=3)["bpref"]
    run = {"q1": {doc: 1.0 / (i + 1) for i, doc in enumerate(ranking)}}
    reference = pytrec_eval.RelevanceEvaluator(qrels, {"bpref"}).evaluate(run)["q1"]["bpref"]
    assert reference == 0.0
    assert ours == pytest.approx(reference, abs=1e-9)
