"""Reading knowledge files: articles split into passages, FAQs from YAML and CSV, JSON documents, clear errors."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vigil.knowledge.documents import KnowledgeFileError, discover, read

ARTICLE = """---
id: esim-setup
title: Setting up an eSIM
tags: [mobile, esim]
product: mobile
url: https://help.example/esim
---

An eSIM is a digital SIM.

## Installing an eSIM on an iPhone

Go to Settings > Mobile Service > Add eSIM.

## Installing an eSIM on Android

Go to Settings > Connections > SIM manager.
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_an_article_is_one_entry_with_a_passage_per_section(tmp_path: Path):
    (entry,) = read(write(tmp_path, "esim-setup.md", ARTICLE))
    assert (entry.id, entry.kind, entry.title, entry.product) == (
        "esim-setup",
        "article",
        "Setting up an eSIM",
        "mobile",
    )
    assert entry.tags == ("mobile", "esim") and entry.url == "https://help.example/esim"
    assert [p.heading for p in entry.passages] == [
        None,
        "Installing an eSIM on an iPhone",
        "Installing an eSIM on Android",
    ]
    assert entry.passages[1].id == "esim-setup#2"
    assert entry.passages[1].text.startswith("Setting up an eSIM: Installing an eSIM on an iPhone\n")


def test_long_sections_are_cut_at_paragraphs(tmp_path: Path):
    body = "\n\n".join(f"Paragraph {n} " + "word " * 100 for n in range(10))
    (entry,) = read(write(tmp_path, "long.md", f"---\nid: long\ntitle: Long\n---\n\n## Section\n\n{body}\n"))
    assert len(entry.passages) > 2
    assert all(len(p.text) < 2200 for p in entry.passages)
    assert "Paragraph 9" in entry.passages[-1].text


def test_faqs_from_yaml_and_csv(tmp_path: Path):
    yaml_file = write(
        tmp_path,
        "faqs.yaml",
        "faqs:\n  - id: faq-bill\n    question: When is my bill taken?\n"
        "    answer: On the 1st.\n    alternates: [what day do you take payment]\n",
    )
    (faq,) = read(yaml_file)
    assert (faq.kind, faq.title, faq.body) == ("faq", "When is my bill taken?", "On the 1st.")
    assert faq.questions == ("When is my bill taken?", "what day do you take payment")
    csv_file = write(
        tmp_path,
        "faqs.csv",
        'id,question,answer,alternates\nfaq-sim,Lost SIM?,"Call us, we block it.",lost sim|stolen sim\n',
    )
    (row,) = read(csv_file)
    assert row.body == "Call us, we block it." and row.questions == ("Lost SIM?", "lost sim", "stolen sim")


def test_json_and_jsonl_documents(tmp_path: Path):
    docs = [{"id": "doc_(general)_1", "title": "Opening accounts", "content": "## Eligibility\n\nBe 18."}]
    (a,) = read(write(tmp_path, "docs.json", json.dumps(docs)))
    (b,) = read(write(tmp_path, "docs.jsonl", json.dumps(docs[0]) + "\n"))
    assert a.id == b.id == "doc_(general)_1" and a.kind == "document" and a.passages[0].heading == "Eligibility"


@pytest.mark.parametrize(
    ("name", "text", "line", "words"),
    [
        ("a.md", "no front matter", 1, "front matter"),
        ("b.md", "---\nid: x\n---\n\nbody", 1, "title"),
        ("c.md", "---\nid: [oops\ntitle: t\n---\nbody", 3, "YAML"),
        ("d.md", "---\nid: has space\ntitle: t\n---\nbody", 1, "not a valid id"),
        ("e.yaml", "faqs:\n  - id: ok\n    question: q\n    answer: a\n  - id: bad\n    question: q2\n", 5, "answer"),
        ("f.csv", "id,question\nx,y\n", 1, "answer"),
        ("g.jsonl", '{"id": "a", "title": "t", "content": "c"}\n{broken\n', 2, "JSON"),
        ("h.json", '[{"id": "a", "title": "t"}]', None, "content"),
    ],
)
def test_bad_files_name_the_file_and_line(tmp_path: Path, name: str, text: str, line: int | None, words: str):
    path = write(tmp_path, name, text)
    with pytest.raises(KnowledgeFileError) as caught:
        read(path)
    assert caught.value.path == path and caught.value.line == line
    assert words in str(caught.value) and str(path) in str(caught.value)


def test_discover_finds_knowledge_files_and_skips_readmes(tmp_path: Path):
    write(tmp_path, "README.md", "# about")
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", "a.md", ARTICLE)
    write(tmp_path, "notes.txt", "ignored")
    assert discover([tmp_path]) == [tmp_path / "sub" / "a.md"]
    with pytest.raises(KnowledgeFileError):
        discover([tmp_path / "missing"])


def test_the_bundled_help_centre_loads():
    root = Path(__file__).parent.parent.parent / "knowledge"
    entries = [e for path in discover([root / "articles", root / "faqs"]) for e in read(path)]
    kinds = [e.kind for e in entries]
    assert kinds.count("article") >= 30 and kinds.count("faq") >= 40
    assert len({e.id for e in entries}) == len(entries)


# --- An entry's tenant (issue 8, item 14): absent is every tenant ---


def test_a_tenant_is_set_in_front_matter_faq_files_csv_and_documents(tmp_path: Path):
    (article,) = read(write(tmp_path, "a.md", ARTICLE.replace("product: mobile", "product: mobile\ntenant: acme")))
    assert article.tenant == "acme"
    assert read(write(tmp_path, "b.md", ARTICLE))[0].tenant is None
    faqs = read(
        write(
            tmp_path,
            "faqs.yaml",
            "tenant: acme\nfaqs:\n  - id: faq-1\n    question: q1\n    answer: a1\n"
            "  - id: faq-2\n    question: q2\n    answer: a2\n    tenant: globex\n",
        )
    )
    assert [(f.id, f.tenant) for f in faqs] == [("faq-1", "acme"), ("faq-2", "globex")]
    rows = read(write(tmp_path, "faqs.csv", "id,question,answer,tenant\nfaq-3,q3,a3,globex\nfaq-4,q4,a4,\n"))
    assert [(r.id, r.tenant) for r in rows] == [("faq-3", "globex"), ("faq-4", None)]
    docs = [{"id": "d1", "title": "t", "content": "c", "tenant": "acme"}, {"id": "d2", "title": "t", "content": "c"}]
    assert [d.tenant for d in read(write(tmp_path, "docs.json", json.dumps(docs)))] == ["acme", None]


def test_moving_an_entry_to_a_tenant_changes_its_digest(tmp_path: Path):
    (article,) = read(write(tmp_path, "a.md", ARTICLE))
    assert replace(article, tenant="acme").digest != article.digest
    assert replace(article, tenant="acme").digest != replace(article, tenant="globex").digest


@pytest.mark.parametrize("tenant", ['"*"', "[acme, globex]", '"bad\\u0000id"', '"' + "x" * 257 + '"'])
def test_a_bad_tenant_is_refused_with_the_file_and_line(tmp_path: Path, tenant: str):
    path = write(tmp_path, "faqs.yaml", f"faqs:\n  - id: ok\n    question: q\n    answer: a\n    tenant: {tenant}\n")
    with pytest.raises(KnowledgeFileError, match="not a tenant id") as caught:
        read(path)
    assert caught.value.line == 2


# --- An entry's expiry (issue 12: "an optional expiry"): absent is never ---


def test_an_expiry_is_set_in_front_matter_faq_files_csv_and_documents(tmp_path: Path):
    (article,) = read(
        write(tmp_path, "a.md", ARTICLE.replace("product: mobile", "product: mobile\nexpires: 2027-03-31"))
    )
    assert article.expires_at == datetime(2027, 3, 31, tzinfo=UTC)
    assert read(write(tmp_path, "b.md", ARTICLE))[0].expires_at is None
    faqs = read(
        write(
            tmp_path,
            "faqs.yaml",
            "faqs:\n  - id: faq-1\n    question: q1\n    answer: a1\n    expires: 2027-01-01T09:30:00+01:00\n"
            "  - id: faq-2\n    question: q2\n    answer: a2\n",
        )
    )
    assert [f.expires_at for f in faqs] == [datetime(2027, 1, 1, 8, 30, tzinfo=UTC), None]
    rows = read(write(tmp_path, "faqs.csv", "id,question,answer,expires\nfaq-3,q3,a3,2027-06-01 12:00\nfaq-4,q4,a4,\n"))
    assert [r.expires_at for r in rows] == [datetime(2027, 6, 1, 12, tzinfo=UTC), None]
    docs = [{"id": "d1", "title": "t", "content": "c", "expires": "2027-02-01T00:00:00Z"}]
    (doc,) = read(write(tmp_path, "docs.json", json.dumps(docs)))
    assert doc.expires_at == datetime(2027, 2, 1, tzinfo=UTC)


def test_setting_or_moving_an_expiry_changes_the_digest_and_no_expiry_keeps_the_old_one(tmp_path: Path):
    (article,) = read(write(tmp_path, "a.md", ARTICLE))
    (expiring,) = read(
        write(tmp_path, "b.md", ARTICLE.replace("product: mobile", "product: mobile\nexpires: 2027-03-31"))
    )
    assert replace(expiring, origin=article.origin).digest != article.digest
    assert replace(expiring, expires_at=datetime(2027, 4, 1, tzinfo=UTC)).digest != expiring.digest
    assert replace(expiring, expires_at=None).digest == article.digest


@pytest.mark.parametrize("expires", ["soon", "'2027-13-01'", "[2027-01-01]", "31/03/2027"])
def test_an_expiry_that_is_not_a_date_is_refused_with_the_file_and_line(tmp_path: Path, expires: str):
    path = write(tmp_path, "faqs.yaml", f"faqs:\n  - id: ok\n    question: q\n    answer: a\n    expires: {expires}\n")
    with pytest.raises(KnowledgeFileError, match="is not a date") as caught:
        read(path)
    assert caught.value.line == 2


def test_a_yaml_value_that_looks_like_a_date_but_is_none_is_refused_not_raised(tmp_path: Path):
    path = write(tmp_path, "faqs.yaml", "faqs:\n  - id: ok\n    question: q\n    answer: a\n    expires: 2027-13-01\n")
    with pytest.raises(KnowledgeFileError, match=r"not what it looks like: month must be in 1\.\.12"):
        read(path)
    article = ARTICLE.replace("product: mobile", "product: mobile\nexpires: 2027-02-30")
    with pytest.raises(KnowledgeFileError, match="front matter holds a value that is not what it looks like"):
        read(write(tmp_path, "a.md", article))
